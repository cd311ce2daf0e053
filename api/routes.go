package api

import (
	"fmt"
	"net/http"
)

// routes mounts every endpoint on s.mux and returns the server's handler:
// the mux behind the guards (Host, origin, content type, body bounds).
func (s *Server) routes() http.Handler {
	s.Handle("POST /v1/chat/completions", http.HandlerFunc(s.handleChat))
	s.Handle("POST /v1/completions", http.HandlerFunc(s.handleCompletions))
	s.Handle("POST /v1/messages", http.HandlerFunc(s.handleMessages))
	s.Handle("POST /v1/responses", http.HandlerFunc(s.handleResponses))
	s.Handle("GET /v1/models", http.HandlerFunc(s.handleModels))
	s.Handle("GET /v1/models/{model}", http.HandlerFunc(s.handleModel))
	s.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)})
	}))
	s.Handle("POST /api/strata/generate", s.boundGenerate(s.admit(GenerateHandler(s.cfg.Generator))))
	s.Handle("POST /api/chat", http.HandlerFunc(s.handleOllamaChat))
	s.Handle("POST /api/generate", http.HandlerFunc(s.handleOllamaGenerate))
	s.Handle("GET /api/tags", http.HandlerFunc(s.handleOllamaTags))
	s.Handle("POST /api/show", http.HandlerFunc(s.handleOllamaShow))
	s.Handle("GET /api/ps", http.HandlerFunc(s.handleOllamaPs))
	s.Handle("GET /api/version", http.HandlerFunc(s.handleOllamaVersion))
	s.Handle("GET /api/cluster", ClusterHandler(s.cfg.Cluster))
	if s.cfg.Doctor != nil {
		s.Handle("GET /api/doctor", DoctorHandler(s.cfg.Doctor))
	}
	s.Handle("GET /api/stats", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		writeJSONValue(w, s.metrics.Snapshot())
	}))
	s.Handle("GET /metrics", s.cfg.Metrics.Handler())
	s.mux.Handle("/", dashboardHandler()) // public: static files only, no data
	return s.guard(s.mux)
}

// Handle mounts an extra handler (e.g. a node's status endpoint) behind
// the API key. Patterns are net/http.ServeMux patterns. Like every route,
// it is reached only through the Host, origin and content-type checks,
// and its body (if any) is read in full, bounded in bytes and time,
// before it runs.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.auth(s.readBody(h)))
}

package api

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
)

// dashboardFiles is the web dashboard: plain HTML, CSS and JavaScript,
// served as they are (no build step, nothing fetched from elsewhere).
//
//go:embed dashboard
var dashboardFiles embed.FS

// dashboardHandler serves the dashboard at / (index.html, app.js,
// style.css). The files hold no data: the page reads /api/cluster,
// /api/stats and /v1/* with the API key the user gives it.
func dashboardHandler() http.Handler {
	sub, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

func writeJSONValue(w http.ResponseWriter, v any) {
	json.NewEncoder(w).Encode(v)
}

package api

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The request path every endpoint shares. On loopback without an API key
// any program on this machine is a client, and so is any web page the
// user opens: a page can send "simple" cross-origin requests (text/plain
// POSTs) and, after rebinding its own DNS name to 127.0.0.1, read the
// answers. guard refuses both before any handler runs: the Host must be
// one only this machine can mean, a browser must say the request comes
// from the API's own origin, and a body must be declared JSON (which a
// page cannot send cross-origin without a CORS preflight, never granted).

func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &timedWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: s.cfg.WriteTimeout}
		tw.extend() // a deadline left from the last request on this connection must not cut this one
		defer tw.extend()
		if !s.hostAllowed(r.Host) {
			s.metrics.request("guard", http.StatusForbidden)
			writeErrorShape(tw, shapeOfPath(r.URL.Path), &Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: strPtr("host_not_allowed"),
				Message: fmt.Sprintf("Host %q is not allowed: this API answers to localhost and IP addresses (and the names given with --allowed-host).", r.Host)})
			return
		}
		_, pattern := s.mux.Handler(r)
		static := pattern == "/" // the dashboard's files: linking to them from elsewhere is fine
		if !static || !safeMethod(r.Method) {
			if why := crossOrigin(r); why != "" {
				s.metrics.request("guard", http.StatusForbidden)
				writeErrorShape(tw, shapeOfPath(r.URL.Path), &Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: strPtr("cross_origin"),
					Message: "Cross-origin requests are refused (" + why + "); call the API from its own dashboard or from a program."})
				return
			}
		}
		if !static && !safeMethod(r.Method) && !isJSON(r.Header.Get("Content-Type")) && !s.untypedJSONAllowed(r) {
			s.metrics.request("guard", http.StatusUnsupportedMediaType)
			writeErrorShape(tw, shapeOfPath(r.URL.Path), &Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: strPtr("unsupported_media_type"),
				Message: fmt.Sprintf("The request body must be JSON, sent with \"Content-Type: application/json\" (got %q).", r.Header.Get("Content-Type"))})
			return
		}
		next.ServeHTTP(tw, r)
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// hostAllowed says whether a request's Host can only mean this API. An
// IP address cannot be rebound, and "localhost" (with *.localhost, RFC
// 6761) resolves to this machine in every browser; any other name could
// be an attacker's, pointed at 127.0.0.1 after the page loaded. With an
// API key every request needs the key, which a foreign page does not
// have, so any name is accepted (nodes are reached by their LAN names).
func (s *Server) hostAllowed(hostport string) bool {
	if s.cfg.APIKey != "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || net.ParseIP(host) != nil {
		return true
	}
	for _, h := range s.cfg.AllowedHosts {
		if h == "*" || strings.EqualFold(strings.TrimSuffix(h, "."), host) {
			return true
		}
	}
	return false
}

// crossOrigin returns why a request comes from another origin, or "".
// Browsers send Sec-Fetch-Site on every request (and Origin on every
// cross-origin one and every POST); programs send neither.
func crossOrigin(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none": // none: the user typed the address
	default:
		return "Sec-Fetch-Site: " + site
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || origin == "null" {
		return fmt.Sprintf("Origin %q", origin)
	}
	if !strings.EqualFold(u.Host, r.Host) {
		return fmt.Sprintf("Origin %s for host %s", origin, r.Host)
	}
	return ""
}

// untypedJSONAllowed says whether a body not declared JSON may still be
// read as JSON: only on Ollama's routes, whose users follow Ollama's own
// examples (curl -d, which declares a form) and clients. It is safe when
// the API has a key (auth follows: a page cannot attach the key to a
// simple request) or when the request bears none of the marks every
// browser of the last years puts on a cross-origin POST (Origin,
// Sec-Fetch-*, and Referer unless the page suppressed it): a program
// sent it. A browser that sends neither Origin nor Sec-Fetch-Site on a
// cross-origin POST (Firefox before 70, 2019) is the residual risk,
// written down in SECURITY.md.
func (s *Server) untypedJSONAllowed(r *http.Request) bool {
	if !ollamaPaths[r.URL.Path] {
		return false
	}
	if s.cfg.APIKey != "" {
		return true
	}
	for _, h := range []string{"Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Referer"} {
		if r.Header.Get(h) != "" {
			return false
		}
	}
	return true
}

// isJSON says whether a Content-Type is application/json (any
// parameters, e.g. charset).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// readBody reads the whole request body, bounded in size and time, before
// h runs: a handler that queues (or takes a generation slot) never does so
// for a client still trickling its body in. The read deadline is lifted
// afterwards, as a generation may outlast it and the server watches the
// connection to learn that a client left.
func (s *Server) readBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout)) // unsupported (httptest recorders): Serve's ReadTimeout still bounds it
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			// The rest of the body is not worth waiting for: without this the
			// server would try to read it, to keep the connection, before
			// answering.
			w.Header().Set("Connection", "close")
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				s.fail(w, "body", tooLarge(mbe.Limit))
			case errors.Is(err, os.ErrDeadlineExceeded):
				s.fail(w, "body", &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: strPtr("request_timeout"),
					Message: fmt.Sprintf("The request body did not arrive within %s.", s.cfg.ReadTimeout)})
			default:
				s.fail(w, "body", badRequest("", "", "cannot read the request body: %v", err))
			}
			return
		}
		rc.SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		h.ServeHTTP(w, r)
	})
}

// timedWriter gives every write of a response its own deadline, so a
// client that stops reading a stream frees its generation slot after d
// instead of blocking it forever; a whole-response WriteTimeout would cut
// long generations that the client is reading.
type timedWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
	// held: a flush waits for the next one (holdFlushes).
	held bool
}

func (t *timedWriter) extend() { t.rc.SetWriteDeadline(time.Now().Add(t.d)) }

func (t *timedWriter) Write(p []byte) (int, error) {
	t.extend()
	return t.ResponseWriter.Write(p)
}

// Flush implements http.Flusher for handlers that assert it.
func (t *timedWriter) Flush() { t.FlushError() }

// FlushError is what http.ResponseController.Flush calls.
func (t *timedWriter) FlushError() error {
	if t.held {
		return nil
	}
	t.extend()
	return t.rc.Flush()
}

// holdFlushes runs send, a token's write, with its flush left to the
// next write's when more tokens follow at once (a speculative step's
// checked tokens): they reach the client in one write, not a system
// call each. The stream's last event, or the handler's end, flushes.
func holdFlushes(w http.ResponseWriter, more bool, send func() error) error {
	tw, ok := w.(*timedWriter)
	if !ok || !more {
		return send()
	}
	tw.held = true
	defer func() { tw.held = false }()
	return send()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (t *timedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// auth requires the API key when one is configured, as
// "Authorization: Bearer KEY" (OpenAI's clients, Ollama's) or
// "x-api-key: KEY" (Anthropic's).
func (s *Server) auth(h http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return h
	}
	want := []byte(s.cfg.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(got) == "" {
			got = r.Header.Get("X-Api-Key")
		}
		var e *Error
		switch got = strings.TrimSpace(got); {
		case got == "":
			e = unauthorized("You didn't provide an API key. Send it as \"Authorization: Bearer KEY\" or \"x-api-key: KEY\".")
		case subtle.ConstantTimeCompare([]byte(got), want) != 1:
			e = unauthorized("Incorrect API key provided.")
		default:
			h.ServeHTTP(w, r)
			return
		}
		writeErrorShape(w, shapeOfPath(r.URL.Path), e)
		s.metrics.request("auth", e.Status)
	})
}

// admit runs h once the queue admits the request.
func (s *Server) admit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.enter(r.Context(), w, "generate") {
			return
		}
		defer s.queue.Release()
		h.ServeHTTP(w, r)
	})
}

// boundGenerate refuses an /api/strata/generate prompt that cannot fit the
// model's context by its bytes alone, before it queues and before the
// cluster tokenizes it (fitsBytes). The body is already read in full.
func (s *Server) boundGenerate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Model  string `json:"model"`
			Prompt string `json:"prompt"`
		}
		if json.Unmarshal(body, &req) == nil && req.Model != "" {
			if info, tok, err := s.cfg.Models.Lookup(req.Model); err == nil {
				if e := s.fitsBytes(info, tok, len(req.Prompt), "prompt"); e != nil {
					s.metrics.request("generate", http.StatusBadRequest)
					http.Error(w, e.Message, http.StatusBadRequest)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

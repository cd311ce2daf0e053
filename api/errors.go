package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Sentinel errors. Models implementations wrap ErrModelNotFound so the
// API answers 404; NewServer returns ErrAPIKeyRequired for a public
// address without a key.
var (
	ErrModelNotFound  = errors.New("api: model not found")
	ErrAPIKeyRequired = errors.New("api: an API key is required when the API binds to a non-loopback address")
	ErrQueueFull      = errors.New("api: too many requests are waiting")
	ErrLeaving        = errors.New("api: the node is leaving the cluster")
	// ErrNoRoom: the model exists in the cluster but this node's disk
	// budget has no room to fetch what it needs of it (503, not 404).
	ErrNoRoom = errors.New("api: no room on this node for the model")
)

// Error is an API error as OpenAI shapes it: the body is
// {"error": {"message", "type", "param", "code"}} and Status is the HTTP
// status it is sent with.
type Error struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// errorBody is the JSON envelope of an Error.
type errorBody struct {
	Error *Error `json:"error"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// badRequest is a 400 invalid_request_error about param (may be "").
func badRequest(param, code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...), Param: strPtr(param), Code: strPtr(code)}
}

func modelNotFound(name string) *Error {
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: strPtr("model"), Code: strPtr("model_not_found"),
		Message: fmt.Sprintf("The model %q does not exist on this cluster; GET /v1/models lists the models it can place.", name)}
}

func unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: strPtr("invalid_api_key"), Message: msg}
}

func queueFull(waiting int) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: "requests", Code: strPtr("rate_limit_exceeded"),
		Message: fmt.Sprintf("The server is busy: %d requests are already waiting. Retry later.", waiting)}
}

// busy: the cluster has no memory for another session now.
func busy(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strPtr("cluster_busy"),
		Message: "The cluster is busy (no memory for another session now): " + err.Error() + ". Retry shortly."}
}

func noRoom(name string, err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strPtr("node_disk_full"),
		Message: fmt.Sprintf("This node cannot serve %q: its budget for layers fetched from peers is full (%s). Send the request to another node of the cluster; its owner can raise --disk or remove fetched models (strata models rm).", name, strings.TrimPrefix(err.Error(), ErrNoRoom.Error()+": "))}
}

func joining(name string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strPtr("node_joining"),
		Message: fmt.Sprintf("This node has just started and has not heard from the rest of its cluster yet, so it does not know whether the cluster holds %q. Retry in a few seconds, or send the request to another node of the cluster.", name)}
}

func leaving() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strPtr("node_leaving"),
		Message: "This node is leaving the cluster (shutting down or restarting); send the request to another node of the cluster."}
}

func stopped() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strPtr("node_stopped"),
		Message: "This node stopped before the answer finished (it left the cluster after its drain timeout, or was shut down); send the request again, to another node of the cluster."}
}

// cancelled is the error of a request whose context ended before its
// answer was complete, for some other reason than the node stopping.
func cancelled(ctx context.Context) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strPtr("request_cancelled"),
		Message: fmt.Sprintf("The request was cancelled before its answer was complete (%v); send it again.", context.Cause(ctx))}
}

func tooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: strPtr("request_too_large"),
		Message: fmt.Sprintf("The request body is larger than %d bytes.", limit)}
}

func serverError(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// Error shapes: each surface answers errors the way its clients parse them.
const (
	shapeOpenAI    = iota // {"error": {"message", "type", "param", "code"}}
	shapeAnthropic        // {"type": "error", "error": {"type", "message"}}
	shapeOllama           // {"error": "message"}
)

// shapeOf is the error shape of an endpoint (a metrics label).
func shapeOf(endpoint string) int {
	switch endpoint {
	case "messages":
		return shapeAnthropic
	case "ollama":
		return shapeOllama
	}
	return shapeOpenAI
}

// shapeOfPath is the error shape of a request path, for the errors the
// shared checks (guard, auth) send before a surface's handler runs.
func shapeOfPath(path string) int {
	switch {
	case strings.HasPrefix(path, "/v1/messages"):
		return shapeAnthropic
	case ollamaPaths[path]:
		return shapeOllama
	}
	return shapeOpenAI
}

// anthropicType is the error type Anthropic's API gives a status.
func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusRequestTimeout:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	return "api_error"
}

// anthropicError is the body of an Anthropic error (also the data of a
// stream's error event).
type anthropicError struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func toAnthropic(e *Error) anthropicError {
	var b anthropicError
	b.Type = "error"
	b.Error.Type = anthropicType(e.Status)
	b.Error.Message = e.Message
	return b
}

// writeError sends e as an OpenAI-style JSON error.
func writeError(w http.ResponseWriter, e *Error) { writeErrorShape(w, shapeOpenAI, e) }

// writeErrorShape sends e in one surface's error shape.
func writeErrorShape(w http.ResponseWriter, shape int, e *Error) {
	w.Header().Set("Content-Type", "application/json")
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
	}
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(e.Status)
	switch shape {
	case shapeAnthropic:
		json.NewEncoder(w).Encode(toAnthropic(e))
	case shapeOllama:
		json.NewEncoder(w).Encode(map[string]string{"error": e.Message})
	default:
		json.NewEncoder(w).Encode(errorBody{e})
	}
}

// ollamaPaths are the routes of the Ollama API (ollama.go).
var ollamaPaths = map[string]bool{}

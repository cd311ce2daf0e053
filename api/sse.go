package api

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Server-sent events, as the OpenAI, Anthropic and Responses surfaces
// stream them. Each surface's writer sends the headers with its first
// event (startSSE), so that an error before any text still gets a proper
// HTTP status, and flushes every event as it goes (writeSSE), so that a
// client sees each piece when it is generated.

// startSSE sends the status and headers of an event stream.
func startSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // a proxy (nginx) must not hold the events back
	w.WriteHeader(http.StatusOK)
}

// writeSSE writes v as one event, "data: {json}\n\n", preceded by
// "event: name\n" when name is not empty, and flushes it.
func writeSSE(w http.ResponseWriter, rc *http.ResponseController, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if name != "" {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	} else {
		_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if err != nil {
		return err
	}
	return rc.Flush()
}

package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"strata/runtime/engine"
)

// OpenAI's Responses API: POST /v1/responses, text in and text out, as
// one response object or as its stream of named events
// (response.created ... response.output_text.delta ... response.completed),
// each carrying a sequence_number. Responses are not stored:
// previous_response_id is refused.

// ResponsesRequest is the body of POST /v1/responses.
type ResponsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"` // a string or an array of input items
	Instructions       string          `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Stream             bool            `json:"stream"`
	Tools              json.RawMessage `json:"tools"`
	Text               json.RawMessage `json:"text"`
	PreviousResponseID string          `json:"previous_response_id"`
}

// ResponseObject is a response (also the payload of the lifecycle events).
type ResponseObject struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"` // "response"
	CreatedAt         int64          `json:"created_at"`
	Status            string         `json:"status"` // in_progress, completed, incomplete, failed
	Model             string         `json:"model"`
	Output            []ResponseItem `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error             *Error            `json:"error"`
	Usage             *ResponsesUsage   `json:"usage"`
	Instructions      *string           `json:"instructions"`
	MaxOutputTokens   *int              `json:"max_output_tokens"`
	Temperature       *float64          `json:"temperature"`
	TopP              *float64          `json:"top_p"`
	Tools             []any             `json:"tools"`
	ParallelToolCalls bool              `json:"parallel_tool_calls"`
	ToolChoice        string            `json:"tool_choice"`
	Metadata          map[string]string `json:"metadata"`
}

// ResponseItem is one output item: an assistant message.
type ResponseItem struct {
	Type    string         `json:"type"` // "message"
	ID      string         `json:"id"`
	Status  string         `json:"status"`
	Role    string         `json:"role"`
	Content []ResponsePart `json:"content"`
}

// ResponsePart is a part of a message: output text.
type ResponsePart struct {
	Type        string `json:"type"` // "output_text"
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

// ResponsesUsage counts tokens as the Responses API does.
type ResponsesUsage struct {
	InputTokens        int                `json:"input_tokens"`
	InputTokensDetails InputTokensDetails `json:"input_tokens_details"`
	OutputTokens       int                `json:"output_tokens"`
	TotalTokens        int                `json:"total_tokens"`
}

// InputTokensDetails breaks input_tokens down (cached_tokens: read from
// the prompt cache).
type InputTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	const ep = "responses"
	var req ResponsesRequest
	if e := s.readJSON(w, r, &req); e != nil {
		s.fail(w, ep, e)
		return
	}
	j := &job{endpoint: ep, model: req.Model, id: "resp_" + randomID(), created: start.Unix()}
	if req.PreviousResponseID != "" {
		s.fail(w, ep, badRequest("previous_response_id", "unsupported_value", "Responses are not stored here; send the whole conversation as input."))
		return
	}
	if !empty(req.Text) {
		var t struct {
			Format struct {
				Type string `json:"type"`
			} `json:"format"`
		}
		if json.Unmarshal(req.Text, &t) != nil || (t.Format.Type != "" && t.Format.Type != "text") {
			s.fail(w, ep, badRequest("text.format", "unsupported_value", "Only text output is supported yet."))
			return
		}
	}
	f := SamplingFields{Stream: req.Stream, Temperature: req.Temperature, TopP: req.TopP, MaxTokens: req.MaxOutputTokens, Tools: req.Tools}
	if e := s.settings(f, j); e != nil {
		if e.Param != nil && *e.Param == "max_tokens" {
			e.Param = strPtr("max_output_tokens")
		}
		s.fail(w, ep, e)
		return
	}
	msgs, e := responsesInput(req.Input)
	if e != nil {
		s.fail(w, ep, e)
		return
	}
	if req.Instructions != "" {
		msgs = append([]Message{{Role: "system", Content: req.Instructions}}, msgs...)
	}
	if e := s.chatPrompt(r.Context(), j, msgs, "input"); e != nil || r.Context().Err() != nil {
		if e != nil {
			s.fail(w, ep, e)
		} else {
			s.metrics.request(ep, 499)
		}
		return
	}
	base := ResponseObject{ID: j.id, Object: "response", CreatedAt: j.created, Status: "in_progress", Model: req.Model, Output: []ResponseItem{},
		MaxOutputTokens: req.MaxOutputTokens, Temperature: req.Temperature, TopP: req.TopP, Tools: []any{}, ToolChoice: "auto", Metadata: map[string]string{}}
	if req.Instructions != "" {
		base.Instructions = &req.Instructions
	}
	out := &responsesOut{w: w, rc: http.NewResponseController(w), j: j, base: base, itemID: "msg_" + randomID()}
	s.run(w, r, j, out, start)
}

// responsesInput reads input: a string (one user message) or an array of
// messages ({"role", "content"} with or without "type": "message"), whose
// content is a string or input_text/output_text parts.
func responsesInput(raw json.RawMessage) ([]Message, *Error) {
	raw = bytes.TrimSpace(raw)
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []Message{{Role: "user", Content: one}}, nil
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, badRequest("input", "invalid_value", "input must be a string or a non-empty array of messages.")
	}
	var msgs []Message
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		if it.Type != "" && it.Type != "message" {
			return nil, badRequest(param+".type", "unsupported_value", "Input items of type %q are not supported; only messages.", it.Type)
		}
		role := it.Role
		if role == "developer" {
			role = "system"
		}
		if role != "system" && role != "user" && role != "assistant" {
			return nil, badRequest(param+".role", "invalid_value", "Invalid role %q: expected user, assistant, system or developer.", it.Role)
		}
		var text string
		if json.Unmarshal(it.Content, &text) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(it.Content, &parts); err != nil {
				return nil, badRequest(param+".content", "invalid_type", "content must be a string or an array of content parts.")
			}
			var b strings.Builder
			for _, p := range parts {
				if p.Type != "input_text" && p.Type != "output_text" && p.Type != "text" {
					return nil, badRequest(param+".content", "unsupported_value", "Content parts of type %q are not supported; only text.", p.Type)
				}
				b.WriteString(p.Text)
			}
			text = b.String()
		}
		msgs = append(msgs, Message{Role: role, Content: text})
	}
	return msgs, nil
}

// responsesOut writes a response object, or its event stream.
type responsesOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	base    ResponseObject
	itemID  string
	b       strings.Builder
	started bool
	seq     int
}

func (o *responsesOut) event(name string, fields map[string]any) error {
	fields["type"] = name
	fields["sequence_number"] = o.seq
	o.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(o.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	return o.rc.Flush()
}

func (o *responsesOut) item(status string) ResponseItem {
	it := ResponseItem{Type: "message", ID: o.itemID, Status: status, Role: "assistant", Content: []ResponsePart{}}
	if status != "in_progress" {
		it.Content = []ResponsePart{{Type: "output_text", Text: o.b.String(), Annotations: []any{}}}
	}
	return it
}

func (o *responsesOut) begin() error {
	if o.started || !o.j.stream {
		return nil
	}
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	for _, name := range []string{"response.created", "response.in_progress"} {
		if err := o.event(name, map[string]any{"response": o.base}); err != nil {
			return err
		}
	}
	if err := o.event("response.output_item.added", map[string]any{"output_index": 0, "item": o.item("in_progress")}); err != nil {
		return err
	}
	return o.event("response.content_part.added", map[string]any{"item_id": o.itemID, "output_index": 0, "content_index": 0,
		"part": ResponsePart{Type: "output_text", Annotations: []any{}}})
}

func (o *responsesOut) text(t string) error {
	o.b.WriteString(t)
	if !o.j.stream {
		return nil
	}
	if err := o.begin(); err != nil {
		return err
	}
	return o.event("response.output_text.delta", map[string]any{"item_id": o.itemID, "output_index": 0, "content_index": 0, "delta": t, "logprobs": []any{}})
}

func (o *responsesOut) failed(e *Error) bool {
	if !o.started {
		return false
	}
	r := o.base
	r.Status, r.Error = "failed", e
	o.event("response.failed", map[string]any{"response": r})
	return true
}

func (o *responsesOut) finish(f finish) error {
	r := o.base
	r.Status = "completed"
	if f.reason == engine.FinishLength {
		r.Status = "incomplete"
		r.IncompleteDetails = &struct {
			Reason string `json:"reason"`
		}{"max_output_tokens"}
	}
	r.Output = []ResponseItem{o.item("completed")}
	r.Usage = &ResponsesUsage{InputTokens: f.usage.PromptTokens, OutputTokens: f.usage.CompletionTokens, TotalTokens: f.usage.TotalTokens,
		InputTokensDetails: InputTokensDetails{CachedTokens: f.usage.cached()}}
	if !o.j.stream {
		o.w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(o.w).Encode(r)
	}
	if err := o.begin(); err != nil {
		return err
	}
	text := o.b.String()
	for _, ev := range []struct {
		name   string
		fields map[string]any
	}{
		{"response.output_text.done", map[string]any{"item_id": o.itemID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}}},
		{"response.content_part.done", map[string]any{"item_id": o.itemID, "output_index": 0, "content_index": 0, "part": r.Output[0].Content[0]}},
		{"response.output_item.done", map[string]any{"output_index": 0, "item": r.Output[0]}},
	} {
		if err := o.event(ev.name, ev.fields); err != nil {
			return err
		}
	}
	name := "response.completed"
	if r.Status == "incomplete" {
		name = "response.incomplete"
	}
	return o.event(name, map[string]any{"response": r})
}

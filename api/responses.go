package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"strata/runtime/engine"
	"strata/runtime/toolcall"
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
	ToolChoice         json.RawMessage `json:"tool_choice"`
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

// ResponseItem is one output item: an assistant message, or a call of a
// function tool (call_id, name, arguments: a JSON object as text).
type ResponseItem struct {
	Type      string         `json:"type"` // "message" or "function_call"
	ID        string         `json:"id"`
	Status    string         `json:"status"`
	Role      string         `json:"role,omitempty"`
	Content   []ResponsePart `json:"content,omitempty"`
	CallID    string         `json:"call_id,omitempty"`
	Name      string         `json:"name,omitempty"`
	Arguments *string        `json:"arguments,omitempty"`
}

// MarshalJSON writes a message's content even when it is empty (clients
// append the parts that stream to it).
func (it ResponseItem) MarshalJSON() ([]byte, error) {
	type plain ResponseItem
	if it.Type != "message" {
		return json.Marshal(plain(it))
	}
	content := it.Content
	if content == nil {
		content = []ResponsePart{}
	}
	return json.Marshal(struct {
		plain
		Content []ResponsePart `json:"content"`
	}{plain(it), content})
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
	if e := responsesTools(&req, j); e != nil {
		s.fail(w, ep, e)
		return
	}
	f := SamplingFields{Stream: req.Stream, Temperature: req.Temperature, TopP: req.TopP, MaxTokens: req.MaxOutputTokens}
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
	nameToolResults(msgs)
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
	if !empty(req.Tools) {
		json.Unmarshal(req.Tools, &base.Tools) // checked by responsesTools
	}
	if req.Instructions != "" {
		base.Instructions = &req.Instructions
	}
	out := &responsesOut{w: w, rc: http.NewResponseController(w), j: j, base: base}
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
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`   // function_call, function_call_output
		Name      string          `json:"name"`      // function_call
		Arguments json.RawMessage `json:"arguments"` // function_call
		Output    json.RawMessage `json:"output"`    // function_call_output: a string
	}
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, badRequest("input", "invalid_value", "input must be a string or a non-empty array of messages.")
	}
	var msgs []Message
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "function_call":
			// The model's earlier call: part of an assistant turn.
			args, ok := argumentsText(it.Arguments)
			if it.Name == "" || !ok {
				return nil, badRequest(param, "invalid_value", "A function_call item needs a name and arguments that are a JSON object.")
			}
			call := MessageCall{ID: it.CallID, Name: it.Name, Arguments: args}
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			} else {
				msgs = append(msgs, Message{Role: "assistant", ToolCalls: []MessageCall{call}})
			}
			continue
		case "function_call_output":
			if it.CallID == "" {
				return nil, badRequest(param+".call_id", "missing_required_parameter", "A function_call_output item needs the call_id of its call.")
			}
			var out string
			if json.Unmarshal(it.Output, &out) != nil {
				out = string(it.Output)
			}
			msgs = append(msgs, Message{Role: "tool", Content: out, ToolCallID: it.CallID})
			continue
		case "", "message":
		default:
			return nil, badRequest(param+".type", "unsupported_value", "Input items of type %q are not supported; only messages, function_call and function_call_output.", it.Type)
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

// responsesOut writes a response object, or its event stream. The
// answer's text is a message item; each tool call is a function_call
// item after it (a forced tool's arguments stream into one).
type responsesOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	base    ResponseObject
	b       strings.Builder // the text (or a forced call's arguments)
	started bool
	seq     int
	items   []ResponseItem // the items done so far
	// open is the item being streamed, if any (its index is len(items)).
	open *ResponseItem
	// itemText is what the open item holds so far.
	itemText strings.Builder
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
	switch {
	case o.j.tool != nil:
		return o.openCall(o.j.tool.id, o.j.tool.name)
	case o.j.tools == nil:
		return o.openMessage()
	}
	return nil // with tools, an item opens when its text or call comes
}

func (o *responsesOut) openMessage() error {
	o.open = &ResponseItem{Type: "message", ID: "msg_" + randomID(), Status: "in_progress", Role: "assistant"}
	o.itemText.Reset()
	if err := o.event("response.output_item.added", map[string]any{"output_index": len(o.items), "item": *o.open}); err != nil {
		return err
	}
	return o.event("response.content_part.added", map[string]any{"item_id": o.open.ID, "output_index": len(o.items), "content_index": 0,
		"part": ResponsePart{Type: "output_text", Annotations: []any{}}})
}

func (o *responsesOut) openCall(id, name string) error {
	empty := ""
	o.open = &ResponseItem{Type: "function_call", ID: "fc_" + randomID(), Status: "in_progress", CallID: id, Name: name, Arguments: &empty}
	o.itemText.Reset()
	return o.event("response.output_item.added", map[string]any{"output_index": len(o.items), "item": *o.open})
}

// closeOpen ends the open item with the text it got.
func (o *responsesOut) closeOpen() error {
	it, at, text := *o.open, len(o.items), o.itemText.String()
	o.open = nil
	it.Status = "completed"
	if it.Type == "message" {
		it.Content = []ResponsePart{{Type: "output_text", Text: text, Annotations: []any{}}}
		for _, ev := range []struct {
			name   string
			fields map[string]any
		}{
			{"response.output_text.done", map[string]any{"item_id": it.ID, "output_index": at, "content_index": 0, "text": text, "logprobs": []any{}}},
			{"response.content_part.done", map[string]any{"item_id": it.ID, "output_index": at, "content_index": 0, "part": it.Content[0]}},
		} {
			if err := o.event(ev.name, ev.fields); err != nil {
				return err
			}
		}
	} else {
		it.Arguments = &text
		if err := o.event("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": at, "arguments": text}); err != nil {
			return err
		}
	}
	o.items = append(o.items, it)
	return o.event("response.output_item.done", map[string]any{"output_index": at, "item": it})
}

func (o *responsesOut) text(t string) error {
	o.b.WriteString(t)
	if !o.j.stream {
		return nil
	}
	if err := o.begin(); err != nil {
		return err
	}
	if o.open == nil {
		if err := o.openMessage(); err != nil {
			return err
		}
	}
	o.itemText.WriteString(t)
	at := len(o.items)
	if o.open.Type == "function_call" {
		return o.event("response.function_call_arguments.delta", map[string]any{"item_id": o.open.ID, "output_index": at, "delta": t})
	}
	return o.event("response.output_text.delta", map[string]any{"item_id": o.open.ID, "output_index": at, "content_index": 0, "delta": t, "logprobs": []any{}})
}

// call streams a parsed tool call as a function_call item, its arguments
// in one delta.
func (o *responsesOut) call(_ int, c toolcall.Call) error {
	if !o.j.stream {
		return nil // finish writes them
	}
	if err := o.begin(); err != nil {
		return err
	}
	if o.open != nil {
		if err := o.closeOpen(); err != nil {
			return err
		}
	}
	if err := o.openCall(c.ID, c.Name); err != nil {
		return err
	}
	o.itemText.WriteString(c.Arguments)
	if err := o.event("response.function_call_arguments.delta", map[string]any{"item_id": o.open.ID, "output_index": len(o.items), "delta": c.Arguments}); err != nil {
		return err
	}
	return o.closeOpen()
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

// collected is the output of a response that was not streamed.
func (o *responsesOut) collected(f finish) []ResponseItem {
	text := o.b.String()
	if t := o.j.tool; t != nil {
		return []ResponseItem{{Type: "function_call", ID: "fc_" + randomID(), Status: "completed", CallID: t.id, Name: t.name, Arguments: &text}}
	}
	var items []ResponseItem
	if text != "" || len(f.calls) == 0 {
		items = append(items, ResponseItem{Type: "message", ID: "msg_" + randomID(), Status: "completed", Role: "assistant",
			Content: []ResponsePart{{Type: "output_text", Text: text, Annotations: []any{}}}})
	}
	for _, c := range f.calls {
		args := c.Arguments
		items = append(items, ResponseItem{Type: "function_call", ID: "fc_" + randomID(), Status: "completed", CallID: c.ID, Name: c.Name, Arguments: &args})
	}
	return items
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
	r.Usage = &ResponsesUsage{InputTokens: f.usage.PromptTokens, OutputTokens: f.usage.CompletionTokens, TotalTokens: f.usage.TotalTokens,
		InputTokensDetails: InputTokensDetails{CachedTokens: f.usage.cached()}}
	if !o.j.stream {
		r.Output = o.collected(f)
		o.w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(o.w).Encode(r)
	}
	if err := o.begin(); err != nil {
		return err
	}
	if o.open == nil && len(o.items) == 0 { // nothing at all: an empty message
		if err := o.openMessage(); err != nil {
			return err
		}
	}
	if o.open != nil {
		if err := o.closeOpen(); err != nil {
			return err
		}
	}
	r.Output = o.items
	name := "response.completed"
	if r.Status == "incomplete" {
		name = "response.incomplete"
	}
	return o.event(name, map[string]any{"response": r})
}

// responsesTools reads the Responses API's tools ({"type": "function",
// "name", "description", "parameters"}: flat, unlike chat completions')
// and tool_choice ("auto", "none", "required", or {"type": "function",
// "name"}): forced, the call's arguments are constrained to its schema;
// otherwise the model may call them (tools.go).
func responsesTools(req *ResponsesRequest, j *job) *Error {
	if empty(req.Tools) {
		return nil
	}
	var tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(req.Tools, &tools); err != nil {
		return badRequest("tools", "invalid_type", "tools must be an array of function tools.")
	}
	defs := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		if t.Type != "function" || t.Name == "" {
			return badRequest(fmt.Sprintf("tools[%d]", i), "unsupported_value", "Only function tools with a name are supported.")
		}
		var ft functionTool
		ft.Type, ft.Function.Name, ft.Function.Description, ft.Function.Parameters = "function", t.Name, t.Description, t.Parameters
		defs[i] = ft.raw()
	}
	choice := "auto"
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	switch {
	case empty(req.ToolChoice):
	case json.Unmarshal(req.ToolChoice, &choice) == nil:
	case json.Unmarshal(req.ToolChoice, &named) == nil && named.Type == "function":
		choice = "named"
	default:
		return badRequest("tool_choice", "invalid_value", "tool_choice must be none, auto, required or {\"type\": \"function\", \"name\": ...}.")
	}
	pick := -1
	switch choice {
	case "none":
		return nil
	case "auto":
		j.tools = newToolUse(defs, "call_")
		return nil
	case "required":
		if len(tools) != 1 {
			return badRequest("tool_choice", "unsupported_value", "tool_choice required is supported with one tool; name the tool to call.")
		}
		pick = 0
	case "named":
		for i, t := range tools {
			if t.Name == named.Name {
				pick = i
			}
		}
		if pick < 0 {
			return badRequest("tool_choice", "invalid_value", "tool_choice names %q, which is not among the tools.", named.Name)
		}
	default:
		return badRequest("tool_choice", "invalid_value", "tool_choice must be none, auto, required or a named function, got %q.", choice)
	}
	sc, e := compileSchema(fmt.Sprintf("tools[%d].parameters", pick), tools[pick].Parameters)
	if e != nil {
		return e
	}
	j.schema, j.tool = sc, &toolCall{name: tools[pick].Name, id: "call_" + randomID()}
	return nil
}

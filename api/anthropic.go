package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"time"

	"strata/runtime/engine"
	"strata/runtime/sample"
	"strata/runtime/toolcall"
)

// The Anthropic Messages API: POST /v1/messages, as Claude clients and
// the official SDKs speak it. The key comes as "x-api-key" (or
// "Authorization: Bearer"), errors are {"type": "error", "error": {...}},
// and a stream is server-sent events named message_start,
// content_block_start, ping, content_block_delta, content_block_stop,
// message_delta and message_stop, each with a "type" equal to its name.

// MessagesRequest is the body of POST /v1/messages: the fields strata
// honours. Unknown fields (metadata, thinking, service_tier) are ignored.
type MessagesRequest struct {
	Model         string             `json:"model"`
	Messages      []AnthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"` // a string or an array of text blocks
	MaxTokens     *int               `json:"max_tokens"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        bool               `json:"stream"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	Tools         json.RawMessage    `json:"tools"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
}

// AnthropicMessage is one turn: Content is a string or an array of
// content blocks.
type AnthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// AnthropicBlock is one content block of a message or an answer.
type AnthropicBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`    // tool_use
	Name  string          `json:"name,omitempty"`  // tool_use
	Input json.RawMessage `json:"input,omitempty"` // tool_use: the tool's input
	// tool_result (in a user message): the call it answers, and its
	// content, a string or an array of text blocks.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// AnthropicUsage counts tokens as Anthropic does.
type AnthropicUsage struct {
	// InputTokens are the prompt tokens not read from the prompt cache:
	// the prompt is InputTokens + CacheReadInputTokens, as Anthropic counts.
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// anthropicUsage counts a finished answer's tokens as Anthropic does.
func anthropicUsage(u Usage) AnthropicUsage {
	return AnthropicUsage{InputTokens: u.PromptTokens - u.cached(), OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.cached()}
}

// MessagesResponse is the answer to a non-streaming request, and (empty)
// the message of a stream's message_start event.
type MessagesResponse struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"` // "message"
	Role         string           `json:"role"` // "assistant"
	Model        string           `json:"model"`
	Content      []AnthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"` // end_turn, max_tokens, stop_sequence
	StopSequence *string          `json:"stop_sequence"`
	Usage        AnthropicUsage   `json:"usage"`
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	const ep = "messages"
	var req MessagesRequest
	if e := s.readJSON(w, r, &req); e != nil {
		s.fail(w, ep, e)
		return
	}
	j := &job{endpoint: ep, model: req.Model, id: "msg_" + randomID(), created: start.Unix(), stream: req.Stream}
	if e := anthropicSettings(&req, j); e != nil {
		s.fail(w, ep, e)
		return
	}
	msgs, e := anthropicMessages(&req)
	if e != nil {
		s.fail(w, ep, e)
		return
	}
	if e := s.chatPrompt(r.Context(), j, msgs, "messages"); e != nil || r.Context().Err() != nil {
		if e != nil {
			s.fail(w, ep, e)
		} else {
			s.metrics.request(ep, 499)
		}
		return
	}
	var out streamer
	if j.stream {
		out = &anthropicStream{w: w, rc: http.NewResponseController(w), j: j}
	} else {
		out = &anthropicCollector{w: w, j: j}
	}
	s.run(w, r, j, out, start)
}

// anthropicSettings validates the sampling fields into j. Anthropic's
// temperature runs from 0 to 1 (default 1); max_tokens is required.
func anthropicSettings(req *MessagesRequest, j *job) *Error {
	if req.MaxTokens == nil {
		return badRequest("max_tokens", "missing_required_parameter", "max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return badRequest("max_tokens", "invalid_value", "max_tokens: must be at least 1, got %d", *req.MaxTokens)
	}
	if e := anthropicTools(req, j); e != nil {
		return e
	}
	j.maxTok = *req.MaxTokens
	j.params = sample.Params{Temperature: 1, Seed: mrand.Uint64()}
	if req.Temperature != nil {
		if t := *req.Temperature; t < 0 || t > 1 || math.IsNaN(t) {
			return badRequest("temperature", "invalid_value", "temperature: must be between 0 and 1, got %v", t)
		}
		j.params.Temperature = float32(*req.Temperature)
	}
	if req.TopP != nil {
		if p := *req.TopP; p < 0 || p > 1 || math.IsNaN(p) {
			return badRequest("top_p", "invalid_value", "top_p: must be between 0 and 1, got %v", p)
		}
		j.params.TopP = float32(*req.TopP)
	}
	if req.TopK != nil {
		if *req.TopK < 0 {
			return badRequest("top_k", "invalid_value", "top_k: must be at least 0, got %d", *req.TopK)
		}
		j.params.TopK = *req.TopK
	}
	if len(req.StopSequences) > maxStops {
		return badRequest("stop_sequences", "invalid_value", "stop_sequences: at most %d are supported, got %d", maxStops, len(req.StopSequences))
	}
	for _, st := range req.StopSequences {
		if st == "" {
			return badRequest("stop_sequences", "invalid_value", "stop_sequences: a stop sequence must not be empty")
		}
	}
	j.stop = req.StopSequences
	return nil
}

// anthropicMessages turns the system prompt and the turns into chat
// messages (system first).
func anthropicMessages(req *MessagesRequest) ([]Message, *Error) {
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "invalid_value", "messages: at least one message is required")
	}
	var msgs []Message
	if raw := bytes.TrimSpace(req.System); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		text, e := anthropicText("system", raw)
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, Message{Role: "system", Content: text})
	}
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			return nil, badRequest(param+".role", "invalid_value", "%s.role: Input should be 'user' or 'assistant', got %q", param, m.Role)
		}
		turn, e := anthropicTurn(param+".content", m.Role, m.Content)
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, turn...)
	}
	nameToolResults(msgs)
	return msgs, nil
}

// anthropicTurn reads one turn into chat messages: an assistant's text
// and tool_use blocks become one message with tool calls; a user's
// tool_result blocks become "tool" messages (as chat templates take
// results), followed by the user's text if there is any.
func anthropicTurn(param, role string, raw json.RawMessage) ([]Message, *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Message{{Role: role, Content: s}}, nil
	}
	var blocks []AnthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, badRequest(param, "invalid_type", "%s: must be a string or an array of content blocks", param)
	}
	var out []Message
	var text strings.Builder
	var calls []MessageCall
	for i, bl := range blocks {
		bp := fmt.Sprintf("%s.%d", param, i)
		switch {
		case bl.Type == "text":
			if text.Len() > 0 {
				text.WriteString("\n")
			}
			text.WriteString(bl.Text)
		case bl.Type == "tool_use" && role == "assistant":
			args, ok := argumentsText(bl.Input)
			if bl.Name == "" || !ok {
				return nil, badRequest(bp, "invalid_value", "%s: a tool_use block needs a name and an input object", bp)
			}
			calls = append(calls, MessageCall{ID: bl.ID, Name: bl.Name, Arguments: args})
		case bl.Type == "tool_result" && role == "user":
			content := ""
			if !empty(bl.Content) {
				c, e := anthropicText(bp+".content", bl.Content)
				if e != nil {
					return nil, e
				}
				content = c
			}
			out = append(out, Message{Role: "tool", Content: content, ToolCallID: bl.ToolUseID})
		case bl.Type == "thinking" || bl.Type == "redacted_thinking":
			// Claude clients send their earlier thinking back; a chat
			// template has no place for another model's.
		default:
			return nil, badRequest(bp, "unsupported_value", "%s: content blocks of type %q are not supported in %s messages", bp, bl.Type, role)
		}
	}
	if text.Len() > 0 || len(calls) > 0 || len(out) == 0 {
		out = append(out, Message{Role: role, Content: text.String(), ToolCalls: calls})
	}
	return out, nil
}

// anthropicText joins a string or an array of text blocks.
func anthropicText(param string, raw json.RawMessage) (string, *Error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []AnthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", badRequest(param, "invalid_type", "%s: must be a string or an array of content blocks", param)
	}
	var b strings.Builder
	for i, bl := range blocks {
		if bl.Type != "text" {
			return "", badRequest(param, "unsupported_value", "%s.%d: content blocks of type %q are not supported; only text", param, i, bl.Type)
		}
		if i > 0 && b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// anthropicStop maps how a generation ended to stop_reason and
// stop_sequence.
func anthropicStop(f finish, tool bool) (reason string, seq *string) {
	switch {
	case f.reason == engine.FinishLength:
		return "max_tokens", nil
	case tool:
		return "tool_use", nil
	case f.stopSeq != "":
		s := f.stopSeq
		return "stop_sequence", &s
	}
	return "end_turn", nil
}

// anthropicCollector gathers a non-streaming answer.
type anthropicCollector struct {
	w http.ResponseWriter
	j *job
	b strings.Builder
}

func (c *anthropicCollector) text(s string) error { c.b.WriteString(s); return nil }

func (c *anthropicCollector) failed(*Error) bool { return false }

func (c *anthropicCollector) finish(f finish) error {
	reason, seq := anthropicStop(f, c.j.tool != nil || len(f.calls) > 0)
	blocks := []AnthropicBlock{{Type: "text", Text: c.b.String()}}
	if t := c.j.tool; t != nil {
		block := AnthropicBlock{Type: "tool_use", ID: t.id, Name: t.name, Input: json.RawMessage(c.b.String())}
		if !json.Valid(block.Input) { // cut short: Anthropic's clients parse input
			block.Input = json.RawMessage("{}")
		}
		blocks = []AnthropicBlock{block}
	}
	if len(f.calls) > 0 && c.b.Len() == 0 {
		blocks = nil // no empty text block before the calls
	}
	for _, call := range f.calls {
		blocks = append(blocks, AnthropicBlock{Type: "tool_use", ID: call.ID, Name: call.Name, Input: json.RawMessage(call.Arguments)})
	}
	v := MessagesResponse{ID: c.j.id, Type: "message", Role: "assistant", Model: c.j.model,
		Content:    blocks,
		StopReason: &reason, StopSequence: seq,
		Usage: anthropicUsage(f.usage)}
	c.w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(c.w).Encode(v)
}

// anthropicStream streams an answer as Anthropic's named events. Headers
// and message_start go out with the first text (or the end), so an error
// before any text still gets a proper status.
type anthropicStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	started bool
	// index is the content block being written (or the next one, when
	// none is open). With tools the model may call, a text block opens
	// at the first text, and each call is a block of its own.
	index int
	open  bool
}

func (s *anthropicStream) event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *anthropicStream) begin() error {
	if s.started {
		return nil
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	msg := MessagesResponse{ID: s.j.id, Type: "message", Role: "assistant", Model: s.j.model, Content: []AnthropicBlock{},
		Usage: AnthropicUsage{InputTokens: len(s.j.tokens)}}
	if err := s.event("message_start", map[string]any{"type": "message_start", "message": msg}); err != nil {
		return err
	}
	if t := s.j.tool; t != nil {
		if err := s.startBlock(map[string]any{"type": "tool_use", "id": t.id, "name": t.name, "input": map[string]any{}}); err != nil {
			return err
		}
	} else if s.j.tools == nil {
		if err := s.startBlock(map[string]any{"type": "text", "text": ""}); err != nil {
			return err
		}
	}
	return s.event("ping", map[string]string{"type": "ping"})
}

func (s *anthropicStream) startBlock(block map[string]any) error {
	s.open = true
	return s.event("content_block_start", map[string]any{"type": "content_block_start", "index": s.index, "content_block": block})
}

func (s *anthropicStream) stopBlock() error {
	s.open = false
	s.index++
	return s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": s.index - 1})
}

func (s *anthropicStream) text(t string) error {
	if err := s.begin(); err != nil {
		return err
	}
	if !s.open {
		if err := s.startBlock(map[string]any{"type": "text", "text": ""}); err != nil {
			return err
		}
	}
	delta := map[string]string{"type": "text_delta", "text": t}
	if s.j.tool != nil {
		delta = map[string]string{"type": "input_json_delta", "partial_json": t}
	}
	return s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": s.index, "delta": delta})
}

// call writes a parsed tool call as a tool_use block: its input arrives
// whole, in one input_json_delta.
func (s *anthropicStream) call(_ int, c toolcall.Call) error {
	if err := s.begin(); err != nil {
		return err
	}
	if s.open {
		if err := s.stopBlock(); err != nil {
			return err
		}
	}
	if err := s.startBlock(map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}); err != nil {
		return err
	}
	if err := s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": s.index,
		"delta": map[string]string{"type": "input_json_delta", "partial_json": c.Arguments}}); err != nil {
		return err
	}
	return s.stopBlock()
}

func (s *anthropicStream) failed(e *Error) bool {
	if !s.started {
		return false
	}
	s.event("error", toAnthropic(e))
	return true
}

func (s *anthropicStream) finish(f finish) error {
	if err := s.begin(); err != nil {
		return err
	}
	reason, seq := anthropicStop(f, s.j.tool != nil || len(f.calls) > 0)
	if !s.open && s.index == 0 { // nothing at all: an empty text block, as before
		if err := s.startBlock(map[string]any{"type": "text", "text": ""}); err != nil {
			return err
		}
	}
	if s.open {
		if err := s.stopBlock(); err != nil {
			return err
		}
	}
	if err := s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
		// message_start went out before the cache hit was known: the
		// final counts, as Anthropic's message_delta carries them.
		"usage": anthropicUsage(f.usage)}); err != nil {
		return err
	}
	return s.event("message_stop", map[string]string{"type": "message_stop"})
}

// anthropicTools reads tools and tool_choice: a forced tool ({"type":
// "tool", "name"}, or "any" with one tool) constrains the answer to the
// tool's input_schema and answers with a tool_use block; tools the model
// may choose to call ("auto", the default) go into its chat template and
// come back as tool_use blocks when it calls them (tools.go).
func anthropicTools(req *MessagesRequest, j *job) *Error {
	if empty(req.Tools) {
		return nil
	}
	var tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(req.Tools, &tools); err != nil {
		return badRequest("tools", "invalid_type", "tools: must be an array of tools with a name and an input_schema")
	}
	for i, t := range tools {
		if (t.Type != "" && t.Type != "custom") || t.Name == "" {
			return badRequest(fmt.Sprintf("tools.%d", i), "unsupported_value", "tools.%d: only client tools with a name and an input_schema are supported (not %q)", i, t.Type)
		}
	}
	var choice struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if !empty(req.ToolChoice) {
		if err := json.Unmarshal(req.ToolChoice, &choice); err != nil {
			return badRequest("tool_choice", "invalid_type", "tool_choice: must be an object with a type")
		}
	}
	pick := -1
	switch choice.Type {
	case "none":
		return nil
	case "any":
		if len(tools) != 1 {
			return badRequest("tool_choice", "unsupported_value", "tool_choice: any is supported with one tool; name the tool with {\"type\": \"tool\", \"name\": ...}")
		}
		pick = 0
	case "tool":
		for i, t := range tools {
			if t.Name == choice.Name {
				pick = i
			}
		}
		if pick < 0 {
			return badRequest("tool_choice", "invalid_value", "tool_choice: names %q, which is not among the tools", choice.Name)
		}
	case "", "auto":
		defs := make([]json.RawMessage, len(tools))
		for i, t := range tools {
			var ft functionTool
			ft.Type, ft.Function.Name, ft.Function.Description, ft.Function.Parameters = "function", t.Name, t.Description, t.InputSchema
			defs[i] = ft.raw()
		}
		j.tools = newToolUse(defs, "toolu_")
		return nil
	default:
		return badRequest("tool_choice", "invalid_value", "tool_choice: type must be auto, any, tool or none, got %q", choice.Type)
	}
	sc, e := compileSchema(fmt.Sprintf("tools.%d.input_schema", pick), tools[pick].InputSchema)
	if e != nil {
		return e
	}
	j.schema, j.tool = sc, &toolCall{name: tools[pick].Name, id: "toolu_" + randomID()}
	return nil
}

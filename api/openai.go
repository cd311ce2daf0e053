package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"time"

	"strata/runtime/engine"
	"strata/runtime/sample"
	"strata/runtime/toolcall"
)

// ChatRequest is the body of POST /v1/chat/completions: the fields of
// OpenAI's request that strata honours. Unknown fields are ignored, as
// OpenAI clients send many optional ones.
type ChatRequest struct {
	Model          string          `json:"model"`
	Messages       []ChatMessage   `json:"messages"`
	ResponseFormat json.RawMessage `json:"response_format"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	SamplingFields
}

// ChatMessage is one message. Content is a string, an array of content
// parts of which only {"type": "text"} is supported, or null. An
// assistant message may carry the tool calls it made; a "tool" message
// answers one of them (tool_call_id).
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

// CompletionRequest is the body of POST /v1/completions. Prompt is a
// string, an array of one string, an array of token ids, or an array of
// one array of token ids.
type CompletionRequest struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	SamplingFields
}

// SamplingFields are the generation settings both endpoints share.
// Omitted fields take OpenAI's defaults: temperature 1, top_p 1, no
// token limit but the context, a random seed.
type SamplingFields struct {
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"` // a string or an array of strings
	Seed                *int64          `json:"seed"`
	N                   *int            `json:"n"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Logprobs            json.RawMessage `json:"logprobs"`
	Tools               json.RawMessage `json:"tools"`
}

// StreamOptions asks for a final chunk with usage counts.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatCompletion is the answer to a non-streaming chat request.
type ChatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "chat.completion"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
}

// ChatChoice is the one choice strata returns (n = 1).
type ChatChoice struct {
	Index        int              `json:"index"`
	Message      AssistantMessage `json:"message"`
	Logprobs     *struct{}        `json:"logprobs"`
	FinishReason string           `json:"finish_reason"`
}

// AssistantMessage is the generated message: text, or (with a forced
// tool) a tool call.
type AssistantMessage struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a call of a function tool; Arguments is a JSON document.
// In a stream's deltas, Index says which call a piece belongs to and the
// id, type and name come with the first piece only.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ChatChunk is one server-sent event of a streaming chat answer.
type ChatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"` // "chat.completion.chunk"
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *Usage            `json:"usage,omitempty"`
}

// ChatChunkChoice carries a delta of the message.
type ChatChunkChoice struct {
	Index        int       `json:"index"`
	Delta        ChatDelta `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// ChatDelta is new text (and, in the first chunk, the role).
type ChatDelta struct {
	Role      string     `json:"role,omitempty"`
	Content   string     `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// Completion is the answer to /v1/completions, and (with Object
// "text_completion" too) each event of its stream.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // "text_completion"
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is the generated text.
type CompletionChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// ModelList is the body of GET /v1/models, readable by OpenAI's clients
// (object, data[].id/object/created/owned_by) and Anthropic's
// (data[].type/id/display_name/created_at, has_more, first_id, last_id).
type ModelList struct {
	Object  string       `json:"object"` // "list"
	Data    []ModelEntry `json:"data"`
	HasMore bool         `json:"has_more"`
	FirstID *string      `json:"first_id"`
	LastID  *string      `json:"last_id"`
}

// ModelEntry is a ModelInfo with the fields Anthropic's model object adds.
type ModelEntry struct {
	ModelInfo
	Type        string `json:"type"`         // "model"
	DisplayName string `json:"display_name"` // the id
	CreatedAt   string `json:"created_at"`   // RFC 3339
}

func modelEntry(m ModelInfo) ModelEntry {
	return ModelEntry{ModelInfo: m, Type: "model", DisplayName: m.ID, CreatedAt: time.Unix(m.Created, 0).UTC().Format(time.RFC3339)}
}

// settings validates the shared fields into j.
func (s *Server) settings(f SamplingFields, j *job) *Error {
	if f.N != nil && *f.N != 1 {
		return badRequest("n", "unsupported_value", "Only n=1 is supported.")
	}
	if isTrue(f.Logprobs) {
		return badRequest("logprobs", "unsupported_value", "logprobs are not supported.")
	}
	if t := bytes.TrimSpace(f.Tools); len(t) > 0 && !bytes.Equal(t, []byte("null")) && !bytes.Equal(t, []byte("[]")) {
		return badRequest("tools", "unsupported_value", "Tools (function calling) are not supported.")
	}
	j.params = sample.Params{Temperature: 1}
	if f.Temperature != nil {
		if t := *f.Temperature; t < 0 || t > 2 || math.IsNaN(t) {
			return badRequest("temperature", "invalid_value", "temperature must be between 0 and 2, got %v.", t)
		}
		j.params.Temperature = float32(*f.Temperature)
	}
	if f.TopP != nil {
		if p := *f.TopP; p < 0 || p > 1 || math.IsNaN(p) {
			return badRequest("top_p", "invalid_value", "top_p must be between 0 and 1, got %v.", p)
		}
		j.params.TopP = float32(*f.TopP)
	}
	for _, p := range []struct {
		name string
		v    *float64
		dst  *float32
	}{{"presence_penalty", f.PresencePenalty, &j.params.PresencePenalty}, {"frequency_penalty", f.FrequencyPenalty, &j.params.FrequencyPenalty}} {
		if p.v != nil {
			if *p.v < -2 || *p.v > 2 || math.IsNaN(*p.v) {
				return badRequest(p.name, "invalid_value", "%s must be between -2 and 2, got %v.", p.name, *p.v)
			}
			*p.dst = float32(*p.v)
		}
	}
	maxTok, param := f.MaxTokens, "max_tokens"
	if f.MaxCompletionTokens != nil {
		maxTok, param = f.MaxCompletionTokens, "max_completion_tokens"
	}
	if maxTok != nil {
		if *maxTok < 1 {
			return badRequest(param, "invalid_value", "%s must be at least 1, got %d.", param, *maxTok)
		}
		j.maxTok = *maxTok
	}
	if f.Seed != nil {
		j.params.Seed = uint64(*f.Seed)
	} else {
		j.params.Seed = mrand.Uint64()
	}
	stop, err := parseStop(f.Stop)
	if err != nil {
		return err
	}
	j.stop = stop
	if err := j.params.Validate(); err != nil {
		return badRequest("", "invalid_value", "%v", err)
	}
	j.stream = f.Stream
	j.usage = f.Stream && f.StreamOptions != nil && f.StreamOptions.IncludeUsage
	return nil
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req ChatRequest
	if e := s.readJSON(w, r, &req); e != nil {
		s.fail(w, "chat", e)
		return
	}
	j := &job{endpoint: "chat", model: req.Model, id: "chatcmpl-" + randomID(), created: start.Unix()}
	if e := openAIStructured(&req, j); e != nil {
		s.fail(w, "chat", e)
		return
	}
	req.Tools = nil // taken by openAIStructured
	if e := s.settings(req.SamplingFields, j); e != nil {
		s.fail(w, "chat", e)
		return
	}
	if len(req.Messages) == 0 {
		s.fail(w, "chat", badRequest("messages", "invalid_value", "messages must hold at least one message."))
		return
	}
	msgs, e := openAIMessages(req.Messages)
	if e != nil {
		s.fail(w, "chat", e)
		return
	}
	if !s.prepareChat(w, r, j, msgs, "messages") {
		return
	}
	s.run(w, r, j, openAIOut(w, j), start)
}

// openAIMessages reads a chat's messages: text, the tool calls of
// assistant messages, and tool results.
func openAIMessages(list []ChatMessage) ([]Message, *Error) {
	msgs := make([]Message, len(list))
	for i, m := range list {
		text, e := messageText(i, m)
		if e != nil {
			return nil, e
		}
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		msgs[i] = Message{Role: role, Content: text, ToolCallID: m.ToolCallID, Name: m.Name}
		if m.Role == "assistant" && !empty(m.ToolCalls) {
			calls, e := openAIMessageCalls(i, m.ToolCalls)
			if e != nil {
				return nil, e
			}
			msgs[i].ToolCalls = calls
		}
	}
	nameToolResults(msgs)
	return msgs, nil
}

func messageText(i int, m ChatMessage) (string, *Error) {
	param := fmt.Sprintf("messages[%d]", i)
	if !roles[m.Role] {
		return "", badRequest(param+".role", "invalid_value", "Invalid role %q: expected system, developer, user, assistant or tool.", m.Role)
	}
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(param+".content", "invalid_type", "content must be a string or an array of content parts.")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", badRequest(param+".content", "unsupported_value", "Content parts of type %q are not supported; only text.", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req CompletionRequest
	if e := s.readJSON(w, r, &req); e != nil {
		s.fail(w, "completions", e)
		return
	}
	j := &job{endpoint: "completions", model: req.Model, id: "cmpl-" + randomID(), created: start.Unix()}
	if e := s.settings(req.SamplingFields, j); e != nil {
		s.fail(w, "completions", e)
		return
	}
	info, tok, e := s.lookup(req.Model)
	if e != nil {
		s.fail(w, "completions", e)
		return
	}
	text, ids, e := parsePrompt(req.Prompt, tok.VocabSize())
	if e != nil {
		s.fail(w, "completions", e)
		return
	}
	if ids == nil {
		if e := s.fitsBytes(info, tok, len(text), "prompt"); e != nil {
			s.fail(w, "completions", e)
			return
		}
		ids = tok.Encode(text, true, false)
	} else {
		text = tok.Decode(ids)
	}
	if req.Echo {
		j.echo = text
	}
	if len(ids) == 0 {
		s.fail(w, "completions", badRequest("prompt", "invalid_value", "The prompt is empty and this vocabulary adds no BOS."))
		return
	}
	j.tokens, j.tok, j.ctxLen = ids, tok, info.ContextLength
	if e := s.fits(info, len(ids)); e != nil {
		e.Param = strPtr("prompt")
		s.fail(w, "completions", e)
		return
	}
	s.run(w, r, j, openAIOut(w, j), start)
}

// parsePrompt accepts a string, [string], [ids] or [[ids]].
func parsePrompt(raw json.RawMessage, vocab int) (string, []int, *Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one, nil, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		if len(strs) != 1 {
			return "", nil, badRequest("prompt", "unsupported_value", "Exactly one prompt per request is supported, got %d.", len(strs))
		}
		return strs[0], nil, nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) != nil {
		var batch [][]int
		if json.Unmarshal(raw, &batch) != nil {
			return "", nil, badRequest("prompt", "invalid_type", "prompt must be a string, an array of one string, or an array of token ids.")
		}
		if len(batch) != 1 {
			return "", nil, badRequest("prompt", "unsupported_value", "Exactly one prompt per request is supported, got %d.", len(batch))
		}
		ids = batch[0]
	}
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return "", nil, badRequest("prompt", "invalid_value", "Token id %d is outside the vocabulary of %d tokens.", id, vocab)
		}
	}
	if ids == nil {
		ids = []int{}
	}
	return "", ids, nil
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	list := ModelList{Object: "list", Data: []ModelEntry{}}
	for _, m := range s.cfg.Models.List() {
		list.Data = append(list.Data, modelEntry(m))
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	s.writeJSON(w, "models", list)
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	info, _, e := s.lookup(r.PathValue("model"))
	if e != nil {
		s.fail(w, "models", e)
		return
	}
	s.writeJSON(w, "models", modelEntry(info))
}

// openAIOut is the streamer of a chat or completions answer.
func openAIOut(w http.ResponseWriter, j *job) streamer {
	if j.stream {
		return &sseWriter{w: w, rc: http.NewResponseController(w), j: j}
	}
	return &collector{w: w, j: j}
}

// collector gathers a non-streaming answer.
type collector struct {
	w http.ResponseWriter
	j *job
	b strings.Builder
}

func (c *collector) text(s string) error { c.b.WriteString(s); return nil }

func (c *collector) failed(*Error) bool { return false }

func (c *collector) finish(f finish) error {
	w, reason, usage := c.w, f.reason, f.usage
	var v any
	if c.j.endpoint == "chat" {
		msg := AssistantMessage{Role: "assistant", Content: c.b.String()}
		if t := c.j.tool; t != nil {
			msg.Content, msg.ToolCalls = "", []ToolCall{{ID: t.id, Type: "function", Function: FunctionCall{Name: t.name, Arguments: c.b.String()}}}
			if reason == engine.FinishStop {
				reason = "tool_calls"
			}
		}
		for _, call := range f.calls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: call.ID, Type: "function", Function: FunctionCall{Name: call.Name, Arguments: call.Arguments}})
			if reason == engine.FinishStop {
				reason = "tool_calls"
			}
		}
		v = ChatCompletion{ID: c.j.id, Object: "chat.completion", Created: c.j.created, Model: c.j.model, Usage: usage,
			Choices: []ChatChoice{{Message: msg, FinishReason: reason}}}
	} else {
		v = Completion{ID: c.j.id, Object: "text_completion", Created: c.j.created, Model: c.j.model, Usage: &usage,
			Choices: []CompletionChoice{{Text: c.b.String(), FinishReason: &reason}}}
	}
	return writeAnswer(w, v)
}

// sseWriter streams an answer as server-sent events, OpenAI's way:
// "data: {json}\n\n" per chunk, "data: [DONE]\n\n" at the end. Headers
// go out with the first chunk, so an error before any text still gets a
// proper status.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	started bool
	// toolStarted: the tool call's id and name went out (with the first piece).
	toolStarted bool
}

func (s *sseWriter) begin() error {
	if s.started {
		return nil
	}
	s.started = true
	startSSE(s.w)
	if s.j.endpoint == "chat" { // the first chunk names the role
		return s.event(s.chatChunk(ChatDelta{Role: "assistant", Content: ""}, nil))
	}
	return nil
}

func (s *sseWriter) event(v any) error {
	return writeSSE(s.w, s.rc, "", v)
}

func (s *sseWriter) chatChunk(d ChatDelta, reason *string) ChatChunk {
	return ChatChunk{ID: s.j.id, Object: "chat.completion.chunk", Created: s.j.created, Model: s.j.model,
		Choices: []ChatChunkChoice{{Delta: d, FinishReason: reason}}}
}

func (s *sseWriter) completionChunk(text string, reason *string) Completion {
	return Completion{ID: s.j.id, Object: "text_completion", Created: s.j.created, Model: s.j.model,
		Choices: []CompletionChoice{{Text: text, FinishReason: reason}}}
}

func (s *sseWriter) text(t string) error {
	if err := s.begin(); err != nil {
		return err
	}
	if s.j.endpoint == "chat" {
		if tc := s.j.tool; tc != nil {
			zero := 0
			call := ToolCall{Index: &zero, Function: FunctionCall{Arguments: t}}
			if !s.toolStarted {
				s.toolStarted = true
				call.ID, call.Type, call.Function.Name = tc.id, "function", tc.name
			}
			return s.event(s.chatChunk(ChatDelta{ToolCalls: []ToolCall{call}}, nil))
		}
		return s.event(s.chatChunk(ChatDelta{Content: t}, nil))
	}
	return s.event(s.completionChunk(t, nil))
}

// call streams a parsed tool call whole, as one delta.
func (s *sseWriter) call(i int, c toolcall.Call) error {
	if err := s.begin(); err != nil {
		return err
	}
	return s.event(s.chatChunk(ChatDelta{ToolCalls: []ToolCall{{Index: &i, ID: c.ID, Type: "function",
		Function: FunctionCall{Name: c.Name, Arguments: c.Arguments}}}}, nil))
}

func (s *sseWriter) failed(e *Error) bool {
	if !s.started {
		return false
	}
	s.event(errorBody{e})
	return true
}

func (s *sseWriter) finish(f finish) error {
	reason, usage := f.reason, f.usage
	if (s.j.tool != nil || len(f.calls) > 0) && reason == engine.FinishStop {
		reason = "tool_calls"
	}
	if err := s.begin(); err != nil {
		return err
	}
	var err error
	if s.j.endpoint == "chat" {
		err = s.event(s.chatChunk(ChatDelta{}, &reason))
		if err == nil && s.j.usage {
			c := s.chatChunk(ChatDelta{}, nil)
			c.Choices, c.Usage = []ChatChunkChoice{}, &usage
			err = s.event(c)
		}
	} else {
		err = s.event(s.completionChunk("", &reason))
		if err == nil && s.j.usage {
			c := s.completionChunk("", nil)
			c.Choices, c.Usage = []CompletionChoice{}, &usage
			err = s.event(c)
		}
	}
	if err != nil {
		return err
	}
	if _, err := io.WriteString(s.w, "data: [DONE]\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// openAIStructured reads response_format, tools and tool_choice into j:
// a json_schema (or json_object) format, or a forced function tool,
// becomes the schema sampling is constrained to; tools the model may
// call (auto, the default) go into its chat template (tools.go).
func openAIStructured(req *ChatRequest, j *job) *Error {
	if !empty(req.ResponseFormat) {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(req.ResponseFormat, &rf); err != nil {
			return badRequest("response_format", "invalid_type", "response_format must be an object with a type.")
		}
		switch rf.Type {
		case "text":
		case "json_object":
			j.schema, _ = compileSchema("", nil)
		case "json_schema":
			if empty(rf.JSONSchema.Schema) {
				return badRequest("response_format.json_schema.schema", "missing_required_parameter", "response_format json_schema needs json_schema.schema.")
			}
			sc, e := compileSchema("response_format.json_schema.schema", rf.JSONSchema.Schema)
			if e != nil {
				return e
			}
			j.schema = sc
		default:
			return badRequest("response_format.type", "invalid_value", "response_format.type must be text, json_object or json_schema, got %q.", rf.Type)
		}
	}
	if empty(req.Tools) {
		return nil
	}
	tools, defs, e := openAITools("tools", req.Tools)
	if e != nil {
		return e
	}
	var choice string
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	switch {
	case empty(req.ToolChoice):
		choice = "auto"
	case json.Unmarshal(req.ToolChoice, &choice) == nil:
	case json.Unmarshal(req.ToolChoice, &named) == nil && named.Type == "function":
		choice = "named"
	default:
		return badRequest("tool_choice", "invalid_value", "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}.")
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Function.Name
	}
	pick, e := pickTool(j, choice, named.Function.Name, names, defs)
	if pick < 0 || e != nil {
		return e
	}
	if j.schema != nil {
		return badRequest("response_format", "unsupported_value", "response_format and a forced tool cannot be combined.")
	}
	return forceTool(j, names[pick], tools[pick].Function.Parameters, fmt.Sprintf("tools[%d].function.parameters", pick), "call_")
}

// openAIMessageCalls reads the tool_calls of an assistant message:
// [{"id", "type": "function", "function": {"name", "arguments"}}], the
// arguments a string holding a JSON object.
func openAIMessageCalls(i int, raw json.RawMessage) ([]MessageCall, *Error) {
	param := fmt.Sprintf("messages[%d].tool_calls", i)
	var calls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, badRequest(param, "invalid_type", "tool_calls must be an array of function calls.")
	}
	out := make([]MessageCall, len(calls))
	for k, c := range calls {
		args, ok := argumentsText(c.Function.Arguments)
		if c.Function.Name == "" || !ok {
			return nil, badRequest(fmt.Sprintf("%s[%d]", param, k), "invalid_value", "A tool call needs a function name and arguments that are a JSON object.")
		}
		out[k] = MessageCall{ID: c.ID, Name: c.Function.Name, Arguments: args}
	}
	return out, nil
}

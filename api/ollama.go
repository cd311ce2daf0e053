package api

import (
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

// The Ollama API, as Open WebUI, the ollama clients and many apps speak
// it: /api/chat, /api/generate, /api/tags, /api/show, /api/ps and
// /api/version. Answers stream as NDJSON (one JSON object a line) unless
// "stream": false; errors are {"error": "message"}. strata's own NDJSON
// stream, which /api/generate served before, is POST /api/strata/generate.

// ollamaVersion is the version of Ollama's API this surface follows;
// clients read it to decide which fields they may send.
const ollamaVersion = "0.12.0"

func init() {
	for _, p := range []string{"/api/chat", "/api/generate", "/api/tags", "/api/show", "/api/ps", "/api/version"} {
		ollamaPaths[p] = true
	}
}

// OllamaOptions are the model options of a request that strata honours;
// omitted ones take Ollama's defaults (temperature 0.8, top_k 40, top_p
// 0.9, repeat_penalty 1.1 over the last 64 tokens, no token limit).
type OllamaOptions struct {
	Temperature      *float64 `json:"temperature"`
	TopK             *int     `json:"top_k"`
	TopP             *float64 `json:"top_p"`
	MinP             *float64 `json:"min_p"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	RepeatLastN      *int     `json:"repeat_last_n"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	Seed             *int64   `json:"seed"`
	NumPredict       *int     `json:"num_predict"`
	Stop             []string `json:"stop"`
}

// OllamaMessage is one chat message: an assistant's may carry tool
// calls, and a "tool" message is a call's result (tool_name says whose).
type OllamaMessage struct {
	Role       string           `json:"role"`
	Content    string           `json:"content"`
	ToolCalls  []OllamaToolCall `json:"tool_calls,omitempty"`
	ToolName   string           `json:"tool_name,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

// OllamaToolCall is a call of a function tool; Arguments is a JSON object
// (not a string, as in OpenAI's shape).
type OllamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// OllamaChatRequest is the body of POST /api/chat.
type OllamaChatRequest struct {
	Model    string          `json:"model"`
	Messages []OllamaMessage `json:"messages"`
	Stream   *bool           `json:"stream"` // default true
	Format   json.RawMessage `json:"format"`
	Tools    json.RawMessage `json:"tools"`
	Options  OllamaOptions   `json:"options"`
}

// OllamaGenerateRequest is the body of POST /api/generate.
type OllamaGenerateRequest struct {
	Model   string          `json:"model"`
	Prompt  string          `json:"prompt"`
	System  string          `json:"system"`
	Raw     bool            `json:"raw"`     // the prompt as it is, without the chat template
	Context []int           `json:"context"` // token ids of an earlier answer's context, continued
	Stream  *bool           `json:"stream"`  // default true
	Format  json.RawMessage `json:"format"`
	Options OllamaOptions   `json:"options"`
}

// OllamaResponse is one line of an answer (or the whole answer with
// "stream": false): Message on /api/chat, Response on /api/generate; the
// last has Done and the counts (durations in nanoseconds).
type OllamaResponse struct {
	Model              string         `json:"model"`
	CreatedAt          string         `json:"created_at"`
	Message            *OllamaMessage `json:"message,omitempty"`
	Response           *string        `json:"response,omitempty"`
	Done               bool           `json:"done"`
	DoneReason         string         `json:"done_reason,omitempty"`
	Context            []int          `json:"context,omitempty"`
	TotalDuration      int64          `json:"total_duration,omitempty"`
	LoadDuration       int64          `json:"load_duration,omitempty"`
	PromptEvalCount    int            `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64          `json:"prompt_eval_duration,omitempty"`
	EvalCount          int            `json:"eval_count,omitempty"`
	EvalDuration       int64          `json:"eval_duration,omitempty"`
}

// OllamaModel is one entry of /api/tags and /api/ps.
type OllamaModel struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt string        `json:"modified_at,omitempty"`
	Size       uint64        `json:"size"`
	Digest     string        `json:"digest"`
	Details    OllamaDetails `json:"details"`
	ExpiresAt  string        `json:"expires_at,omitempty"` // /api/ps
	SizeVRAM   uint64        `json:"size_vram,omitempty"`  // /api/ps
}

// OllamaDetails describes a model's family and format.
type OllamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"` // "gguf"
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

// ollamaName accepts Ollama's "name:latest" for strata's "name".
func ollamaName(name string) string { return strings.TrimSuffix(name, ":latest") }

// ollamaSettings validates the options into j.
func ollamaSettings(o OllamaOptions, j *job) *Error {
	j.params = sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.9, RepeatPenalty: 1.1, PenaltyLastN: 64, Seed: mrand.Uint64()}
	for _, f := range []struct {
		name     string
		v        *float64
		lo, hi   float64
		dst      *float32
		optional bool
	}{
		{"temperature", o.Temperature, 0, 2, &j.params.Temperature, false},
		{"top_p", o.TopP, 0, 1, &j.params.TopP, false},
		{"min_p", o.MinP, 0, 1, &j.params.MinP, false},
		{"repeat_penalty", o.RepeatPenalty, 0, 10, &j.params.RepeatPenalty, false},
		{"presence_penalty", o.PresencePenalty, -2, 2, &j.params.PresencePenalty, false},
		{"frequency_penalty", o.FrequencyPenalty, -2, 2, &j.params.FrequencyPenalty, false},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < f.lo || *f.v > f.hi || math.IsNaN(*f.v) {
			return badRequest(f.name, "invalid_value", "option %s must be between %v and %v, got %v", f.name, f.lo, f.hi, *f.v)
		}
		*f.dst = float32(*f.v)
	}
	if o.TopK != nil {
		if *o.TopK < 0 {
			return badRequest("top_k", "invalid_value", "option top_k must be at least 0, got %d", *o.TopK)
		}
		j.params.TopK = *o.TopK
	}
	if o.RepeatLastN != nil {
		if *o.RepeatLastN < -1 {
			return badRequest("repeat_last_n", "invalid_value", "option repeat_last_n must be at least -1, got %d", *o.RepeatLastN)
		}
		j.params.PenaltyLastN = *o.RepeatLastN
		if j.params.PenaltyLastN == 0 { // Ollama: 0 = off
			j.params.RepeatPenalty = 1
		}
	}
	if o.Seed != nil && *o.Seed >= 0 {
		j.params.Seed = uint64(*o.Seed)
	}
	if o.NumPredict != nil && *o.NumPredict > 0 { // -1 and 0: no limit but the context (Ollama's -2, fill the context, too)
		j.maxTok = *o.NumPredict
	}
	if len(o.Stop) > maxStops {
		return badRequest("stop", "invalid_value", "at most %d stop strings are supported, got %d", maxStops, len(o.Stop))
	}
	j.stop = o.Stop
	if err := j.params.Validate(); err != nil {
		return badRequest("", "invalid_value", "%v", err)
	}
	return nil
}

// ollamaFormat reads format ("json", or a JSON schema) and tools into j.
// Tools are the model's to call (Ollama has no way to force one); they
// cannot be combined with a format, which would leave the model no way
// to write a call.
func ollamaFormat(format, tools json.RawMessage, j *job) *Error {
	if !empty(tools) {
		if !empty(format) {
			return badRequest("format", "unsupported_value", "format and tools cannot be combined")
		}
		_, defs, e := openAITools("tools", tools)
		if e != nil {
			return e
		}
		j.tools = newToolUse(defs, "call_")
		return nil
	}
	if empty(format) {
		return nil
	}
	var word string
	if json.Unmarshal(format, &word) == nil {
		if word != "json" {
			return badRequest("format", "invalid_value", "format must be \"json\" or a JSON schema, got %q", word)
		}
		j.schema, _ = compileSchema("", nil)
		return nil
	}
	sc, e := compileSchema("format", format)
	if e != nil {
		return e
	}
	j.schema = sc
	return nil
}

func (s *Server) handleOllamaChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	const ep = "ollama"
	var req OllamaChatRequest
	if e := s.readJSON(w, r, &req); e != nil {
		s.fail(w, ep, e)
		return
	}
	j := &job{endpoint: ep, model: ollamaName(req.Model), created: start.Unix(), stream: req.Stream == nil || *req.Stream}
	if e := ollamaSettings(req.Options, j); e != nil {
		s.fail(w, ep, e)
		return
	}
	if e := ollamaFormat(req.Format, req.Tools, j); e != nil {
		s.fail(w, ep, e)
		return
	}
	if len(req.Messages) == 0 { // Ollama loads the model and answers at once
		if _, _, e := s.lookup(j.model); e != nil {
			s.fail(w, ep, e)
			return
		}
		s.writeJSON(w, ep, OllamaResponse{Model: req.Model, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
			Message: &OllamaMessage{Role: "assistant"}, Done: true, DoneReason: "load"})
		return
	}
	msgs, e := ollamaMessages(req.Messages)
	if e != nil {
		s.fail(w, ep, e)
		return
	}
	if !s.prepareChat(w, r, j, msgs, "messages") {
		return
	}
	s.run(w, r, j, &ollamaOut{w: w, rc: http.NewResponseController(w), j: j, name: req.Model, chat: true, start: start}, start)
}

// ollamaMessages reads a chat's messages: text, the tool calls of
// assistant messages (arguments as objects), and tool results.
func ollamaMessages(list []OllamaMessage) ([]Message, *Error) {
	msgs := make([]Message, len(list))
	for i, m := range list {
		if !roles[m.Role] || m.Role == "developer" {
			return nil, badRequest("messages", "invalid_value", "messages[%d]: invalid role %q (system, user, assistant or tool)", i, m.Role)
		}
		msgs[i] = Message{Role: m.Role, Content: m.Content, Name: m.ToolName, ToolCallID: m.ToolCallID}
		for k, c := range m.ToolCalls {
			args, ok := argumentsText(c.Function.Arguments)
			if c.Function.Name == "" || !ok {
				return nil, badRequest("messages", "invalid_value", "messages[%d].tool_calls[%d]: a call needs a function name and arguments that are a JSON object", i, k)
			}
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, MessageCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
		}
	}
	nameToolResults(msgs)
	return msgs, nil
}

func (s *Server) handleOllamaGenerate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	const ep = "ollama"
	var req OllamaGenerateRequest
	if e := s.readJSON(w, r, &req); e != nil {
		s.fail(w, ep, e)
		return
	}
	j := &job{endpoint: ep, model: ollamaName(req.Model), created: start.Unix(), stream: req.Stream == nil || *req.Stream}
	if e := ollamaSettings(req.Options, j); e != nil {
		s.fail(w, ep, e)
		return
	}
	if e := ollamaFormat(req.Format, nil, j); e != nil {
		s.fail(w, ep, e)
		return
	}
	info, tok, e := s.lookup(j.model)
	if e != nil {
		s.fail(w, ep, e)
		return
	}
	if req.Prompt == "" && len(req.Context) == 0 { // Ollama loads the model and answers at once
		empty := ""
		s.writeJSON(w, ep, OllamaResponse{Model: req.Model, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
			Response: &empty, Done: true, DoneReason: "load"})
		return
	}
	for _, id := range req.Context {
		if id < 0 || id >= tok.VocabSize() {
			s.fail(w, ep, badRequest("context", "invalid_value", "context holds token id %d, outside the vocabulary of %d tokens", id, tok.VocabSize()))
			return
		}
	}
	switch {
	case req.Raw || len(req.Context) > 0:
		// As it is: a continuation of the context (no second BOS), or a
		// raw prompt (BOS when the vocabulary asks for one).
		if e := s.fitsBytes(info, tok, len(req.Prompt), "prompt"); e != nil {
			s.fail(w, ep, e)
			return
		}
		j.tok, j.ctxLen = tok, info.ContextLength
		j.tokens = append(append([]int{}, req.Context...), tok.Encode(req.Prompt, len(req.Context) == 0, false)...)
		if e := s.fits(info, len(j.tokens)); e != nil {
			s.fail(w, ep, e)
			return
		}
	default:
		var msgs []Message
		if req.System != "" {
			msgs = append(msgs, Message{Role: "system", Content: req.System})
		}
		msgs = append(msgs, Message{Role: "user", Content: req.Prompt})
		if !s.prepareChat(w, r, j, msgs, "prompt") {
			return
		}
	}
	s.run(w, r, j, &ollamaOut{w: w, rc: http.NewResponseController(w), j: j, name: req.Model, start: start}, start)
}

// ollamaOut writes an answer as NDJSON lines, or (stream false) as one
// object at the end.
type ollamaOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	name    string // as the client wrote it
	chat    bool
	start   time.Time
	started bool
	b       strings.Builder // the whole answer, without streaming
	first   time.Duration   // time to the first text
}

func (o *ollamaOut) line(text string) OllamaResponse {
	v := OllamaResponse{Model: o.name, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	if o.chat {
		v.Message = &OllamaMessage{Role: "assistant", Content: text}
	} else {
		v.Response = &text
	}
	return v
}

func (o *ollamaOut) send(v any) error {
	if !o.started {
		o.started = true
		o.w.Header().Set("Content-Type", "application/x-ndjson")
		o.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := o.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return o.rc.Flush()
}

func (o *ollamaOut) text(t string) error {
	if o.first == 0 {
		o.first = time.Since(o.start)
	}
	if !o.j.stream {
		o.b.WriteString(t)
		return nil
	}
	return o.send(o.line(t))
}

// call streams a parsed tool call as a line of its own.
func (o *ollamaOut) call(i int, c toolcall.Call) error {
	if !o.j.stream {
		return nil // finish writes them
	}
	v := o.line("")
	v.Message.ToolCalls = []OllamaToolCall{ollamaCall(i, c)}
	return o.send(v)
}

func ollamaCall(i int, c toolcall.Call) OllamaToolCall {
	tc := OllamaToolCall{ID: c.ID}
	tc.Function.Index, tc.Function.Name, tc.Function.Arguments = i, c.Name, json.RawMessage(c.Arguments)
	return tc
}

func (o *ollamaOut) failed(e *Error) bool {
	if !o.started {
		return false
	}
	o.send(map[string]string{"error": e.Message})
	return true
}

func (o *ollamaOut) finish(f finish) error {
	v := o.line(o.b.String())
	total := time.Since(o.start)
	v.Done, v.DoneReason = true, f.reason
	if f.reason == engine.FinishLength {
		v.DoneReason = "length"
	}
	v.TotalDuration = total.Nanoseconds()
	v.PromptEvalCount, v.EvalCount = f.usage.PromptTokens, f.usage.CompletionTokens
	v.PromptEvalDuration = o.first.Nanoseconds()
	v.EvalDuration = (total - o.first).Nanoseconds()
	if !o.chat {
		v.Context = append(append([]int{}, o.j.tokens...), f.tokens...)
	}
	if !o.j.stream && o.chat {
		for i, c := range f.calls {
			v.Message.ToolCalls = append(v.Message.ToolCalls, ollamaCall(i, c))
		}
	}
	if !o.j.stream {
		return writeAnswer(o.w, v)
	}
	return o.send(v)
}

// ollamaDetails describes a model the way /api/tags shows it.
func ollamaModel(m ModelInfo) OllamaModel {
	return OllamaModel{Name: m.ID, Model: m.ID, ModifiedAt: time.Unix(m.Created, 0).UTC().Format(time.RFC3339), Size: m.SizeBytes,
		Digest:  fmt.Sprintf("%x", m.SizeBytes), // no content digest is at hand without reading the file; clients only compare it
		Details: OllamaDetails{Format: "gguf", Family: m.Architecture, Families: []string{m.Architecture}}}
}

func (s *Server) handleOllamaTags(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Models []OllamaModel `json:"models"`
	}{Models: []OllamaModel{}}
	for _, m := range s.cfg.Models.List() {
		out.Models = append(out.Models, ollamaModel(m))
	}
	s.writeJSON(w, "ollama", out)
}

// handleOllamaPs lists the models some member holds layers of now.
func (s *Server) handleOllamaPs(w http.ResponseWriter, r *http.Request) {
	loaded := map[string]bool{}
	for _, m := range s.cfg.Cluster().Members {
		for _, sh := range m.Shards {
			loaded[sh.Model] = true
		}
	}
	out := struct {
		Models []OllamaModel `json:"models"`
	}{Models: []OllamaModel{}}
	for _, m := range s.cfg.Models.List() {
		if loaded[m.ID] {
			om := ollamaModel(m)
			om.SizeVRAM = 0
			om.ExpiresAt = time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
			out.Models = append(out.Models, om)
		}
	}
	s.writeJSON(w, "ollama", out)
}

func (s *Server) handleOllamaShow(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"` // older clients
	}
	if e := s.readJSON(w, r, &req); e != nil {
		s.fail(w, "ollama", e)
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	info, tok, e := s.lookup(ollamaName(req.Model))
	if e != nil {
		s.fail(w, "ollama", e)
		return
	}
	arch := info.Architecture
	caps := []string{"completion"}
	if strings.Contains(tok.ChatTemplate(), "tools") {
		caps = append(caps, "tools")
	}
	s.writeJSON(w, "ollama", map[string]any{
		"modelfile":  "",
		"parameters": "",
		"template":   tok.ChatTemplate(),
		"details":    ollamaModel(info).Details,
		"model_info": map[string]any{
			"general.architecture":        arch,
			arch + ".context_length":      info.ContextLength,
			arch + ".block_count":         info.Layers,
			"tokenizer.ggml.model":        tok.Model(),
			"tokenizer.ggml.vocab_length": tok.VocabSize(),
		},
		"capabilities": caps,
		"modified_at":  time.Unix(info.Created, 0).UTC().Format(time.RFC3339),
	})
}

func (s *Server) handleOllamaVersion(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, "ollama", map[string]string{"version": ollamaVersion})
}

package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"strata/runtime/engine"
	"strata/runtime/tokenizer"
	"strata/runtime/toolcall"
)

// Tool calling chosen by the model (tool_choice auto): the tools go into
// the chat template (RenderChatTools), the model writes calls in its
// family's syntax, and a toolcall.Parser takes them out of the answer as
// it streams: text before a call streams as text, a call goes out when
// it is complete, in each surface's shape (OpenAI tool_calls, Responses
// function_call items, Anthropic tool_use blocks, Ollama tool_calls).
// Forced calls (tool_choice required or a named tool) take the other
// path: sampling constrained to the tool's schema (structured.go).

// toolUse is the tools of a request that the model may call.
type toolUse struct {
	defs   []json.RawMessage // {"type": "function", "function": {...}} each
	family toolcall.Family
	// markers are control tokens whose text is a marker of the family's
	// syntax: they decode to nothing, so their text is put back (see piece).
	markers  map[int]string
	idPrefix string // of the ids made up for calls: "call_", "toolu_"
}

// newToolUse is the tools of a request for the model tok belongs to.
func newToolUse(defs []json.RawMessage, idPrefix string) *toolUse {
	return &toolUse{defs: defs, idPrefix: idPrefix}
}

// bind chooses the syntax for the model's tokenizer.
func (u *toolUse) bind(tok *tokenizer.Tokenizer) {
	u.family = toolFamily(tok)
	u.markers = map[int]string{}
	for _, m := range u.family.Markers() {
		if id, ok := tok.TokenID(m); ok && tok.IsControl(id) {
			u.markers[id] = m
		}
	}
}

// piece is the text of a generated token as the parser must see it.
func (u *toolUse) piece(t engine.Token) string {
	if m, ok := u.markers[t.ID]; ok && !strings.Contains(t.Text, m) {
		return m + t.Text
	}
	return t.Text
}

// toolFamily is the tool-call syntax of a model: from the markers its
// chat template writes, else from its vocabulary.
func toolFamily(tok *tokenizer.Tokenizer) toolcall.Family {
	return toolcall.Detect(tok.ChatTemplate(), func(s string) bool { _, ok := tok.TokenID(s); return ok })
}

// renderJob renders msgs for j, with its tools when the model may call them.
func renderJob(ctx context.Context, j *job, tok *tokenizer.Tokenizer, msgs []Message) (ChatPrompt, error) {
	if j.tools == nil {
		return RenderChat(ctx, tok, msgs)
	}
	j.tools.bind(tok)
	return RenderChatTools(ctx, tok, msgs, j.tools.defs)
}

// callWriter is a streamer that writes tool calls as they are parsed
// (streaming surfaces); the others take them from finish.calls.
type callWriter interface {
	// call writes the i-th call of the answer.
	call(i int, c toolcall.Call) error
}

// toolOut sits between the generation and a surface's streamer when the
// model may call tools: it passes text on, holding back what may begin a
// call, and hands over the calls it parses.
type toolOut struct {
	streamer
	u     *toolUse
	p     *toolcall.Parser
	calls []toolcall.Call
}

func newToolOut(u *toolUse, out streamer) *toolOut {
	return &toolOut{streamer: out, u: u, p: toolcall.NewParser(u.family)}
}

func (o *toolOut) text(s string) error {
	t, calls := o.p.Feed(s)
	return o.emit(t, calls)
}

func (o *toolOut) emit(t string, calls []toolcall.Call) error {
	if t != "" {
		if err := o.streamer.text(t); err != nil {
			return err
		}
	}
	for _, c := range calls {
		if c.ID == "" {
			c.ID = o.u.idPrefix + randomID()
		}
		o.calls = append(o.calls, c)
		if w, ok := o.streamer.(callWriter); ok {
			if err := w.call(len(o.calls)-1, c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *toolOut) finish(f finish) error {
	t, calls := o.p.Flush()
	if err := o.emit(t, calls); err != nil {
		return err
	}
	f.calls = o.calls
	return o.streamer.finish(f)
}

// functionTool is a tool definition in the shape chat templates take.
type functionTool struct {
	Type     string `json:"type"` // "function"
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

func (t functionTool) raw() json.RawMessage {
	b, _ := json.Marshal(t) // cannot fail: strings and valid JSON
	return b
}

// openAITools reads OpenAI's (and Ollama's) tools: function tools
// {"type": "function", "function": {"name", "description", "parameters"}},
// passed to the template as the client wrote them.
func openAITools(param string, raw json.RawMessage) ([]functionTool, []json.RawMessage, *Error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, nil, badRequest(param, "invalid_type", "tools must be an array of function tools.")
	}
	tools := make([]functionTool, len(list))
	for i, r := range list {
		if err := json.Unmarshal(r, &tools[i]); err != nil || tools[i].Type != "function" || tools[i].Function.Name == "" {
			return nil, nil, badRequest(fmt.Sprintf("%s[%d]", param, i), "invalid_value", "Only function tools with a name are supported.")
		}
		if p := tools[i].Function.Parameters; len(p) > 0 && !empty(p) && p[0] != '{' {
			return nil, nil, badRequest(fmt.Sprintf("%s[%d].function.parameters", param, i), "invalid_type", "parameters must be a JSON schema object.")
		}
	}
	return tools, list, nil
}

// nameToolResults links tool results to the calls they answer, as
// templates need: a call without an id (Ollama's) gets Kimi K2's kind,
// "functions.NAME:N" with N counting the conversation's calls (the only
// family that prints ids writes them so; the others ignore them); a
// result without the call's id takes the next unanswered call of the
// assistant message before it (the one of its name, when it has one);
// and a result without a name gets its call's (OpenAI's and Anthropic's
// results give only the id; Kimi K2's template prints the name).
func nameToolResults(msgs []Message) {
	names := map[string]string{}
	var pending []MessageCall // the last assistant message's calls not yet answered
	n := 0
	for i := range msgs {
		m := &msgs[i]
		if len(m.ToolCalls) > 0 {
			pending = pending[:0]
			for k := range m.ToolCalls {
				c := &m.ToolCalls[k]
				if c.ID == "" {
					c.ID = fmt.Sprintf("functions.%s:%d", c.Name, n)
				}
				n++
				names[c.ID] = c.Name
				pending = append(pending, *c)
			}
			continue
		}
		if m.Role != "tool" {
			continue
		}
		at := -1
		for k, c := range pending {
			if (m.ToolCallID != "" && c.ID == m.ToolCallID) || (m.ToolCallID == "" && (m.Name == "" || m.Name == c.Name)) {
				at = k
				break
			}
		}
		if at >= 0 {
			if m.ToolCallID == "" {
				m.ToolCallID = pending[at].ID
			}
			pending = append(pending[:at], pending[at+1:]...)
		}
		if m.Name == "" {
			m.Name = names[m.ToolCallID]
		}
	}
}

// argumentsText is a call's arguments as a JSON object's text: a string
// holding JSON (OpenAI), kept as the client sent it (the model's own
// text, usually); or the object itself (Ollama, Anthropic's input), which
// the client has parsed and written again, so it is written as Python's
// json.dumps would (", " and ": "), as Hugging Face pipelines print a
// dict for templates that take the arguments as text.
func argumentsText(raw json.RawMessage) (string, bool) {
	if empty(raw) {
		return "{}", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return "{}", true
		}
		return s, isObject(s)
	}
	if !isObject(string(raw)) {
		return "", false
	}
	return pythonJSON(raw), true
}

func isObject(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && json.Valid([]byte(s))
}

// pythonJSON rewrites valid JSON with Python's default separators and no
// other whitespace; strings are copied as they are.
func pythonJSON(raw json.RawMessage) string {
	var b strings.Builder
	inString, escaped := false, false
	for _, c := range []byte(raw) {
		switch {
		case inString:
			b.WriteByte(c)
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			b.WriteByte(c)
		case c == ',':
			b.WriteString(", ")
		case c == ':':
			b.WriteString(": ")
		case c == ' ', c == '\t', c == '\n', c == '\r':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

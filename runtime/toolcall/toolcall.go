// Package toolcall finds the tool calls a chat model writes into its
// output, in the syntax its family was trained on, and tells the text
// around them apart. Three syntaxes are known:
//
//   - Hermes (Qwen2.5, Qwen3, QwQ and many fine-tunes):
//     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one block a call.
//   - DeepSeek (V3, R1, V3.1): <｜tool▁calls▁begin｜> then, a call each,
//     <｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜>
//     (V3, R1) or <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1),
//     then <｜tool▁calls▁end｜>.
//   - Kimi K2: <|tool_calls_section_begin|> then, a call each,
//     <|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}<|tool_call_end|>,
//     then <|tool_calls_section_end|>; "functions.f:0" is the call's id.
//
// A Parser takes the output as it is generated and returns the text that
// is surely not part of a call (holding back a tail that may be the start
// of a marker) and each call once it is complete: a Parser
// for the family Detect finds in the chat template is fed the answer piece
// by piece, and Flush gives what is left (Example).
//
// A block that does not parse (bad JSON, no name, cut short by the token
// limit) comes back as text: the client sees what the model wrote, and
// nothing here panics on any input.
package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Call is one tool call: the function's name and its arguments, a JSON
// object as text. ID is the id the model wrote (Kimi K2 writes one), or "".
type Call struct {
	ID        string
	Name      string
	Arguments string
}

// Family is a tool-call syntax.
type Family int

// The known syntaxes. Hermes is the default: it is the most common, and
// the one the instructions for a template that does not render tools ask for.
const (
	Hermes Family = iota
	DeepSeek
	Kimi
)

func (f Family) String() string {
	switch f {
	case DeepSeek:
		return "deepseek"
	case Kimi:
		return "kimi"
	}
	return "hermes"
}

// Marker texts. DeepSeek's use the fullwidth bar ｜ (U+FF5C) and ▁ (U+2581).
const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"

	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"

	kimiSectionBegin = "<|tool_calls_section_begin|>"
	kimiSectionEnd   = "<|tool_calls_section_end|>"
	kimiCallBegin    = "<|tool_call_begin|>"
	kimiArgBegin     = "<|tool_call_argument_begin|>"
	kimiCallEnd      = "<|tool_call_end|>"
)

// Markers are the texts of f's syntax that a vocabulary may hold as single
// tokens. Some vocabularies mark them as control tokens, which decode to
// nothing; the caller then writes their text into the output it feeds to
// the Parser (see Tokens).
func (f Family) Markers() []string {
	switch f {
	case DeepSeek:
		return []string{dsCallsBegin, dsCallsEnd, dsCallBegin, dsCallEnd, dsSep}
	case Kimi:
		return []string{kimiSectionBegin, kimiSectionEnd, kimiCallBegin, kimiArgBegin, kimiCallEnd}
	}
	return []string{hermesOpen, hermesClose}
}

// opens are the markers that start a block, and close the one that ends
// it. DeepSeek models sometimes skip the section marker and start with a
// call's, so that opens a block too (ended by the section's end or, at
// Flush, by the last call's end).
func (f Family) opens() []string {
	switch f {
	case DeepSeek:
		return []string{dsCallsBegin, dsCallBegin}
	case Kimi:
		return []string{kimiSectionBegin}
	}
	return []string{hermesOpen}
}

func (f Family) close() string {
	switch f {
	case DeepSeek:
		return dsCallsEnd
	case Kimi:
		return kimiSectionEnd
	}
	return hermesClose
}

// Detect chooses the syntax of a model from its chat template (the
// markers it writes when it renders a conversation with tool calls) or,
// when the template says nothing, from its vocabulary (hasToken reports
// whether a token's text is exactly s; nil when unknown). Hermes is the
// answer when neither tells.
func Detect(template string, hasToken func(s string) bool) Family {
	switch {
	case strings.Contains(template, kimiSectionBegin), strings.Contains(template, "tool_declare"):
		return Kimi
	case strings.Contains(template, "tool▁call"):
		return DeepSeek
	case strings.Contains(template, hermesOpen):
		return Hermes
	}
	if hasToken != nil {
		switch {
		case hasToken(kimiSectionBegin):
			return Kimi
		case hasToken(dsCallsBegin):
			return DeepSeek
		}
	}
	return Hermes
}

// Instructions is a system prompt that describes tools (each a JSON
// object {"type": "function", "function": {...}}) and asks for calls in
// f's syntax, for a model whose chat template does not render tools
// itself (DeepSeek-V3's does not).
func (f Family) Instructions(tools []json.RawMessage) string {
	var b strings.Builder
	b.WriteString("You may call one or more functions to assist with the user query. The functions are described here as JSON:\n")
	for _, t := range tools {
		b.Write(t)
		b.WriteByte('\n')
	}
	b.WriteString("\nTo call a function, write exactly:\n")
	switch f {
	case DeepSeek:
		b.WriteString(dsCallsBegin + dsCallBegin + "function" + dsSep + "<function-name>\n```json\n<arguments as a JSON object>\n```" + dsCallEnd + dsCallsEnd)
	case Kimi:
		b.WriteString(kimiSectionBegin + kimiCallBegin + "functions.<function-name>:<call number>" + kimiArgBegin + "<arguments as a JSON object>" + kimiCallEnd + kimiSectionEnd)
	default:
		b.WriteString(hermesOpen + "\n{\"name\": <function-name>, \"arguments\": <arguments as a JSON object>}\n" + hermesClose)
	}
	b.WriteString("\nOtherwise answer in plain text.")
	return b.String()
}

// Parser splits a model's output into text and tool calls as it streams.
// It is not safe for concurrent use.
type Parser struct {
	f Family
	// buf holds output not yet returned: a tail that may begin a marker,
	// or (inside) the block being read since its opening marker.
	buf    strings.Builder
	inside bool
	// space holds whitespace that came after a call: dropped when another
	// call or the end follows, returned as text otherwise.
	space string
	calls int // calls returned so far
}

// NewParser returns a Parser for f.
func NewParser(f Family) *Parser { return &Parser{f: f} }

// Calls is how many calls the parser has returned.
func (p *Parser) Calls() int { return p.calls }

// Feed takes the next piece of output and returns the text that is now
// known not to belong to a call, and the calls completed by this piece.
func (p *Parser) Feed(s string) (text string, calls []Call) {
	p.buf.WriteString(s)
	var out strings.Builder
	for {
		cur := p.buf.String()
		if !p.inside {
			at := firstOf(cur, p.f.opens())
			if at < 0 {
				// Keep a tail that could still grow into an opening marker.
				keep := partialTail(cur, p.f.opens())
				p.text(&out, cur[:len(cur)-keep])
				p.reset(cur[len(cur)-keep:])
				return out.String(), calls
			}
			p.text(&out, cur[:at])
			p.inside = true
			p.reset(cur[at:])
			continue
		}
		end := strings.Index(cur, p.f.close())
		if end < 0 {
			return out.String(), calls
		}
		end += len(p.f.close())
		block := cur[:end]
		p.inside = false
		p.reset(cur[end:])
		if got, ok := parseBlock(p.f, block); ok {
			p.space = ""
			p.calls += len(got)
			calls = append(calls, got...)
		} else {
			p.text(&out, block)
		}
	}
}

// Flush ends the output: held text comes back as text, and so does a
// block that never closed, unless its calls are complete and only the
// closing marker is missing (a model may end its turn right after them).
func (p *Parser) Flush() (text string, calls []Call) {
	rest := p.buf.String()
	p.buf.Reset()
	var out strings.Builder
	if p.inside {
		p.inside = false
		if got, ok := parseBlock(p.f, rest+p.f.close()); ok {
			p.calls += len(got)
			return "", got
		}
	}
	p.text(&out, rest)
	p.space = "" // whitespace after the last call: the end follows
	return out.String(), nil
}

// text adds s to out, except whitespace after a call, which waits in
// p.space to see what follows.
func (p *Parser) text(out *strings.Builder, s string) {
	if s == "" {
		return
	}
	if p.calls > 0 && strings.TrimSpace(p.space+s) == "" {
		p.space += s
		return
	}
	out.WriteString(p.space)
	p.space = ""
	out.WriteString(s)
}

func (p *Parser) reset(s string) {
	p.buf.Reset()
	p.buf.WriteString(s)
}

// firstOf is the earliest index in s of any of marks, or -1.
func firstOf(s string, marks []string) int {
	at := -1
	for _, m := range marks {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// partialTail is the length of the longest tail of s that is a proper
// prefix of one of marks.
func partialTail(s string, marks []string) int {
	best := 0
	for _, m := range marks {
		for n := min(len(m)-1, len(s)); n > best; n-- {
			if strings.HasSuffix(s, m[:n]) {
				best = n
				break
			}
		}
	}
	return best
}

// parseBlock reads the calls of one complete block (opening marker to
// closing marker); ok is false when anything in it does not parse.
func parseBlock(f Family, block string) ([]Call, bool) {
	switch f {
	case DeepSeek:
		return parseDeepSeek(block)
	case Kimi:
		return parseKimi(block)
	}
	return parseHermes(block)
}

func parseHermes(block string) ([]Call, bool) {
	body := strings.TrimSuffix(strings.TrimPrefix(block, hermesOpen), hermesClose)
	var v struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		// Some fine-tunes write "parameters".
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Name == "" {
		return nil, false
	}
	if len(v.Arguments) == 0 {
		v.Arguments = v.Parameters
	}
	args, ok := arguments(v.Arguments)
	if !ok {
		return nil, false
	}
	return []Call{{Name: v.Name, Arguments: args}}, true
}

func parseDeepSeek(block string) ([]Call, bool) {
	body := strings.TrimSuffix(strings.TrimPrefix(block, dsCallsBegin), dsCallsEnd)
	var calls []Call
	for {
		body = strings.TrimSpace(body)
		if body == "" {
			break
		}
		rest, ok := strings.CutPrefix(body, dsCallBegin)
		if !ok {
			return nil, false
		}
		one, after, ok := strings.Cut(rest, dsCallEnd)
		if !ok {
			return nil, false
		}
		body = after
		head, tail, ok := strings.Cut(one, dsSep)
		if !ok {
			return nil, false
		}
		var name, raw string
		if fence := strings.Index(tail, "```"); fence >= 0 {
			// V3, R1: type, then the name on its own line and the
			// arguments in a ```json fence.
			name = strings.TrimSpace(tail[:fence])
			raw = strings.TrimPrefix(tail[fence+3:], "json")
			end := strings.LastIndex(raw, "```")
			if end < 0 {
				return nil, false
			}
			raw = raw[:end]
		} else {
			// V3.1: the name, then the arguments.
			name, raw = strings.TrimSpace(head), tail
		}
		args, ok := arguments(json.RawMessage(raw))
		if name == "" || !ok {
			return nil, false
		}
		calls = append(calls, Call{Name: name, Arguments: args})
	}
	return calls, len(calls) > 0
}

func parseKimi(block string) ([]Call, bool) {
	body := strings.TrimSuffix(strings.TrimPrefix(block, kimiSectionBegin), kimiSectionEnd)
	var calls []Call
	for {
		body = strings.TrimSpace(body)
		if body == "" {
			break
		}
		rest, ok := strings.CutPrefix(body, kimiCallBegin)
		if !ok {
			return nil, false
		}
		one, after, ok := strings.Cut(rest, kimiCallEnd)
		if !ok {
			return nil, false
		}
		body = after
		id, raw, ok := strings.Cut(one, kimiArgBegin)
		if !ok {
			return nil, false
		}
		id = strings.TrimSpace(id)
		// "functions.get_weather:0": the name sits between the namespace
		// and the call's number.
		name := strings.TrimPrefix(id, "functions.")
		if i := strings.LastIndexByte(name, ':'); i >= 0 {
			name = name[:i]
		}
		args, ok := arguments(json.RawMessage(raw))
		if name == "" || !ok {
			return nil, false
		}
		calls = append(calls, Call{ID: id, Name: name, Arguments: args})
	}
	return calls, len(calls) > 0
}

// arguments checks that raw is a JSON object (or a string holding one, as
// some models write) and returns it as the model wrote it, less the
// whitespace around it; absent arguments are {}.
func arguments(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "{}", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(strings.TrimSpace(s))
	}
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return "", false
	}
	return string(raw), true
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	"strata/runtime/chattemplate"
	"strata/runtime/tokenizer"
)

// Message is one chat message after its content parts are joined.
type Message struct {
	Role    string
	Content string
	// ToolCalls are the calls an assistant message made.
	ToolCalls []MessageCall
	// ToolCallID and Name say, on a "tool" message, which call it answers.
	ToolCallID string
	Name       string
}

// MessageCall is a tool call of an earlier assistant message.
type MessageCall struct {
	ID        string
	Name      string
	Arguments string // a JSON object
}

// ChatPrompt is a chat rendered into the text of a prompt.
type ChatPrompt struct {
	// Text is the prompt. When Template is set, the message contents in
	// it went through tokenizer.EscapeSpecial: Encode keeps them text.
	Text string
	// Template says the model's chat template rendered Text; otherwise it
	// is PlainChat.
	Template bool
	// Fallback says why a model that has a template got PlainChat instead
	// (the template does not compile, or broke a limit); nil otherwise.
	Fallback error
}

// RenderChat turns messages into the prompt text the model was trained
// on: the GGUF's tokenizer.chat_template (Jinja) with
// add_generation_prompt, bos_token and eos_token set, as llama.cpp and
// Hugging Face render it. The template comes from the model file, so it
// renders in a worker process with limits (package chattemplate); one
// that does not compile or breaks a limit gives way to PlainChat, with
// Fallback saying why. A model without a template gets PlainChat. The
// error is the template's own refusal of these messages
// (chattemplate.ErrRefused), or ctx's.
func RenderChat(ctx context.Context, tok *tokenizer.Tokenizer, msgs []Message) (ChatPrompt, error) {
	return RenderChatTools(ctx, tok, msgs, nil)
}

// RenderChatTools is RenderChat with tools the model may call, each a
// JSON object {"type": "function", "function": {"name", "description",
// "parameters"}} as Hugging Face templates take them (in the "tools"
// variable). A template that does not render tools gets them described
// in a system message instead, in the syntax of the model's family
// (package toolcall).
func RenderChatTools(ctx context.Context, tok *tokenizer.Tokenizer, msgs []Message, tools []json.RawMessage) (ChatPrompt, error) {
	src := tok.ChatTemplate()
	if len(tools) > 0 && !strings.Contains(src, "tools") {
		msgs = withToolInstructions(msgs, toolFamily(tok).Instructions(tools))
		tools = nil
	}
	if src == "" {
		return ChatPrompt{Text: PlainChat(msgs)}, nil
	}
	objectArgs := argumentsAsObject(src)
	list := make([]templateMessage, len(msgs))
	for i, m := range msgs {
		// Only the template's own text may hold special tokens; what the
		// user typed stays text however it looks.
		tm := templateMessage{Role: m.Role, Content: tok.EscapeSpecial(m.Content),
			ToolCallID: tok.EscapeSpecial(m.ToolCallID), Name: tok.EscapeSpecial(m.Name)}
		for _, c := range m.ToolCalls {
			tc := templateCall{ID: tok.EscapeSpecial(c.ID), Type: "function"}
			tc.Function.Name = tok.EscapeSpecial(c.Name)
			args := tok.EscapeSpecial(c.Arguments)
			tc.Function.Arguments = args
			if objectArgs && json.Valid([]byte(args)) {
				tc.Function.Arguments = json.RawMessage(args)
			}
			tm.ToolCalls = append(tm.ToolCalls, tc)
		}
		list[i] = tm
	}
	vars := map[string]any{
		"messages":              list,
		"add_generation_prompt": true,
		"bos_token":             tokenText(tok, tok.BOS()),
		"eos_token":             tokenText(tok, tok.EOS()),
	}
	if len(tools) > 0 {
		esc := make([]json.RawMessage, len(tools))
		for i, t := range tools {
			esc[i] = json.RawMessage(tok.EscapeSpecial(string(t)))
		}
		vars["tools"] = esc
	}
	out, err := chattemplate.Render(ctx, src, vars)
	switch {
	case err == nil:
		return ChatPrompt{Text: out, Template: true}, nil
	case errors.Is(err, chattemplate.ErrRefused), ctx.Err() != nil:
		return ChatPrompt{}, err
	default:
		return ChatPrompt{Text: PlainChat(msgs), Fallback: err}, nil
	}
}

// Encode tokenizes the prompt. A template writes the model's special
// tokens as text, so they are parsed as specials (but not the escaped
// ones in the messages); BOS is added when the vocabulary asks for it
// unless the template already wrote one (llama.cpp would warn about the
// double BOS). A plain prompt is all text.
func (p ChatPrompt) Encode(tok *tokenizer.Tokenizer) []int {
	if !p.Template {
		return tok.Encode(p.Text, true, false)
	}
	ids := tok.EncodeEscaped(p.Text, true)
	if bos := tok.BOS(); len(ids) >= 2 && ids[0] == bos && ids[1] == bos && tok.AddBOS() {
		ids = ids[1:]
	}
	return ids
}

// textBytes is the length of the prompt as the tokenizer sees it (less
// the escapes), for the size bound checked before tokenizing.
func (p ChatPrompt) textBytes() int {
	if !p.Template {
		return len(p.Text)
	}
	return len(p.Text) - len(string(tokenizer.Escape))*strings.Count(p.Text, string(tokenizer.Escape))
}

// warnedTemplates remembers the templates a fallback was logged for, so
// a broken template warns once, not on every request.
var warnedTemplates sync.Map // chattemplate.Key -> struct{}

func warnFallback(log *slog.Logger, model, src string, err error) {
	if log == nil {
		return
	}
	key := chattemplate.Key(src)
	if _, seen := warnedTemplates.LoadOrStore(key, struct{}{}); seen {
		return
	}
	log.Warn("the model's chat template cannot be used; prompts are plain transcripts", "model", model, "template", key, "err", err)
}

// templateMessage is a message as Hugging Face chat templates read it
// (the order of the fields is the order tojson prints them in).
type templateMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	ToolCalls  []templateCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

type templateCall struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"` // a string, or the object itself
	} `json:"function"`
}

// argumentsAsObject says whether a template prints a call's arguments
// with tojson, as Hugging Face's documentation has them (an object): Qwen3
// and Kimi K2 do, and print a string as it is. DeepSeek's concatenate
// them as a string.
var argumentsTojson = regexp.MustCompile(`arguments['"]?\]?\s*\|\s*tojson`)

func argumentsAsObject(src string) bool { return argumentsTojson.MatchString(src) }

// withToolInstructions puts instructions at the head of the system
// message, or in a system message of their own.
func withToolInstructions(msgs []Message, instr string) []Message {
	out := append([]Message{}, msgs...)
	if len(out) > 0 && out[0].Role == "system" {
		out[0].Content = instr + "\n\n" + out[0].Content
		return out
	}
	return append([]Message{{Role: "system", Content: instr}}, out...)
}

func tokenText(tok *tokenizer.Tokenizer, id int) string {
	if id < 0 || id >= tok.VocabSize() {
		return ""
	}
	return tok.Token(id)
}

// PlainChat is the prompt for a model without a chat template (a base
// model): a single user message is passed through unchanged, so a story
// model continues it; a conversation becomes a transcript ending in
// "Assistant:".
func PlainChat(msgs []Message) string {
	if len(msgs) == 1 && msgs[0].Role == "user" {
		return msgs[0].Content
	}
	var b strings.Builder
	for _, m := range msgs {
		role := m.Role
		if role != "" {
			role = strings.ToUpper(role[:1]) + role[1:]
		}
		content := m.Content
		for _, c := range m.ToolCalls {
			if content != "" {
				content += "\n"
			}
			name, _ := json.Marshal(c.Name)
			content += fmt.Sprintf(`<tool_call>{"name": %s, "arguments": %s}</tool_call>`, name, c.Arguments)
		}
		fmt.Fprintf(&b, "%s: %s\n\n", role, content)
	}
	b.WriteString("Assistant:")
	return b.String()
}

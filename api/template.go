package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"strata/runtime/chattemplate"
	"strata/runtime/tokenizer"
)

// Message is one chat message after its content parts are joined.
type Message struct {
	Role    string
	Content string
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
	src := tok.ChatTemplate()
	if src == "" {
		return ChatPrompt{Text: PlainChat(msgs)}, nil
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		// Only the template's own text may hold special tokens; what the
		// user typed stays text however it looks.
		list[i] = map[string]any{"role": m.Role, "content": tok.EscapeSpecial(m.Content)}
	}
	out, err := chattemplate.Render(ctx, src, map[string]any{
		"messages":              list,
		"add_generation_prompt": true,
		"bos_token":             tokenText(tok, tok.BOS()),
		"eos_token":             tokenText(tok, tok.EOS()),
	})
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
		fmt.Fprintf(&b, "%s: %s\n\n", role, m.Content)
	}
	b.WriteString("Assistant:")
	return b.String()
}

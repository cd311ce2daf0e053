package api

import (
	"fmt"
	"strings"
	"sync"

	"github.com/ardanlabs/jinja"

	"strata/runtime/tokenizer"
)

// Message is one chat message after its content parts are joined.
type Message struct {
	Role    string
	Content string
}

// templates caches compiled chat templates by source; compiled templates
// are safe for concurrent use.
var templates sync.Map // string -> *jinja.Template

func compileTemplate(src string) (*jinja.Template, error) {
	if t, ok := templates.Load(src); ok {
		return t.(*jinja.Template), nil
	}
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, err
	}
	templates.Store(src, t)
	return t, nil
}

// RenderChat turns messages into the prompt text the model was trained
// on: the GGUF's tokenizer.chat_template (Jinja) with
// add_generation_prompt, bos_token and eos_token set, as llama.cpp and
// Hugging Face render it. A model without a template gets PlainChat.
func RenderChat(tok *tokenizer.Tokenizer, msgs []Message) (string, error) {
	src := tok.ChatTemplate()
	if src == "" {
		return PlainChat(msgs), nil
	}
	t, err := compileTemplate(src)
	if err != nil {
		return "", fmt.Errorf("the model's chat template does not compile: %w", err)
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	out, err := t.Render(map[string]any{
		"messages":              list,
		"add_generation_prompt": true,
		"bos_token":             tokenText(tok, tok.BOS()),
		"eos_token":             tokenText(tok, tok.EOS()),
	})
	if err != nil {
		return "", fmt.Errorf("the model's chat template refused the messages: %w", err)
	}
	return out, nil
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

// encodeChat tokenizes a rendered chat prompt. A template writes the
// model's special tokens as text, so they are parsed as specials; BOS is
// added when the vocabulary asks for it unless the template already
// wrote one (llama.cpp would warn about the double BOS).
func encodeChat(tok *tokenizer.Tokenizer, text string) []int {
	if tok.ChatTemplate() == "" {
		return tok.Encode(text, true, false)
	}
	ids := tok.Encode(text, true, true)
	if bos := tok.BOS(); len(ids) >= 2 && ids[0] == bos && ids[1] == bos && tok.AddBOS() {
		ids = ids[1:]
	}
	return ids
}

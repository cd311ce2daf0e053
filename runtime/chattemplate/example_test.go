package chattemplate_test

import (
	"context"
	"errors"
	"fmt"

	"strata/runtime/chattemplate"
)

// A model's chat template (Jinja, from its GGUF file: a stranger's code)
// renders in a limited worker process. A template may refuse the
// messages itself (raise_exception); one that does not compile or breaks
// a limit is an error, and the caller falls back to a plain prompt.
func ExampleRender() {
	src := `{% for m in messages %}<|{{ m.role }}|>{{ m.content }}
{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}`
	msgs := []map[string]any{{"role": "user", "content": "Hello!"}}
	out, err := chattemplate.Render(context.Background(), src, map[string]any{"messages": msgs, "add_generation_prompt": true})
	fmt.Printf("%q %v\n", out, err)

	_, err = chattemplate.Render(context.Background(), `{{ raise_exception("only user messages") }}`, nil)
	fmt.Println(errors.Is(err, chattemplate.ErrRefused))
	// Output:
	// "<|user|>Hello!\n<|assistant|>" <nil>
	// true
}

package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var chat = map[string]any{
	"messages":              []any{map[string]any{"role": "user", "content": "Hi"}},
	"add_generation_prompt": true,
	"bos_token":             "<s>",
}

const chatML = `{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// TestRender: a template renders in the worker as the library renders it.
func TestRender(t *testing.T) {
	out, err := Render(context.Background(), chatML, chat)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// TestHostileTemplates: each of these, rendered in this process, would end
// it (stack overflow, out of memory) or hold it for minutes. Each must
// come back as ErrLimit within the time limit, and the renderer must work
// afterwards.
func TestHostileTemplates(t *testing.T) {
	r := &Renderer{Limits: Limits{Timeout: 3 * time.Second, MaxMemory: 256 << 20}}
	defer r.Close()
	for _, c := range []struct{ name, src string }{
		{"recursive macro", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`},
		{"mutually recursive macros", `{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n + 1) }}{% endmacro %}{{ a(0) }}`},
		{"huge range", `{% for i in range(1000000000) %}{% endfor %}`},
		{"huge string", `{{ 'x' * 10000000000 }}`},
		{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`},
		{"huge output", `{% for i in range(5000) %}{{ 'x' * 100000 }}{% endfor %}`},
		{"negative repeat", `{{ 'x' * -1 }}`},
		{"huge source", strings.Repeat("x", 2<<20)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r.Limits.MaxOutput = 64 << 20
			if c.name == "huge output" {
				r.Limits.MaxOutput = 1 << 20
			}
			start := time.Now()
			out, err := r.Render(context.Background(), c.src, chat)
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("got %d bytes, %v; want ErrLimit", len(out), err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s", d)
			}
			t.Logf("%v (%s)", err, time.Since(start).Round(time.Millisecond))
			if out, err := r.Render(context.Background(), chatML, chat); err != nil || !strings.Contains(out, "Hi") {
				t.Fatalf("after it, a good template: %q, %v", out, err)
			}
		})
	}
}

// TestTemplateErrors: the template's own refusal and a syntax error are
// told apart from broken limits.
func TestTemplateErrors(t *testing.T) {
	_, err := Render(context.Background(), `{{ raise_exception('Conversation roles must alternate') }}`, chat)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "alternate") {
		t.Errorf("raise_exception: %v", err)
	}
	if _, err := Render(context.Background(), `{% for %}`, chat); !errors.Is(err, ErrCompile) {
		t.Errorf("syntax error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Render(ctx, chatML, chat); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestJSONOrder: objects keep their keys' order and integers stay
// integers, as Hugging Face's renderer (Python dicts, json.dumps) prints
// them with tojson; maps, whose order Go does not keep, come sorted.
func TestJSONOrder(t *testing.T) {
	out, err := Render(context.Background(), `{{ tool | tojson }}|{{ m | tojson }}|{{ tool.function.parameters.days + 1 }}`, map[string]any{
		"tool": json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "parameters": {"days": 3, "city": "Paris", "x": 2.5}}}`),
		"m":    map[string]any{"b": 1, "a": "<é>"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type": "function", "function": {"name": "get_weather", "parameters": {"days": 3, "city": "Paris", "x": 2.5}}}|{"a": "<é>", "b": 1}|4`
	if out != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

package chattemplate

import (
	"context"
	"errors"
	"testing"
	"time"
)

// FuzzRender renders arbitrary template sources with an arbitrary message:
// whatever the template does, Render returns (in about its time limit)
// one of its errors or an output within the output limit, and this
// process survives.
func FuzzRender(f *testing.F) {
	for _, src := range []string{
		chatML,
		`{% for m in messages %}{{ bos_token }}[INST] {{ m.content | trim }} [/INST]{% endfor %}`,
		`{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m['content'].split('</think>')[-1].lstrip('\n') }}{% endfor %}{{ ns.n }}`,
		`{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}x{% endmacro %}{{ f(10) }}`,
		`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`,
		`{{ raise_exception('no') }}`,
		`{{ messages[0].content * 3 }}{{ (messages | length) ** 2 }}{{ messages | tojson }}`,
		`{% for i in range(10) %}{{ loop.index }}{% endfor %}`,
	} {
		f.Add(src, "Hi <|im_start|>")
	}
	r := &Renderer{Limits: Limits{Timeout: time.Second, MaxMemory: 256 << 20, MaxOutput: 1 << 20}, Workers: 1}
	f.Cleanup(r.Close)
	f.Fuzz(func(t *testing.T, src, content string) {
		vars := map[string]any{
			"messages":              []any{map[string]any{"role": "user", "content": content}},
			"add_generation_prompt": true,
			"bos_token":             "<s>",
		}
		start := time.Now()
		out, err := r.Render(context.Background(), src, vars)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %s", d)
		}
		switch {
		case err == nil:
			if len(out) > 1<<20 {
				t.Errorf("output of %d bytes passed the 1 MiB limit", len(out))
			}
		case errors.Is(err, ErrRefused), errors.Is(err, ErrCompile), errors.Is(err, ErrLimit):
		default:
			t.Errorf("unexpected error: %v", err)
		}
	})
}

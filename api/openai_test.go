package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"strata/runtime/catalog"
	"strata/runtime/chattemplate"
	"strata/runtime/engine"
)

func TestNewServerNeedsKeyOffLoopback(t *testing.T) {
	l := storiesLocal(t)
	for _, tc := range []struct {
		addr, key string
		ok        bool
	}{
		{"", "", true}, {"127.0.0.1:7340", "", true}, {"127.0.0.2:0", "", true}, {"[::1]:0", "", true}, {"localhost:9", "", true},
		{":7340", "", false}, {"0.0.0.0:7340", "", false}, {"[::]:7340", "", false}, {"192.0.2.1:7340", "", false}, {"node.example:7340", "", false},
		{"0.0.0.0:7340", "secret", true},
	} {
		_, err := NewServer(Config{Addr: tc.addr, APIKey: tc.key, Generator: l, Models: l})
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrAPIKeyRequired)) {
			t.Errorf("addr %q key %q: %v", tc.addr, tc.key, err)
		}
	}
	if _, err := NewServer(Config{Models: l}); err == nil {
		t.Error("no Generator accepted")
	}
}

// TestErrors checks each refusal's status and OpenAI error shape.
func TestErrors(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	l := storiesLocal(t)
	_, hs := newTestServer(t, Config{APIKey: "k3y", MaxBodyBytes: 64 << 10})
	_, busy := newTestServer(t, Config{Generator: blocker{block}, Models: l, MaxActive: 1, MaxQueue: 1})

	long := strings.Repeat("Once upon a time there was a little girl. ", 400) // far more than the 2048-token context
	huge := `{"model":"stories260K","prompt":"` + strings.Repeat("a", 100<<10) + `"}`
	chat := hs.URL + "/v1/chat/completions"
	cmpl := hs.URL + "/v1/completions"
	for _, tc := range []struct {
		name, url, key string
		body           any
		status         int
		code           string
	}{
		{"malformed JSON", chat, "k3y", `{"model": "stories260K", "messages": [`, 400, "invalid_json"},
		{"empty body", chat, "k3y", ``, 400, "invalid_json"},
		{"wrong type", chat, "k3y", `{"model": "stories260K", "messages": "hi"}`, 400, "invalid_type"},
		{"no messages", chat, "k3y", `{"model": "stories260K", "messages": []}`, 400, "invalid_value"},
		{"bad role", chat, "k3y", `{"model": "stories260K", "messages": [{"role": "wizard", "content": "x"}]}`, 400, "invalid_value"},
		{"no model", chat, "k3y", `{"messages": [{"role": "user", "content": "x"}]}`, 400, "missing_required_parameter"},
		{"temperature", chat, "k3y", `{"model": "stories260K", "temperature": 3, "messages": [{"role": "user", "content": "x"}]}`, 400, "invalid_value"},
		{"top_p", cmpl, "k3y", `{"model": "stories260K", "top_p": -1, "prompt": "x"}`, 400, "invalid_value"},
		{"max_tokens", cmpl, "k3y", `{"model": "stories260K", "max_tokens": 0, "prompt": "x"}`, 400, "invalid_value"},
		{"n", chat, "k3y", `{"model": "stories260K", "n": 2, "messages": [{"role": "user", "content": "x"}]}`, 400, "unsupported_value"},
		{"stop type", cmpl, "k3y", `{"model": "stories260K", "stop": 7, "prompt": "x"}`, 400, "invalid_type"},
		{"token out of vocab", cmpl, "k3y", `{"model": "stories260K", "prompt": [1, 9999]}`, 400, "invalid_value"},
		{"unknown model", chat, "k3y", `{"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}`, 404, "model_not_found"},
		{"unknown model (completions)", cmpl, "k3y", `{"model": "gpt-9", "prompt": "x"}`, 404, "model_not_found"},
		{"unknown model (GET)", hs.URL + "/v1/models/gpt-9", "k3y", nil, 404, "model_not_found"},
		{"oversize prompt (chat)", chat, "k3y", map[string]any{"model": "stories260K", "messages": []map[string]string{{"role": "user", "content": long}}}, 400, "context_length_exceeded"},
		{"oversize prompt (completions)", cmpl, "k3y", map[string]any{"model": "stories260K", "prompt": long}, 400, "context_length_exceeded"},
		{"oversize body", cmpl, "k3y", huge, 413, "request_too_large"},
		{"missing key", chat, "", `{"model": "stories260K", "messages": [{"role": "user", "content": "x"}]}`, 401, "invalid_api_key"},
		{"wrong key", chat, "nope", `{"model": "stories260K", "messages": [{"role": "user", "content": "x"}]}`, 401, "invalid_api_key"},
		{"missing key (models)", hs.URL + "/v1/models", "", nil, 401, "invalid_api_key"},
		{"missing key (metrics)", hs.URL + "/metrics", "", nil, 401, "invalid_api_key"},
		{"unknown path", hs.URL + "/v1/engines", "k3y", nil, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			if tc.body == nil {
				req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
				if tc.key != "" {
					req.Header.Set("Authorization", "Bearer "+tc.key)
				}
				var err error
				if resp, err = http.DefaultClient.Do(req); err != nil {
					t.Fatal(err)
				}
			} else {
				resp = post(t, tc.url, tc.key, tc.body)
			}
			checkError(t, resp, tc.status, tc.code)
		})
	}

	t.Run("disk budget full", func(t *testing.T) {
		// A node with no room to fetch the model's header: the model is
		// in the cluster, so not a 404 but a 503 that sends the client on.
		full := NewFileModels(fullDisk{}, func() []string { return []string{"stories260K"} }, 0)
		_, hs := newTestServer(t, Config{Generator: l, Models: full})
		resp := post(t, hs.URL+"/v1/chat/completions", "", `{"model": "stories260K", "messages": [{"role": "user", "content": "x"}]}`)
		checkError(t, resp, 503, "node_disk_full")
	})

	t.Run("joining", func(t *testing.T) {
		// A node that has not heard from its cluster yet cannot tell an
		// unknown model from one the others hold: 503 until it has.
		var joining atomic.Bool
		joining.Store(true)
		_, hs := newTestServer(t, Config{Generator: l, Models: l, Joining: joining.Load})
		body := `{"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}`
		checkError(t, post(t, hs.URL+"/v1/chat/completions", "", body), 503, "node_joining")
		joining.Store(false)
		checkError(t, post(t, hs.URL+"/v1/chat/completions", "", body), 404, "model_not_found")
	})

	t.Run("queue full", func(t *testing.T) {
		// One request runs (blocked), one waits, the third is refused.
		// The two admitted say where they stood in line: 0 (a slot was
		// free) and 1 (first to wait).
		var wg sync.WaitGroup
		var mu sync.Mutex
		var places []string
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := post(t, busy.URL+"/v1/completions", "", `{"model": "stories260K", "prompt": "x", "stream": true}`)
				mu.Lock()
				places = append(places, resp.Header.Get("X-Strata-Queue-Position"))
				mu.Unlock()
				if resp.Header.Get("X-Strata-Queue-Wait-Ms") == "" {
					t.Error("no X-Strata-Queue-Wait-Ms")
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
		waitFor(t, func() bool { return strings.Contains(scrape(t, busy.URL, ""), "strata_api_queue_depth 1") })
		checkError(t, post(t, busy.URL+"/v1/chat/completions", "", `{"model": "stories260K", "messages": [{"role": "user", "content": "x"}]}`), 429, "rate_limit_exceeded")
		block <- struct{}{}
		block <- struct{}{}
		wg.Wait()
		slices.Sort(places)
		if !slices.Equal(places, []string{"0", "1"}) {
			t.Errorf("queue positions %q, want 0 and 1", places)
		}
		if m := scrape(t, busy.URL, ""); !strings.Contains(m, "strata_api_queue_wait_seconds_count 2") {
			t.Errorf("queue waits not counted:\n%s", grepLines(m, "queue_wait"))
		}
	})
}

func checkError(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	var body struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode != status {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	decode(t, resp, &body)
	if body.Error == nil || body.Error.Message == "" || body.Error.Type == "" {
		t.Fatalf("not an OpenAI error: %+v", body.Error)
	}
	got := ""
	if body.Error.Code != nil {
		got = *body.Error.Code
	}
	if got != code {
		t.Errorf("code %q, want %q (%s)", got, code, body.Error.Message)
	}
}

// blocker streams one token, then waits for a value on its channel.
type blocker struct{ release chan struct{} }

func (b blocker) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	if err := onToken(engine.Token{Text: "x"}); err != nil {
		return engine.Result{}, err
	}
	select {
	case <-b.release:
		return engine.Result{Tokens: []int{1}, FinishReason: engine.FinishStop}, nil
	case <-ctx.Done():
		return engine.Result{}, ctx.Err()
	}
}

// waitFor polls cond (an event the test cannot be told about directly).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 20 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func scrape(t *testing.T, url, key string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestGreedyMatchesEngine: both endpoints, streamed and not, give the
// engine's own greedy text, with usage and finish_reason.
func TestGreedyMatchesEngine(t *testing.T) {
	_, hs := newTestServer(t, Config{APIKey: "k"})
	tok := storiesEngine(t).Tokenizer
	prompt := "Once upon a time"
	ids := tok.Encode(prompt, true, false)
	want := expected(t, ids, 24, nil)
	if want.FinishReason != "length" || want.Text == "" {
		t.Fatalf("engine: %+v", want)
	}
	for _, stream := range []bool{false, true} {
		chatBody := map[string]any{"model": "stories260K", "temperature": 0, "max_tokens": 24, "stream": stream,
			"stream_options": map[string]bool{"include_usage": true}, "messages": []map[string]string{{"role": "user", "content": prompt}}}
		cmplBody := map[string]any{"model": "stories260K", "temperature": 0, "max_tokens": 24, "stream": stream, "prompt": prompt}
		if !stream {
			var c ChatCompletion
			decode(t, post(t, hs.URL+"/v1/chat/completions", "k", chatBody), &c)
			if len(c.Choices) != 1 || c.Choices[0].Message.Content != want.Text || c.Choices[0].FinishReason != "length" ||
				(c.Usage.PromptTokens != len(ids) || c.Usage.CompletionTokens != 24 || c.Usage.TotalTokens != len(ids)+24 || c.Usage.PromptTokensDetails == nil) || c.Object != "chat.completion" || c.Choices[0].Message.Role != "assistant" {
				t.Errorf("chat: %+v, want %q", c, want.Text)
			}
			var p Completion
			decode(t, post(t, hs.URL+"/v1/completions", "k", cmplBody), &p)
			if len(p.Choices) != 1 || p.Choices[0].Text != want.Text || *p.Choices[0].FinishReason != "length" || p.Usage.CompletionTokens != 24 {
				t.Errorf("completions: %+v", p)
			}
			continue
		}
		got := readSSE(t, post(t, hs.URL+"/v1/chat/completions", "k", chatBody))
		if got.text != want.Text || got.finish != "length" || !got.done || got.usage == nil || got.usage.CompletionTokens != 24 || got.chunks < 2 {
			t.Errorf("chat stream: %+v, want %q", got, want.Text)
		}
		got = readSSE(t, post(t, hs.URL+"/v1/completions", "k", cmplBody))
		if got.text != want.Text || got.finish != "length" || !got.done || got.usage != nil {
			t.Errorf("completions stream: %+v", got)
		}
	}

	// Stop strings (string or array) end the answer before them, with finish_reason "stop".
	cut := want.Text[:len(want.Text)/2]
	stopAt := want.Text[len(cut) : len(cut)+3]
	for _, stop := range []any{stopAt, []string{"zzzz", stopAt}} {
		var p Completion
		decode(t, post(t, hs.URL+"/v1/completions", "k", map[string]any{"model": "stories260K", "temperature": 0, "max_tokens": 24, "prompt": prompt, "stop": stop}), &p)
		if p.Choices[0].Text != want.Text[:strings.Index(want.Text, stopAt)] || *p.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %v: %q %s", stop, p.Choices[0].Text, *p.Choices[0].FinishReason)
		}
	}

	// Token-id prompts and echo.
	var p Completion
	decode(t, post(t, hs.URL+"/v1/completions", "k", map[string]any{"model": "stories260K", "temperature": 0, "max_tokens": 24, "prompt": ids, "echo": true}), &p)
	if !strings.HasSuffix(p.Choices[0].Text, want.Text) || !strings.Contains(p.Choices[0].Text, prompt) {
		t.Errorf("token prompt with echo: %q", p.Choices[0].Text)
	}

	// A seed makes sampling reproducible; another seed (almost surely) differs.
	sampled := func(seed int) string {
		var c ChatCompletion
		decode(t, post(t, hs.URL+"/v1/chat/completions", "k", map[string]any{"model": "stories260K", "temperature": 1.2, "top_p": 0.95, "seed": seed, "max_tokens": 32,
			"messages": []map[string]string{{"role": "user", "content": prompt}}}), &c)
		return c.Choices[0].Message.Content
	}
	if a, b, c := sampled(7), sampled(7), sampled(8); a != b || a == c {
		t.Errorf("seeds: %q %q %q", a, b, c)
	}

	// /v1/models lists the model.
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list ModelList
	decode(t, resp, &list)
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "stories260K" || list.Data[0].Object != "model" || list.Data[0].Layers != 5 || list.Data[0].ContextLength != storiesEngine(t).ContextLength() {
		t.Errorf("models: %+v", list)
	}
}

// TestConcurrentStreams: 50 streaming requests at once to one server all
// complete with the text a single run gives.
func TestConcurrentStreams(t *testing.T) {
	_, hs := newTestServer(t, Config{MaxActive: 8})
	tok := storiesEngine(t).Tokenizer
	prompts := []string{"Once upon a time", "Lily went to the park", "The cat", "Tom had a big red ball", "One day"}
	want := make([]string, len(prompts))
	for i, p := range prompts {
		want[i] = expected(t, tok.Encode(p, true, false), 32, nil).Text
	}
	const n = 50
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := i % len(prompts)
			resp := post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "stories260K", "temperature": 0, "max_tokens": 32, "stream": true,
				"stream_options": map[string]bool{"include_usage": true}, "messages": []map[string]string{{"role": "user", "content": prompts[p]}}})
			got := readSSE(t, resp)
			if got.text != want[p] || !got.done || got.finish == "" || got.usage == nil {
				errs <- fmt.Errorf("request %d: %+v, want %q", i, got, want[p])
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestOpenAIClientDisconnectCancels: a client that goes away mid-stream cancels
// the generation.
func TestOpenAIClientDisconnectCancels(t *testing.T) {
	done := make(chan error, 1)
	l := storiesLocal(t)
	_, hs := newTestServer(t, Config{Generator: cancelWatcher{done: done}, Models: l})
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+path,
			strings.NewReader(`{"model": "stories260K", "stream": true, "prompt": "x", "messages": [{"role": "user", "content": "x"}]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		buf := make([]byte, 64)
		if _, err := resp.Body.Read(buf); err != nil { // the stream has started
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
		select {
		case err := <-done:
			if err == nil { // context.Canceled, or the failed write that noticed first
				t.Errorf("%s: generation ended without an error", path)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: generation not cancelled", path)
		}
	}
}

// TestFallbackAndTemplate: a model without a template gets the plain
// prompt; one with a template gets it rendered, special tokens parsed and
// one BOS.
func TestFallbackAndTemplate(t *testing.T) {
	if got := chattemplate.PlainChat([]Message{{Role: "user", Content: "Once upon a time"}}); got != "Once upon a time" {
		t.Errorf("plain single: %q", got)
	}
	if got := chattemplate.PlainChat([]Message{{Role: "system", Content: "Be kind."}, {Role: "user", Content: "Hi"}}); got != "System: Be kind.\n\nUser: Hi\n\nAssistant:" {
		t.Errorf("plain conversation: %q", got)
	}

	const tmpl = `{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}[{{ m.content }}] {% else %}{{ m.role }}: {{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}`
	e, err := engine.Open(storiesWithTemplate(t, tmpl), engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := NewLocal(e, "chatty")
	if err != nil {
		t.Fatal(err)
	}
	if !l.List()[0].ChatTemplate {
		t.Error("ChatTemplate not reported")
	}
	msgs := []Message{{Role: "system", Content: "Lily"}, {Role: "user", Content: "Tell a story"}, {Role: "assistant", Content: "Once"}, {Role: "user", Content: "More"}}
	prompt, err := chattemplate.RenderChat(context.Background(), e.Tokenizer, msgs)
	if err != nil || !prompt.Template {
		t.Fatal(err, prompt.Fallback)
	}
	text := prompt.Text
	bos := e.Tokenizer.Token(e.Tokenizer.BOS())
	if wantText := bos + "[Lily] user: Tell a story\nassistant: Once\nuser: More\nassistant:"; text != wantText {
		t.Fatalf("rendered %q, want %q", text, wantText)
	}
	ids := prompt.Encode(e.Tokenizer)
	if ids[0] != e.Tokenizer.BOS() || ids[1] == e.Tokenizer.BOS() {
		t.Errorf("want exactly one BOS: %v", ids[:4])
	}
	if rest := e.Tokenizer.Encode(text[len(bos):], false, false); fmt.Sprint(ids[1:]) != fmt.Sprint(rest) && fmt.Sprint(ids) != fmt.Sprint(e.Tokenizer.Encode(text, true, true)[1:]) {
		t.Errorf("template tokens %v", ids)
	}

	_, hs := newTestServer(t, Config{Generator: l, Models: l})
	want := expected(t, ids, 16, nil)
	var c ChatCompletion
	wire := []map[string]any{{"role": "system", "content": "Lily"}, {"role": "user", "content": []map[string]string{{"type": "text", "text": "Tell "}, {"type": "text", "text": "a story"}}},
		{"role": "assistant", "content": "Once"}, {"role": "user", "content": "More"}}
	decode(t, post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "chatty", "temperature": 0, "max_tokens": 16, "messages": wire}), &c)
	if c.Choices[0].Message.Content != want.Text || c.Usage.PromptTokens != len(ids) {
		t.Errorf("templated chat: %+v, want %q", c, want.Text)
	}

	// A template that raises is a 400 with its message.
	e2, err := engine.Open(storiesWithTemplate(t, `{{ raise_exception('roles must alternate') }}`), engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	l2, _ := NewLocal(e2, "strict")
	_, hs2 := newTestServer(t, Config{Generator: l2, Models: l2})
	resp := post(t, hs2.URL+"/v1/chat/completions", "", `{"model": "strict", "messages": [{"role": "user", "content": "x"}]}`)
	if resp.StatusCode != 400 {
		t.Errorf("raising template: %s", resp.Status)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "roles must alternate") {
		t.Errorf("raising template: %s", b)
	}
}

func TestGenerationErrorsAfterStart(t *testing.T) {
	l := storiesLocal(t)
	_, hs := newTestServer(t, Config{Generator: failing{l}, Models: l})
	// Before any text: a proper status.
	checkError(t, post(t, hs.URL+"/v1/chat/completions", "", `{"model": "stories260K", "messages": [{"role": "user", "content": "before"}]}`), 500, "")
	// After text started streaming: an error event.
	got := readSSE(t, post(t, hs.URL+"/v1/chat/completions", "", `{"model": "stories260K", "stream": true, "messages": [{"role": "user", "content": "after"}]}`))
	if got.text != "partial" || !strings.Contains(got.errMsg, "node lost") || got.done {
		t.Errorf("%+v", got)
	}
}

// failing fails with "node lost": at once, or after one piece of text
// when the prompt says "after".
type failing struct{ l *Local }

func (f failing) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	if strings.Contains(f.l.e.Tokenizer.Decode(req.Tokens), "after") {
		if err := onToken(engine.Token{Text: "partial"}); err != nil {
			return engine.Result{}, err
		}
	}
	return engine.Result{}, errors.New("node lost")
}

// fullDisk is a node's finder whose disk budget has no room for a model.
type fullDisk struct{}

func (fullDisk) Path(name string) (string, error) {
	return "", fmt.Errorf("%w: %s needs 4096 more bytes, but 0 of the 1000-byte budget (--disk) are held by models in use", catalog.ErrDiskBudget, name)
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

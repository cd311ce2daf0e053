package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/internal/testdata"
	"strata/runtime/grammar"
)

// weatherSchema is the forced tool's input schema of issue 18.
var weatherSchema = map[string]any{"type": "object", "properties": map[string]any{
	"city": map[string]any{"type": "string"},
	"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7}}, "required": []string{"city", "days"}}

// validWeather parses doc and checks it against weatherSchema.
func validWeather(t *testing.T, what, doc string) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Errorf("%s: %q does not parse: %v", what, doc, err)
		return
	}
	city, ok1 := v["city"].(string)
	days, ok2 := v["days"].(float64)
	if !ok1 || !ok2 || days != float64(int(days)) || days < 1 || days > 7 || len(v) != 2 {
		t.Errorf("%s: %q does not validate", what, doc)
	}
	_ = city
	t.Logf("%s: %s", what, doc)
}

var weatherTool = []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather forecast", "parameters": weatherSchema}}}

func TestStructuredOpenAI(t *testing.T) {
	_, hs := newTestServer(t, Config{})
	msgs := []map[string]any{{"role": "user", "content": "What is the weather in Paris this week?"}}
	for _, temp := range []float64{0, 1} {
		var got ChatCompletion
		decode(t, post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "stories260K", "messages": msgs, "temperature": temp, "seed": 7, "max_tokens": 60,
			"tools": weatherTool, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}), &got)
		if len(got.Choices) != 1 || len(got.Choices[0].Message.ToolCalls) != 1 || got.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("temperature %v: %+v", temp, got)
		}
		call := got.Choices[0].Message.ToolCalls[0]
		if call.Type != "function" || call.Function.Name != "get_weather" || call.ID == "" {
			t.Errorf("call %+v", call)
		}
		validWeather(t, "chat tool call", call.Function.Arguments)

		decode(t, post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "stories260K", "messages": msgs, "temperature": temp, "seed": 7, "max_tokens": 60,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "weather", "schema": weatherSchema}}}), &got)
		validWeather(t, "chat response_format", got.Choices[0].Message.Content)
	}
	// Streamed, the arguments arrive in pieces of one tool call; the
	// first names it.
	resp := post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "stories260K", "messages": msgs, "temperature": 0, "max_tokens": 60, "stream": true,
		"tools": weatherTool, "tool_choice": "required"})
	defer resp.Body.Close()
	var args, name, finish string
	pieces := 0
	eachEvent(t, resp.Body, func(c ChatChunk) {
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
				pieces++
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	})
	if name != "get_weather" || pieces < 3 || finish != "tool_calls" {
		t.Errorf("stream: name %q, %d pieces, finish %q", name, pieces, finish)
	}
	validWeather(t, "chat tool call, streamed", args)
}

func TestStructuredAnthropic(t *testing.T) {
	_, hs := newTestServer(t, Config{})
	ask := map[string]any{"model": "stories260K", "max_tokens": 60, "temperature": 0,
		"messages":    []map[string]any{{"role": "user", "content": "What is the weather in Paris this week?"}},
		"tools":       []map[string]any{{"name": "get_weather", "description": "Weather forecast", "input_schema": weatherSchema}},
		"tool_choice": map[string]any{"type": "tool", "name": "get_weather"}}
	var got MessagesResponse
	decode(t, post(t, hs.URL+"/v1/messages", "", ask), &got)
	if len(got.Content) != 1 || got.Content[0].Type != "tool_use" || got.Content[0].Name != "get_weather" || got.Content[0].ID == "" ||
		got.StopReason == nil || *got.StopReason != "tool_use" {
		t.Fatalf("got %+v", got)
	}
	validWeather(t, "anthropic tool_use", string(got.Content[0].Input))

	ask["stream"] = true
	var partial, stop string
	for _, ev := range readAnthropicSSE(t, post(t, hs.URL+"/v1/messages", "", ask)) {
		switch ev.name {
		case "content_block_start":
			if b := ev.data["content_block"].(map[string]any); b["type"] != "tool_use" || b["name"] != "get_weather" {
				t.Errorf("block %v", b)
			}
		case "content_block_delta":
			d := ev.data["delta"].(map[string]any)
			if d["type"] != "input_json_delta" {
				t.Errorf("delta %v", d)
			}
			partial += d["partial_json"].(string)
		case "message_delta":
			stop, _ = ev.data["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	if stop != "tool_use" {
		t.Errorf("stop_reason %q", stop)
	}
	validWeather(t, "anthropic tool_use, streamed", partial)
}

func TestStructuredOllama(t *testing.T) {
	_, hs := newTestServer(t, Config{})
	for _, format := range []any{weatherSchema, "json"} {
		var got OllamaResponse
		decode(t, post(t, hs.URL+"/api/chat", "", map[string]any{"model": "stories260K", "stream": false, "format": format,
			"messages": []map[string]any{{"role": "user", "content": "What is the weather in Paris this week?"}},
			"options":  map[string]any{"temperature": 0, "num_predict": 60}}), &got)
		if got.Message == nil {
			t.Fatalf("got %+v", got)
		}
		if format == "json" {
			if !json.Valid([]byte(got.Message.Content)) {
				t.Errorf("format json: %q", got.Message.Content)
			}
			continue
		}
		validWeather(t, "ollama format", got.Message.Content)
	}
}

// A generator that cannot constrain sampling (a cluster) refuses
// structured output instead of answering with unchecked text.
func TestStructuredNeedsConstrainedGenerator(t *testing.T) {
	gen := &countingGen{}
	_, hs := newTestServer(t, Config{Generator: gen, Models: storiesLocal(t)})
	resp := post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "stories260K", "messages": []map[string]any{{"role": "user", "content": "x"}},
		"response_format": map[string]any{"type": "json_object"}})
	var e errorBody
	decode(t, resp, &e)
	if resp.StatusCode != 400 || gen.n.Load() != 0 || e.Error == nil || !strings.Contains(e.Error.Message, "constrained sampling") {
		t.Errorf("%s %+v", resp.Status, e.Error)
	}
}

// countBuilds makes v count the tries it builds, by tokenizer.
func countBuilds(v *vocabs, before func(grammar.Tokenizer)) func(grammar.Tokenizer) int {
	var mu sync.Mutex
	n := map[grammar.Tokenizer]int{}
	v.build = func(tok grammar.Tokenizer) *grammar.Vocab {
		mu.Lock()
		n[tok]++
		mu.Unlock()
		if before != nil {
			before(tok)
		}
		return grammar.VocabOf(tok)
	}
	return func(tok grammar.Tokenizer) int {
		mu.Lock()
		defer mu.Unlock()
		return n[tok]
	}
}

// TestVocabsBuildOnce: the first requests for a tokenizer build its trie
// once, together; while it builds, a request for another tokenizer
// builds and finds its own instead of waiting behind the lock.
func TestVocabsBuildOnce(t *testing.T) {
	a := storiesEngine(t).Tokenizer
	b := ggufTokenizer(t, testdata.Path(t, "gguf/stories260K.gguf")) // the same vocabulary, another tokenizer
	started, release := make(chan struct{}), make(chan struct{})
	var v vocabs
	builds := countBuilds(&v, func(tok grammar.Tokenizer) {
		if tok == grammar.Tokenizer(a) { // a's build holds on until released
			close(started)
			<-release
		}
	})
	const n = 4
	got := make(chan *grammar.Vocab, n)
	for range n {
		go func() { got <- v.of(a) }()
	}
	<-started
	// Not a timing test: a generous bound that fails instead of hanging
	// when b waits for a's build.
	for _, what := range []string{"building", "cached"} {
		done := make(chan *grammar.Vocab, 1)
		go func() { done <- v.of(b) }()
		select {
		case g := <-done:
			if g == nil {
				t.Fatalf("%s: no trie for b", what)
			}
		case <-time.After(30 * time.Second):
			close(release)
			t.Fatalf("%s: a request for another tokenizer waited for a trie's build", what)
		}
	}
	close(release)
	first := <-got
	for range n - 1 {
		if g := <-got; g != first || g == nil {
			t.Fatalf("the concurrent first requests got different tries (%p, %p)", first, g)
		}
	}
	if builds(a) != 1 || builds(b) != 1 {
		t.Errorf("built a's trie %d times and b's %d times, want once each", builds(a), builds(b))
	}
}

// TestStructuredConcurrentFirst: structured requests that arrive together
// on a fresh server (four run at once) all get valid documents, from one
// build of the trie.
func TestStructuredConcurrentFirst(t *testing.T) {
	s, hs := newTestServer(t, Config{MaxActive: 4})
	builds := countBuilds(&s.vocabs, nil)
	msgs := []map[string]any{{"role": "user", "content": "What is the weather in Paris this week?"}}
	bodies := []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", map[string]any{"model": "stories260K", "messages": msgs, "temperature": 0, "max_tokens": 60,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "weather", "schema": weatherSchema}}}},
		{"/v1/chat/completions", map[string]any{"model": "stories260K", "messages": msgs, "temperature": 1, "seed": 3, "max_tokens": 60,
			"tools": weatherTool, "tool_choice": "required"}},
		{"/api/chat", map[string]any{"model": "stories260K", "stream": false, "format": weatherSchema, "messages": msgs,
			"options": map[string]any{"temperature": 0, "num_predict": 60}}},
		{"/api/chat", map[string]any{"model": "stories260K", "stream": false, "format": weatherSchema, "messages": msgs,
			"options": map[string]any{"temperature": 1, "seed": 5, "num_predict": 60}}},
	}
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answers := make([]chan answer, len(bodies))
	for i, b := range bodies {
		answers[i] = make(chan answer, 1)
		js, _ := json.Marshal(b.body)
		go func() {
			resp, err := http.Post(hs.URL+b.path, "application/json", bytes.NewReader(js))
			if err != nil {
				answers[i] <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			answers[i] <- answer{resp.StatusCode, body, err}
		}()
	}
	for i, b := range bodies {
		a := <-answers[i]
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("request %d (%s): %d %v %s", i, b.path, a.status, a.err, a.body)
		}
		what := fmt.Sprintf("request %d (%s)", i, b.path)
		if b.path == "/api/chat" {
			var got OllamaResponse
			if err := json.Unmarshal(a.body, &got); err != nil || got.Message == nil {
				t.Fatalf("%s: %s", what, a.body)
			}
			validWeather(t, what, got.Message.Content)
			continue
		}
		var got ChatCompletion
		if err := json.Unmarshal(a.body, &got); err != nil || len(got.Choices) != 1 {
			t.Fatalf("%s: %s", what, a.body)
		}
		doc := got.Choices[0].Message.Content
		if calls := got.Choices[0].Message.ToolCalls; len(calls) == 1 {
			doc = calls[0].Function.Arguments
		}
		validWeather(t, what, doc)
	}
	if n := builds(storiesEngine(t).Tokenizer); n != 1 {
		t.Errorf("the trie was built %d times, want once", n)
	}
}

package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"strata/actors"
	"strata/actors/origin"
	"strata/actors/stage"
	"strata/internal/testdata"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/tensor"
)

// storiesCluster serves stories260K from a cluster of three in-process
// nodes, each with room for a third of it: every request runs on a ring
// of three stages.
func storiesCluster(t testing.TB) *origin.Origin {
	t.Helper()
	store := catalog.Files{"stories260K": testdata.Path(t, "gguf/stories260K.gguf")}
	system := actors.NewSystem(nil)
	pool := tensor.NewPool(2)
	t.Cleanup(func() {
		system.Shutdown()
		pool.Close()
	})
	var dir origin.StaticDirectory
	var first *stage.Host // the origin's node: it describes the model
	for i := range 3 {
		h := stage.NewHost(stage.HostConfig{Models: store, Pool: pool, MemoryBytes: 800e3, Name: fmt.Sprint("n", i)})
		pid, err := system.Root.SpawnNamed(h.Props(), fmt.Sprint(stage.HostName, "-", i))
		if err != nil {
			t.Fatal(err)
		}
		dir = append(dir, origin.Member{ID: fmt.Sprint("n", i), Host: pid, MemoryBytes: 800e3, Models: []string{"stories260K"}})
		if first == nil {
			first = h
		}
	}
	cl := origin.New(system, dir, first, origin.Options{PlanContext: 512})
	t.Cleanup(cl.Close)
	if p, _, err := cl.Plan("stories260K"); err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v, %v; want 3 stages", p, err)
	}
	return cl
}

// Structured output on a cluster: the forced tool's and response_format's
// schemas travel to the last of three stages; the documents parse,
// validate, and equal the one-node engine's for the same request.
func TestStructuredOnCluster(t *testing.T) {
	_, local := newTestServer(t, Config{})
	_, hs := newTestServer(t, Config{Generator: storiesCluster(t), Models: storiesLocal(t)})
	msgs := []map[string]any{{"role": "user", "content": "What is the weather in Paris this week?"}}
	for _, temp := range []float64{0, 1} {
		for _, body := range []map[string]any{
			{"tools": weatherTool, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}},
			{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "weather", "schema": weatherSchema}}},
		} {
			body["model"], body["messages"], body["temperature"], body["seed"], body["max_tokens"] = "stories260K", msgs, temp, 7, 60
			var got, want ChatCompletion
			decode(t, post(t, hs.URL+"/v1/chat/completions", "", body), &got)
			decode(t, post(t, local.URL+"/v1/chat/completions", "", body), &want)
			if len(got.Choices) != 1 {
				t.Fatalf("%+v", got)
			}
			doc, wantDoc := got.Choices[0].Message.Content, want.Choices[0].Message.Content
			if len(got.Choices[0].Message.ToolCalls) == 1 {
				doc, wantDoc = got.Choices[0].Message.ToolCalls[0].Function.Arguments, want.Choices[0].Message.ToolCalls[0].Function.Arguments
			} else if _, tool := body["tools"]; tool {
				t.Fatalf("no tool call: %+v", got)
			}
			validWeather(t, fmt.Sprintf("cluster, temperature %v", temp), doc)
			if doc != wantDoc {
				t.Errorf("cluster %q, one node %q", doc, wantDoc)
			}
		}
	}
	ask := map[string]any{"model": "stories260K", "max_tokens": 60, "temperature": 0, "messages": msgs,
		"tools":       []map[string]any{{"name": "get_weather", "description": "Weather forecast", "input_schema": weatherSchema}},
		"tool_choice": map[string]any{"type": "tool", "name": "get_weather"}}
	var got MessagesResponse
	decode(t, post(t, hs.URL+"/v1/messages", "", ask), &got)
	if len(got.Content) != 1 || got.Content[0].Type != "tool_use" {
		t.Fatalf("got %+v", got)
	}
	validWeather(t, "cluster, anthropic tool_use", string(got.Content[0].Input))
}

// conversation is a chat of a little over n tokens (on stories260K's
// template), ending with the user's question.
func conversation(n int) []map[string]any {
	lines := []string{"Lily and Tom went to the park.", "They saw a big dog with a red ball.", "The dog was sad because it lost its friend.",
		"Tom gave the dog a hug and Lily found a stick.", "They played until the sun went down and the sky was pink."}
	var msgs []map[string]any
	words := 0
	for i := 0; words < n; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		text := lines[i%len(lines)] + " " + lines[(i+2)%len(lines)]
		msgs = append(msgs, map[string]any{"role": role, "content": text})
		words += len(strings.Fields(text)) * 5 / 2 // about the tokens it takes, with the template's
	}
	return append(msgs, map[string]any{"role": "user", "content": "What happened next in the park that day?"})
}

// streamChat streams a chat request and returns the time to its first
// content chunk, the text and the usage chunk.
func streamChat(t *testing.T, url string, body map[string]any) (time.Duration, string, Usage) {
	t.Helper()
	body["stream"], body["stream_options"] = true, map[string]bool{"include_usage": true}
	start := time.Now()
	resp := post(t, url+"/v1/chat/completions", "", body)
	defer resp.Body.Close()
	var ttft time.Duration
	var text strings.Builder
	var usage Usage
	eachEvent(t, resp.Body, func(c ChatChunk) {
		if c.Usage != nil {
			usage = *c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" && ttft == 0 {
				ttft = time.Since(start)
			}
			text.WriteString(ch.Delta.Content)
		}
	})
	return ttft, text.String(), usage
}

// Issue 18's measurement, on a 3-stage cluster: a 400-token conversation,
// then the same conversation with the answer and one new line. The second
// request reports ≥ 390 cached tokens (OpenAI's prompt_tokens_details,
// Anthropic's cache_read_input_tokens) and answers what a cluster without
// the cache answers. Times to first token are logged, not asserted.
func TestPromptCacheUsage(t *testing.T) {
	cl := storiesCluster(t)
	_, hs := newTestServer(t, Config{Generator: cl, Models: storiesLocal(t)})
	_, ref := newTestServer(t, Config{}) // the one-node engine: no cache
	// A first request loads the shards: the times below are prefill's.
	streamChat(t, hs.URL, map[string]any{"model": "stories260K", "messages": []map[string]any{{"role": "user", "content": "Hi."}}, "max_tokens": 2})
	msgs := conversation(400)
	ttft1, answer, u1 := streamChat(t, hs.URL, map[string]any{"model": "stories260K", "messages": msgs, "temperature": 0, "max_tokens": 40})
	if u1.PromptTokens < 400 || u1.PromptTokens > 440 || u1.cached() != 0 {
		t.Fatalf("first request: %+v (want 400-440 prompt tokens, none cached)", u1)
	}
	more := append(append([]map[string]any(nil), msgs...), map[string]any{"role": "assistant", "content": answer}, map[string]any{"role": "user", "content": "And then?"})
	// 20 tokens: the answer stays within the cluster's context of 512 (the
	// engine's is larger).
	body := map[string]any{"model": "stories260K", "messages": more, "temperature": 0, "max_tokens": 20}
	ttft2, text2, u2 := streamChat(t, hs.URL, body)
	_, want, _ := streamChat(t, ref.URL, map[string]any{"model": "stories260K", "messages": more, "temperature": 0, "max_tokens": 20})
	t.Logf("first request: %d prompt tokens, first token after %v; second: %d prompt tokens, %d cached, first token after %v (%.1f× sooner)",
		u1.PromptTokens, ttft1, u2.PromptTokens, u2.cached(), ttft2, float64(ttft1)/float64(ttft2))
	if u2.cached() < 390 {
		t.Errorf("second request: %d cached tokens, want ≥ 390", u2.cached())
	}
	if text2 != want {
		t.Errorf("cached answer %q differs from the one-node answer %q", text2, want)
	}

	// Anthropic's usage: input_tokens are those not read from the cache.
	// The same first turn and answer, another line (the context of 512
	// leaves no room for a third turn).
	for _, stream := range []bool{false, true} {
		line := map[bool]string{false: "Why?", true: "Yes."}[stream]
		ask := map[string]any{"model": "stories260K", "max_tokens": 20, "temperature": 0, "stream": stream,
			"messages": append(more[:len(more)-1:len(more)-1], map[string]any{"role": "user", "content": line})}
		var usage AnthropicUsage
		if !stream {
			var got MessagesResponse
			decode(t, post(t, hs.URL+"/v1/messages", "", ask), &got)
			usage = got.Usage
		} else {
			for _, ev := range readAnthropicSSE(t, post(t, hs.URL+"/v1/messages", "", ask)) {
				if ev.name == "message_delta" {
					b, _ := json.Marshal(ev.data["usage"])
					json.Unmarshal(b, &usage)
				}
			}
		}
		t.Logf("anthropic (stream %v): %+v", stream, usage)
		if usage.CacheReadInputTokens < u1.PromptTokens || usage.InputTokens < 1 || usage.OutputTokens < 1 {
			t.Errorf("anthropic usage %+v (stream %v) after a conversation of %d tokens", usage, stream, u1.PromptTokens)
		}
	}
}

// On one node (Local, the engine) the next turn of a conversation is
// cached too, and usage says so.
func TestPromptCacheUsageLocal(t *testing.T) {
	e, err := engine.Open(testdata.Path(t, "gguf/stories260K.gguf"), engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := NewLocal(e, "")
	if err != nil {
		t.Fatal(err)
	}
	_, hs := newTestServer(t, Config{Generator: l, Models: l})
	msgs := conversation(200)
	_, answer, u1 := streamChat(t, hs.URL, map[string]any{"model": "stories260K", "messages": msgs, "temperature": 0, "max_tokens": 20})
	more := append(msgs, map[string]any{"role": "assistant", "content": answer}, map[string]any{"role": "user", "content": "And then?"})
	var got ChatCompletion
	decode(t, post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "stories260K", "messages": more, "temperature": 0, "max_tokens": 20}), &got)
	if got.Usage.cached() < u1.PromptTokens || got.Usage.PromptTokens <= got.Usage.cached() {
		t.Errorf("second turn: usage %+v, details %+v; the first had %d prompt tokens", got.Usage, got.Usage.PromptTokensDetails, u1.PromptTokens)
	}
}

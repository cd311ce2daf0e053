package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// readNDJSON reads an Ollama stream line by line.
func readNDJSON(t *testing.T, resp *http.Response) []OllamaResponse {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("status %s, content type %q", resp.Status, ct)
	}
	var out []OllamaResponse
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var v OllamaResponse
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, v)
	}
	return out
}

func TestOllamaAPI(t *testing.T) {
	_, hs := newTestServer(t, Config{})
	tok := storiesEngine(t).Tokenizer
	prompt := tok.Encode("Once upon a time", true, false)
	want := expected(t, prompt, 20, nil)
	greedy := map[string]any{"temperature": 0, "repeat_penalty": 1, "num_predict": 20}
	msgs := []map[string]any{{"role": "user", "content": "Once upon a time"}}

	t.Run("chat stream", func(t *testing.T) {
		lines := readNDJSON(t, post(t, hs.URL+"/api/chat", "", map[string]any{"model": "stories260K", "messages": msgs, "options": greedy}))
		var text string
		for _, l := range lines[:len(lines)-1] {
			if l.Done || l.Message == nil || l.Message.Role != "assistant" || l.Model != "stories260K" || l.CreatedAt == "" {
				t.Errorf("line %+v", l)
			}
			text += l.Message.Content
		}
		last := lines[len(lines)-1]
		if text != want.Text || len(lines) < 3 || !last.Done || last.DoneReason != "length" || last.EvalCount != 20 || last.PromptEvalCount != len(prompt) || last.TotalDuration <= 0 {
			t.Errorf("streamed %q in %d lines, last %+v; want %q", text, len(lines), last, want.Text)
		}
	})
	t.Run("chat plain, name:latest", func(t *testing.T) {
		var got OllamaResponse
		decode(t, post(t, hs.URL+"/api/chat", "", map[string]any{"model": "stories260K:latest", "messages": msgs, "options": greedy, "stream": false}), &got)
		if got.Message == nil || got.Message.Content != want.Text || !got.Done || got.Model != "stories260K:latest" {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("generate raw, then continue its context", func(t *testing.T) {
		var got OllamaResponse
		decode(t, post(t, hs.URL+"/api/generate", "", map[string]any{"model": "stories260K", "prompt": "Once upon a time", "raw": true, "options": greedy, "stream": false}), &got)
		if got.Response == nil || *got.Response != want.Text || len(got.Context) != len(prompt)+20 {
			t.Fatalf("got %+v", got)
		}
		longer := expected(t, prompt, 30, nil)
		var more OllamaResponse
		decode(t, post(t, hs.URL+"/api/generate", "", map[string]any{"model": "stories260K", "context": got.Context, "options": map[string]any{"temperature": 0, "repeat_penalty": 1, "num_predict": 10}, "stream": false}), &more)
		if more.Response == nil || tok.Decode(more.Context[len(prompt):]) != tok.Decode(longer.Tokens) {
			t.Errorf("continued %+v; want the 30-token answer %q", more, longer.Text)
		}
	})
	t.Run("tags, show, ps, version", func(t *testing.T) {
		var tags struct{ Models []OllamaModel }
		resp, _ := http.Get(hs.URL + "/api/tags")
		decode(t, resp, &tags)
		if len(tags.Models) != 1 || tags.Models[0].Name != "stories260K" || tags.Models[0].Details.Format != "gguf" || tags.Models[0].Size == 0 {
			t.Errorf("tags %+v", tags)
		}
		var show map[string]any
		decode(t, post(t, hs.URL+"/api/show", "", map[string]any{"model": "stories260K"}), &show)
		if mi, _ := show["model_info"].(map[string]any); mi["general.architecture"] != "llama" || mi["llama.block_count"] != 5.0 {
			t.Errorf("show %v", show)
		}
		var ps struct{ Models []OllamaModel }
		resp, _ = http.Get(hs.URL + "/api/ps")
		decode(t, resp, &ps)
		if len(ps.Models) != 1 || ps.Models[0].Name != "stories260K" {
			t.Errorf("ps %+v", ps)
		}
		var v struct{ Version string }
		resp, _ = http.Get(hs.URL + "/api/version")
		decode(t, resp, &v)
		if v.Version == "" {
			t.Errorf("version %+v", v)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			path   string
			body   any
			status int
		}{
			{"/api/chat", map[string]any{"model": "llama9", "messages": msgs}, 404},
			{"/api/show", map[string]any{"model": "llama9"}, 404},
			{"/api/chat", map[string]any{"model": "stories260K", "messages": []map[string]any{{"role": "wizard", "content": "x"}}}, 400},
			{"/api/generate", map[string]any{"model": "stories260K", "prompt": "x", "options": map[string]any{"temperature": -1}}, 400},
			{"/api/generate", `{"model": `, 400},
		} {
			resp := post(t, hs.URL+c.path, "", c.body)
			var e struct{ Error string }
			decode(t, resp, &e)
			if resp.StatusCode != c.status || e.Error == "" {
				t.Errorf("%s %v: %s %+v", c.path, c.body, resp.Status, e)
			}
		}
	})
}

// ollamaClientScript drives the official ollama npm client against
// OLLAMA_URL: the model list, a streamed chat, a streamed generate, and
// the error an application sees for an unknown model.
const ollamaClientScript = `
const { Ollama } = require("ollama");
const client = new Ollama({ host: process.env.OLLAMA_URL });
const options = { temperature: 0, repeat_penalty: 1, num_predict: 24 };
(async () => {
  const out = { text: "", parts: 0 };
  out.models = (await client.list()).models.map((m) => m.name);
  const stream = await client.chat({ model: "stories260K", messages: [{ role: "user", content: "Once upon a time" }], stream: true, options });
  for await (const part of stream) {
    out.text += part.message.content;
    if (part.message.content) out.parts++;
    if (part.done) { out.doneReason = part.done_reason; out.evalCount = part.eval_count; }
  }
  const gen = await client.generate({ model: "stories260K", prompt: "Once upon a time", raw: true, options });
  out.generated = gen.response;
  out.version = (await client.version()).version;
  out.showArch = (await client.show({ model: "stories260K" })).model_info["general.architecture"];
  try { await client.chat({ model: "llama9", messages: [{ role: "user", content: "x" }] }); } catch (e) { out.unknown = [e.status_code, e.name, e.error]; }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestOllamaNodeClient: the official ollama npm client lists the models
// and streams a chat.
func TestOllamaNodeClient(t *testing.T) {
	_, hs := newTestServer(t, Config{})
	tok := storiesEngine(t).Tokenizer
	want := expected(t, tok.Encode("Once upon a time", true, false), 24, nil).Text
	out := runNodeScript(t, ollamaClientScript, "OLLAMA_URL="+hs.URL)
	var got struct {
		Text, DoneReason, Generated, Version, ShowArch string
		Parts, EvalCount                               int
		Models                                         []string
		Unknown                                        []any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Text != want || got.Parts < 2 || got.DoneReason != "length" || got.EvalCount != 24 || got.Generated != want {
		t.Errorf("chat %q in %d parts (%s, %d), generate %q; want %q", got.Text, got.Parts, got.DoneReason, got.EvalCount, got.Generated, want)
	}
	if len(got.Models) != 1 || got.Models[0] != "stories260K" || got.Version == "" || got.ShowArch != "llama" {
		t.Errorf("models %v, version %q, show %q", got.Models, got.Version, got.ShowArch)
	}
	if len(got.Unknown) != 3 || got.Unknown[0] != 404.0 || !strings.Contains(got.Unknown[2].(string), "llama9") {
		t.Errorf("unknown model: %v", got.Unknown)
	}
}

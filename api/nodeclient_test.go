package api

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// openAIClientScript drives the official OpenAI Node client against
// BASE_URL: a streamed chat completion, a plain one, the model list, and
// the errors an application sees for an unknown model and a wrong key.
const openAIClientScript = `
const OpenAI = require("openai");
const base = process.env.BASE_URL + "/v1";
const client = new OpenAI({ baseURL: base, apiKey: process.env.KEY, maxRetries: 0, timeout: 60000 });
const ask = { model: "stories260K", messages: [{ role: "user", content: "Once upon a time" }], temperature: 0, max_tokens: 24 };
(async () => {
  const out = { text: "", chunks: 0 };
  const stream = await client.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of stream) {
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta && c.delta.content) { out.text += c.delta.content; out.chunks++; }
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  const plain = await client.chat.completions.create(ask);
  out.plain = plain.choices[0].message.content;
  out.plainFinish = plain.choices[0].finish_reason;
  const cmpl = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", temperature: 0, max_tokens: 24 });
  out.completion = cmpl.choices[0].text;
  out.models = [];
  for await (const m of client.models.list()) out.models.push(m.id);
  try { await client.chat.completions.create({ ...ask, model: "gpt-9" }); } catch (e) { out.unknownModel = [e.status, e.constructor.name, e.code]; }
  const wrong = new OpenAI({ baseURL: base, apiKey: "wrong", maxRetries: 0 });
  try { await wrong.models.list(); } catch (e) { out.wrongKey = [e.status, e.constructor.name]; }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// nodeModules is where make deps installs the openai package
// (npm install --prefix .ci/npm); STRATA_NODE_MODULES overrides it. A
// missing node or package fails the test: it is a broken setup.
func nodeModules(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STRATA_NODE_MODULES")
	if dir == "" {
		abs, err := filepath.Abs(filepath.Join("..", ".ci", "npm", "node_modules"))
		if err != nil {
			t.Fatal(err)
		}
		dir = abs
	}
	if _, err := os.Stat(filepath.Join(dir, "openai", "package.json")); err != nil {
		t.Fatalf("the openai npm package is not installed in %s (make deps installs it): %v", dir, err)
	}
	return dir
}

// runNodeScript runs a Node script with the npm packages of .ci/npm and
// returns what it printed.
func runNodeScript(t *testing.T, script string, env ...string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (Node.js 20 or later is needed for the client tests)")
	}
	modules := nodeModules(t)
	path := filepath.Join(t.TempDir(), "client.cjs")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, path)
	cmd.Env = append(append(os.Environ(), "NODE_PATH="+modules, "ANTHROPIC_API_KEY=", "ANTHROPIC_BASE_URL=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=", "OLLAMA_HOST="), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s\n%s", err, out, stderr)
	}
	return out
}

// TestOpenAINodeClient: the official OpenAI Node client streams a chat
// completion from a single-node server (the 3-node version of this test
// runs against a cluster).
func TestOpenAINodeClient(t *testing.T) {
	_, hs := newTestServer(t, Config{APIKey: "node-key"})
	tok := storiesEngine(t).Tokenizer
	want := expected(t, tok.Encode("Once upon a time", true, false), 24, nil).Text
	out := runNodeScript(t, openAIClientScript, "BASE_URL="+hs.URL, "KEY=node-key")
	var got struct {
		Text, Finish, Plain, PlainFinish, Completion string
		Chunks                                       int
		Usage                                        Usage
		Models                                       []string
		UnknownModel                                 []any
		WrongKey                                     []any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Text != want || got.Chunks < 2 || got.Finish != "length" || got.Usage.CompletionTokens != 24 {
		t.Errorf("streamed: %q in %d chunks, finish %q, usage %+v; want %q", got.Text, got.Chunks, got.Finish, got.Usage, want)
	}
	if got.Plain != want || got.PlainFinish != "length" || got.Completion != want {
		t.Errorf("plain: %q (%s), completion %q", got.Plain, got.PlainFinish, got.Completion)
	}
	if len(got.Models) != 1 || got.Models[0] != "stories260K" {
		t.Errorf("models: %v", got.Models)
	}
	if len(got.UnknownModel) != 3 || got.UnknownModel[0] != 404.0 || got.UnknownModel[1] != "NotFoundError" || got.UnknownModel[2] != "model_not_found" {
		t.Errorf("unknown model: %v", got.UnknownModel)
	}
	if len(got.WrongKey) != 2 || got.WrongKey[0] != 401.0 || got.WrongKey[1] != "AuthenticationError" {
		t.Errorf("wrong key: %v", got.WrongKey)
	}
}

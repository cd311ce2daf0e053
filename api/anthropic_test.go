package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// anthropicEvent is one named server-sent event of a Messages stream.
type anthropicEvent struct {
	name string
	data map[string]any
}

func readAnthropicSSE(t *testing.T, resp *http.Response) []anthropicEvent {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("status %s, content type %q", resp.Status, ct)
	}
	var evs []anthropicEvent
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
			if d["type"] != name {
				t.Errorf("event %q carries type %v", name, d["type"])
			}
			evs = append(evs, anthropicEvent{name, d})
			name = ""
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	return evs
}

func postHeaders(t *testing.T, url string, header map[string]string, body any) *http.Response {
	t.Helper()
	js, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(js)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestAnthropicMessages(t *testing.T) {
	_, hs := newTestServer(t, Config{APIKey: "k"})
	tok := storiesEngine(t).Tokenizer
	want := expected(t, tok.Encode("Once upon a time", true, false), 20, nil).Text
	key := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	ask := map[string]any{"model": "stories260K", "max_tokens": 20, "temperature": 0,
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "Once upon a time"}}}}}

	t.Run("plain", func(t *testing.T) {
		var got MessagesResponse
		decode(t, postHeaders(t, hs.URL+"/v1/messages", key, ask), &got)
		if got.Type != "message" || got.Role != "assistant" || len(got.Content) != 1 || got.Content[0].Text != want ||
			got.StopReason == nil || *got.StopReason != "max_tokens" || got.Usage.OutputTokens != 20 || got.Usage.InputTokens == 0 {
			t.Errorf("got %+v; want text %q", got, want)
		}
	})
	t.Run("stream", func(t *testing.T) {
		s := map[string]any{"stream": true}
		for k, v := range ask {
			s[k] = v
		}
		evs := readAnthropicSSE(t, postHeaders(t, hs.URL+"/v1/messages", map[string]string{"Authorization": "Bearer k"}, s))
		var names []string
		var text string
		for _, ev := range evs {
			if len(names) == 0 || names[len(names)-1] != ev.name {
				names = append(names, ev.name)
			}
			if ev.name == "content_block_delta" {
				text += ev.data["delta"].(map[string]any)["text"].(string)
			}
		}
		if strings.Join(names, " ") != "message_start content_block_start ping content_block_delta content_block_stop message_delta message_stop" {
			t.Errorf("events %v", names)
		}
		if text != want {
			t.Errorf("streamed %q, want %q", text, want)
		}
		md := evs[len(evs)-2].data
		if md["delta"].(map[string]any)["stop_reason"] != "max_tokens" || md["usage"].(map[string]any)["output_tokens"] != 20.0 {
			t.Errorf("message_delta %v", md)
		}
	})
	t.Run("stop sequence", func(t *testing.T) {
		words := strings.Fields(want)
		stop := " " + words[3]
		s := map[string]any{"stop_sequences": []string{"zzz", stop}}
		for k, v := range ask {
			s[k] = v
		}
		var got MessagesResponse
		decode(t, postHeaders(t, hs.URL+"/v1/messages", key, s), &got)
		if got.StopReason == nil || *got.StopReason != "stop_sequence" || got.StopSequence == nil || *got.StopSequence != stop ||
			!strings.HasPrefix(want, got.Content[0].Text) || strings.Contains(got.Content[0].Text, stop) {
			t.Errorf("got %+v (stop %q)", got, stop)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			header map[string]string
			body   map[string]any
			status int
			typ    string
		}{
			{"no max_tokens", key, map[string]any{"model": "stories260K", "messages": ask["messages"]}, 400, "invalid_request_error"},
			{"unknown model", key, map[string]any{"model": "claude-9", "max_tokens": 5, "messages": ask["messages"]}, 404, "not_found_error"},
			{"wrong key", map[string]string{"x-api-key": "nope"}, ask, 401, "authentication_error"},
			{"no key", nil, ask, 401, "authentication_error"},
			{"image", key, map[string]any{"model": "stories260K", "max_tokens": 5, "messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "image"}}}}}, 400, "invalid_request_error"},
		} {
			resp := postHeaders(t, hs.URL+"/v1/messages", c.header, c.body)
			var e anthropicError
			decode(t, resp, &e)
			if resp.StatusCode != c.status || e.Type != "error" || e.Error.Type != c.typ || e.Error.Message == "" {
				t.Errorf("%s: %d %+v", c.name, resp.StatusCode, e)
			}
		}
	})
}

// anthropicClientScript drives the official Anthropic TypeScript SDK
// against BASE_URL: a streamed message, a plain one with a system prompt,
// the model list, and the errors an application sees.
const anthropicClientScript = `
const Anthropic = require("@anthropic-ai/sdk");
const client = new Anthropic({ baseURL: process.env.BASE_URL, apiKey: process.env.KEY, maxRetries: 0, timeout: 60000 });
const ask = { model: "stories260K", max_tokens: 24, temperature: 0, messages: [{ role: "user", content: "Once upon a time" }] };
(async () => {
  const out = { text: "", deltas: 0, events: [] };
  const stream = await client.messages.create({ ...ask, stream: true });
  for await (const ev of stream) {
    if (out.events[out.events.length - 1] !== ev.type) out.events.push(ev.type);
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") { out.text += ev.delta.text; out.deltas++; }
    if (ev.type === "message_delta") { out.stop = ev.delta.stop_reason; out.outputTokens = ev.usage.output_tokens; }
  }
  const helper = client.messages.stream(ask);
  out.final = await helper.finalMessage();
  const plain = await client.messages.create({ ...ask, system: "You tell stories." });
  out.plainStop = plain.stop_reason;
  out.models = [];
  for await (const m of client.models.list()) out.models.push([m.id, m.type]);
  try { await client.messages.create({ ...ask, model: "claude-9" }); } catch (e) { out.unknownModel = [e.status, e.constructor.name, e.error && e.error.error && e.error.error.type]; }
  const wrong = new Anthropic({ baseURL: process.env.BASE_URL, apiKey: "wrong", maxRetries: 0 });
  try { await wrong.messages.create(ask); } catch (e) { out.wrongKey = [e.status, e.constructor.name]; }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestAnthropicNodeClient: the official Anthropic SDK streams a message
// from a single-node server (the 3-node version runs in cmd/strata).
func TestAnthropicNodeClient(t *testing.T) {
	_, hs := newTestServer(t, Config{APIKey: "node-key"})
	tok := storiesEngine(t).Tokenizer
	want := expected(t, tok.Encode("Once upon a time", true, false), 24, nil).Text
	out := runNodeScript(t, anthropicClientScript, "BASE_URL="+hs.URL, "KEY=node-key")
	var got struct {
		Text, Stop, PlainStop string
		Deltas, OutputTokens  int
		Events                []string
		Final                 MessagesResponse
		Models                [][]string
		UnknownModel          []any
		WrongKey              []any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Text != want || got.Deltas < 2 || got.Stop != "max_tokens" || got.OutputTokens != 24 {
		t.Errorf("streamed %q in %d deltas (%s, %d tokens); want %q", got.Text, got.Deltas, got.Stop, got.OutputTokens, want)
	}
	if strings.Join(got.Events, " ") != "message_start content_block_start content_block_delta content_block_stop message_delta message_stop" {
		t.Errorf("events %v", got.Events)
	}
	if len(got.Final.Content) != 1 || got.Final.Content[0].Text != want || got.PlainStop != "max_tokens" {
		t.Errorf("final message %+v, plain stop %q", got.Final, got.PlainStop)
	}
	if len(got.Models) != 1 || got.Models[0][0] != "stories260K" || got.Models[0][1] != "model" {
		t.Errorf("models: %v", got.Models)
	}
	if len(got.UnknownModel) != 3 || got.UnknownModel[0] != 404.0 || got.UnknownModel[1] != "NotFoundError" || got.UnknownModel[2] != "not_found_error" {
		t.Errorf("unknown model: %v", got.UnknownModel)
	}
	if len(got.WrongKey) != 2 || got.WrongKey[0] != 401.0 || got.WrongKey[1] != "AuthenticationError" {
		t.Errorf("wrong key: %v", got.WrongKey)
	}
}

package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestResponses(t *testing.T) {
	_, hs := newTestServer(t, Config{})
	tok := storiesEngine(t).Tokenizer
	want := expected(t, tok.Encode("Once upon a time", true, false), 20, nil).Text
	var got ResponseObject
	decode(t, post(t, hs.URL+"/v1/responses", "", map[string]any{"model": "stories260K", "input": "Once upon a time", "temperature": 0, "max_output_tokens": 20}), &got)
	if got.Object != "response" || got.Status != "incomplete" || got.IncompleteDetails == nil || len(got.Output) != 1 ||
		got.Output[0].Content[0].Text != want || got.Usage == nil || got.Usage.OutputTokens != 20 {
		t.Errorf("got %+v; want %q", got, want)
	}
	for _, c := range []struct {
		body  map[string]any
		param string
	}{
		{map[string]any{"model": "stories260K", "input": "x", "previous_response_id": "resp_1"}, "previous_response_id"},
		{map[string]any{"model": "stories260K", "input": []map[string]any{{"type": "image_generation_call"}}}, "input[0].type"},
		{map[string]any{"model": "stories260K", "input": []map[string]any{{"type": "function_call_output", "output": "x"}}}, "input[0].call_id"},
		{map[string]any{"model": "stories260K", "input": "x", "max_output_tokens": 0}, "max_output_tokens"},
	} {
		resp := post(t, hs.URL+"/v1/responses", "", c.body)
		var e errorBody
		decode(t, resp, &e)
		if resp.StatusCode != 400 || e.Error == nil || e.Error.Param == nil || *e.Error.Param != c.param {
			t.Errorf("%v: %s %+v", c.body, resp.Status, e.Error)
		}
	}
}

// responsesClientScript uses /v1/responses through the official openai
// client: a stream of events, then a plain response with instructions.
const responsesClientScript = `
const OpenAI = require("openai");
const client = new OpenAI({ baseURL: process.env.BASE_URL + "/v1", apiKey: "k", maxRetries: 0, timeout: 60000 });
(async () => {
  const out = { text: "", deltas: 0, events: [] };
  const stream = await client.responses.create({ model: "stories260K", input: "Once upon a time", temperature: 0, max_output_tokens: 24, stream: true });
  for await (const ev of stream) {
    if (out.events[out.events.length - 1] !== ev.type) out.events.push(ev.type);
    if (ev.type === "response.output_text.delta") { out.text += ev.delta; out.deltas++; }
    if (ev.type === "response.incomplete" || ev.type === "response.completed") out.final = ev.response.output_text !== undefined ? ev.response.output_text : ev.response.output[0].content[0].text;
  }
  const plain = await client.responses.create({ model: "stories260K", instructions: "Tell a story.",
    input: [{ role: "user", content: [{ type: "input_text", text: "Once upon a time" }] }], temperature: 0, max_output_tokens: 24 });
  out.plain = plain.output_text;
  out.status = plain.status;
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

func TestResponsesNodeClient(t *testing.T) {
	_, hs := newTestServer(t, Config{APIKey: "k"})
	tok := storiesEngine(t).Tokenizer
	want := expected(t, tok.Encode("Once upon a time", true, false), 24, nil).Text
	out := runNodeScript(t, responsesClientScript, "BASE_URL="+hs.URL)
	var got struct {
		Text, Final, Plain, Status string
		Deltas                     int
		Events                     []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	wantEvents := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.incomplete"
	if got.Text != want || got.Final != want || got.Deltas < 2 || strings.Join(got.Events, " ") != wantEvents {
		t.Errorf("streamed %q (final %q) in %d deltas, events %v; want %q", got.Text, got.Final, got.Deltas, got.Events, want)
	}
	if got.Status != "incomplete" || got.Plain == "" {
		t.Errorf("plain %q (%s)", got.Plain, got.Status)
	}
}

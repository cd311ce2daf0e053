package api

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/chattemplate"
	"strata/runtime/engine"
	"strata/runtime/gguf"
	"strata/runtime/tokenizer"
	"strata/runtime/toolcall"
)

// scriptGen is a generator that answers every request with the same text,
// a few characters a token, as a model of some family would write it; it
// keeps the prompt it was given.
type scriptGen struct {
	out    string
	mu     sync.Mutex
	prompt []int
}

func (g *scriptGen) Generate(ctx context.Context, req engine.Request, on func(engine.Token) error) (engine.Result, error) {
	g.mu.Lock()
	g.prompt = append([]int(nil), req.Tokens...)
	g.mu.Unlock()
	rs := []rune(g.out)
	var ids []int
	for i := 0; i < len(rs); i += 3 {
		ids = append(ids, 5) // a byte token of stories260K: not an end of generation
		if err := on(engine.Token{ID: 5, Index: len(ids) - 1, Text: string(rs[i:min(i+3, len(rs))])}); err != nil {
			return engine.Result{}, err
		}
	}
	return engine.Result{PromptTokens: len(req.Tokens), Tokens: ids, FinishReason: engine.FinishStop}, nil
}

func (g *scriptGen) promptText(tok *tokenizer.Tokenizer) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return tok.Decode(g.prompt)
}

// templateModels serves one model, "m", with a tokenizer that renders tmpl.
type templateModels struct{ tok *tokenizer.Tokenizer }

func (m templateModels) List() []ModelInfo {
	return []ModelInfo{{ID: "m", Object: "model", ContextLength: 8192, ChatTemplate: true}}
}

func (m templateModels) Lookup(name string) (ModelInfo, *tokenizer.Tokenizer, error) {
	if name != "m" {
		return ModelInfo{}, nil, fmt.Errorf("%w: %s", ErrModelNotFound, name)
	}
	return m.List()[0], m.tok, nil
}

// toolServer serves model "m" with a family's chat template, answering
// with out.
func toolServer(t *testing.T, template, out string) (*scriptGen, *tokenizer.Tokenizer, string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "templates", template+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tok := templateTokenizer(t, string(src))
	gen := &scriptGen{out: out}
	_, hs := newTestServer(t, Config{Generator: gen, Models: templateModels{tok}})
	return gen, tok, hs.URL
}

// The answers of each family: some text, then a call of get_weather.
const (
	qwenCall     = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"
	deepseekCall = "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", \"days\": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	kimiCall     = "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 3}<|tool_call_end|><|tool_calls_section_end|>"
	wantArgs     = `{"city": "Paris", "days": 3}`
)

var askWeather = []map[string]any{{"role": "user", "content": "Weather in Paris for 3 days?"}}

// TestToolsOpenAIChat: each family's call comes back as OpenAI tool_calls
// (finish_reason tool_calls), the text before it as content, the tools
// in the prompt; streamed, the text arrives as content deltas and the
// call as one tool_calls delta.
func TestToolsOpenAIChat(t *testing.T) {
	// tools: how the prompt shows them (the test's client sends JSON
	// objects with their keys sorted; the templates keep that order).
	for _, fam := range []struct{ template, out, text, id, tools string }{
		{"qwen3", qwenCall, "Let me check.\n", "call_", "<tools>\n{\"function\": {\"description\": \"Weather forecast\", \"name\": \"get_weather\""},
		{"deepseek-v3.1", deepseekCall, "Let me check.", "call_", "The functions are described here as JSON:\n{\"function\":{\"description\":\"Weather forecast\",\"name\":\"get_weather\""},
		{"kimi-k2-thinking", kimiCall, "Let me check.", "functions.get_weather:0", "<|im_system|>tool_declare<|im_middle|>[{\"function\": {\"description\": \"Weather forecast\", \"name\": \"get_weather\""},
	} {
		t.Run(fam.template, func(t *testing.T) {
			gen, tok, url := toolServer(t, fam.template, fam.out)
			ask := map[string]any{"model": "m", "messages": askWeather, "tools": weatherTool}
			var got ChatCompletion
			decode(t, post(t, url+"/v1/chat/completions", "", ask), &got)
			if len(got.Choices) != 1 {
				t.Fatalf("%+v", got)
			}
			c := got.Choices[0]
			if c.FinishReason != "tool_calls" || c.Message.Content != fam.text || len(c.Message.ToolCalls) != 1 {
				t.Fatalf("finish %q, content %q, calls %+v", c.FinishReason, c.Message.Content, c.Message.ToolCalls)
			}
			call := c.Message.ToolCalls[0]
			if call.Type != "function" || call.Function.Name != "get_weather" || call.Function.Arguments != wantArgs || !strings.HasPrefix(call.ID, fam.id) {
				t.Errorf("call %+v", call)
			}
			if p := gen.promptText(tok); !strings.Contains(p, fam.tools) {
				t.Errorf("the tools are not in the prompt:\n%s", p)
			}

			ask["stream"] = true
			resp := post(t, url+"/v1/chat/completions", "", ask)
			defer resp.Body.Close()
			var text, finish string
			var calls []ToolCall
			eachEvent(t, resp.Body, func(ch ChatChunk) {
				for _, cc := range ch.Choices {
					if len(calls) > 0 && cc.Delta.Content != "" {
						t.Errorf("text %q after the call", cc.Delta.Content)
					}
					text += cc.Delta.Content
					calls = append(calls, cc.Delta.ToolCalls...)
					if cc.FinishReason != nil {
						finish = *cc.FinishReason
					}
				}
			})
			if text != fam.text || finish != "tool_calls" || len(calls) != 1 || calls[0].Index == nil || *calls[0].Index != 0 ||
				calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != wantArgs || !strings.HasPrefix(calls[0].ID, fam.id) {
				t.Errorf("stream: text %q, finish %q, calls %+v", text, finish, calls)
			}
		})
	}
}

// TestToolsText: with tools, a model may answer in text (finish stop); a
// call that does not parse is text too, and so is everything with
// tool_choice none, whose prompt has no tools.
func TestToolsText(t *testing.T) {
	for _, c := range []struct {
		name, out, choice, finish string
	}{
		{"plain answer", "It is sunny in Paris.", "auto", "stop"},
		{"malformed call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>", "auto", "stop"},
		{"cut short", "<tool_call>\n{\"name\": \"get_wea", "auto", "stop"},
		{"tool_choice none", qwenCall, "none", "stop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			gen, tok, url := toolServer(t, "qwen3", c.out)
			var got ChatCompletion
			decode(t, post(t, url+"/v1/chat/completions", "", map[string]any{"model": "m", "messages": askWeather, "tools": weatherTool, "tool_choice": c.choice}), &got)
			if len(got.Choices) != 1 || got.Choices[0].Message.Content != c.out || len(got.Choices[0].Message.ToolCalls) != 0 || got.Choices[0].FinishReason != c.finish {
				t.Errorf("got %+v", got)
			}
			if has := strings.Contains(gen.promptText(tok), "# Tools"); has != (c.choice != "none") {
				t.Errorf("tools in the prompt: %v, with tool_choice %s", has, c.choice)
			}
			st := readSSE(t, post(t, url+"/v1/chat/completions", "", map[string]any{"model": "m", "messages": askWeather, "tools": weatherTool, "tool_choice": c.choice, "stream": true}))
			if st.text != c.out || st.finish != c.finish || !st.done {
				t.Errorf("streamed %q (%s)", st.text, st.finish)
			}
		})
	}
}

// TestToolsAnthropic: a call is a tool_use block after the text block
// (stop_reason tool_use); streamed, the text block closes before the
// tool_use block opens, and its input comes as input_json_delta.
func TestToolsAnthropic(t *testing.T) {
	_, _, url := toolServer(t, "qwen3", qwenCall)
	ask := map[string]any{"model": "m", "max_tokens": 100, "messages": askWeather,
		"tools": []map[string]any{{"name": "get_weather", "description": "Weather forecast", "input_schema": weatherSchema}}}
	var got MessagesResponse
	decode(t, post(t, url+"/v1/messages", "", ask), &got)
	if got.StopReason == nil || *got.StopReason != "tool_use" || len(got.Content) != 2 || got.Content[0].Type != "text" || got.Content[0].Text != "Let me check.\n" ||
		got.Content[1].Type != "tool_use" || got.Content[1].Name != "get_weather" || !strings.HasPrefix(got.Content[1].ID, "toolu_") || !sameJSON(got.Content[1].Input, wantArgs) {
		t.Fatalf("got %+v", got)
	}

	ask["stream"] = true
	var seq []string
	var text, input, stop string
	for _, ev := range readAnthropicSSE(t, post(t, url+"/v1/messages", "", ask)) {
		switch ev.name {
		case "content_block_start":
			b := ev.data["content_block"].(map[string]any)
			seq = append(seq, fmt.Sprintf("start %v %v", ev.data["index"], b["type"]))
			if b["type"] == "tool_use" && (b["name"] != "get_weather" || !strings.HasPrefix(b["id"].(string), "toolu_")) {
				t.Errorf("block %v", b)
			}
		case "content_block_delta":
			d := ev.data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				text += d["text"].(string)
			case "input_json_delta":
				input += d["partial_json"].(string)
			}
		case "content_block_stop":
			seq = append(seq, fmt.Sprintf("stop %v", ev.data["index"]))
		case "message_delta":
			stop, _ = ev.data["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	if want := "start 0 text,stop 0,start 1 tool_use,stop 1"; strings.Join(seq, ",") != want || text != "Let me check.\n" || !sameJSON(json.RawMessage(input), wantArgs) || stop != "tool_use" {
		t.Errorf("stream: blocks %v, text %q, input %q, stop %q", seq, text, input, stop)
	}
}

// TestToolsOllama: a call is message.tool_calls with arguments as an
// object, in the final answer or, streamed, in a line of its own.
func TestToolsOllama(t *testing.T) {
	_, _, url := toolServer(t, "kimi-k2-thinking", kimiCall)
	ask := map[string]any{"model": "m", "messages": askWeather, "tools": weatherTool, "stream": false}
	var got OllamaResponse
	decode(t, post(t, url+"/api/chat", "", ask), &got)
	if got.Message == nil || got.Message.Content != "Let me check." || len(got.Message.ToolCalls) != 1 || !got.Done {
		t.Fatalf("got %+v", got)
	}
	if f := got.Message.ToolCalls[0].Function; f.Name != "get_weather" || !sameJSON(f.Arguments, wantArgs) {
		t.Errorf("call %+v", f)
	}
	var show struct {
		Capabilities []string `json:"capabilities"`
	}
	decode(t, post(t, url+"/api/show", "", map[string]any{"model": "m"}), &show)
	if strings.Join(show.Capabilities, ",") != "completion,tools" {
		t.Errorf("capabilities %v", show.Capabilities)
	}
	ask["stream"] = true
	var text string
	var calls []OllamaToolCall
	lines := readNDJSON(t, post(t, url+"/api/chat", "", ask))
	for _, l := range lines {
		text += l.Message.Content
		calls = append(calls, l.Message.ToolCalls...)
	}
	if text != "Let me check." || len(calls) != 1 || calls[0].Function.Name != "get_weather" || !sameJSON(calls[0].Function.Arguments, wantArgs) || !lines[len(lines)-1].Done {
		t.Errorf("stream: %q, %+v", text, calls)
	}
}

// TestToolsResponses: a call is a function_call item after the message;
// streamed, it is added, its arguments delta'd and done, as the
// Responses API streams calls.
func TestToolsResponses(t *testing.T) {
	_, _, url := toolServer(t, "deepseek-v3.1", deepseekCall)
	tools := []map[string]any{{"type": "function", "name": "get_weather", "description": "Weather forecast", "parameters": weatherSchema}}
	ask := map[string]any{"model": "m", "input": "Weather in Paris for 3 days?", "tools": tools}
	var got ResponseObject
	decode(t, post(t, url+"/v1/responses", "", ask), &got)
	if got.Status != "completed" || len(got.Output) != 2 || got.Output[0].Type != "message" || got.Output[0].Content[0].Text != "Let me check." {
		t.Fatalf("got %+v", got)
	}
	if fc := got.Output[1]; fc.Type != "function_call" || fc.Name != "get_weather" || fc.Arguments == nil || *fc.Arguments != wantArgs || !strings.HasPrefix(fc.CallID, "call_") {
		t.Errorf("call %+v", fc)
	}

	ask["stream"] = true
	resp := post(t, url+"/v1/responses", "", ask)
	defer resp.Body.Close()
	var names []string
	var args string
	var final ResponseObject
	type event struct {
		Type        string          `json:"type"`
		OutputIndex int             `json:"output_index"`
		Delta       string          `json:"delta"`
		Item        *ResponseItem   `json:"item"`
		Response    *ResponseObject `json:"response"`
	}
	eachEvent(t, resp.Body, func(ev event) {
		name := ev.Type
		if ev.Item != nil {
			name += ":" + ev.Item.Type
		}
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
		if ev.Type == "response.function_call_arguments.delta" {
			args += ev.Delta
			if ev.OutputIndex != 1 {
				t.Errorf("arguments of output %d", ev.OutputIndex)
			}
		}
		if ev.Type == "response.completed" {
			final = *ev.Response
		}
	})
	want := "response.created,response.in_progress,response.output_item.added:message,response.content_part.added,response.output_text.delta," +
		"response.output_text.done,response.content_part.done,response.output_item.done:message," +
		"response.output_item.added:function_call,response.function_call_arguments.delta,response.function_call_arguments.done,response.output_item.done:function_call,response.completed"
	if strings.Join(names, ",") != want || args != wantArgs || len(final.Output) != 2 || final.Output[1].Name != "get_weather" {
		t.Errorf("events %v\nargs %q, final %+v", names, args, final.Output)
	}
}

// sameJSON says whether raw holds the same JSON value as want (an object
// written into a response is compacted).
func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && reflect.DeepEqual(a, b)
}

// tokenGen answers with given tokens, as an engine delivers them.
type tokenGen struct{ toks []engine.Token }

func (g tokenGen) Generate(ctx context.Context, req engine.Request, on func(engine.Token) error) (engine.Result, error) {
	var ids []int
	for i, tk := range g.toks {
		tk.Index = i
		ids = append(ids, tk.ID)
		if err := on(tk); err != nil {
			return engine.Result{}, err
		}
	}
	return engine.Result{PromptTokens: len(req.Tokens), Tokens: ids, FinishReason: engine.FinishStop}, nil
}

// TestToolMarkers: in a vocabulary that holds Kimi K2's markers as control
// tokens, which decode to nothing, the syntax is found from the vocabulary
// (the template here writes no markers) and the markers' text is put back
// for the parser, so the call comes out.
func TestToolMarkers(t *testing.T) {
	f, err := gguf.Open(testdata.Path(t, "gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := f.Metadata().Clone()
	toks, _ := md.Strings("tokenizer.ggml.tokens")
	types, _ := md.Int32s("tokenizer.ggml.token_type")
	toks, types = append([]string{}, toks...), append([]int32{}, types...)
	markers := toolcall.Kimi.Markers()
	first := len(toks) - len(markers) // the last pieces of the vocabulary become the markers
	for i, m := range markers {
		toks[first+i], types[first+i] = m, int32(tokenizer.TypeControl)
	}
	chatML := "{% if tools %}<|im_start|>system\n{{ tools | tojson }}<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"
	for key, v := range map[string]any{"tokenizer.ggml.tokens": gguf.Array{Type: gguf.TypeString, Values: toks},
		"tokenizer.ggml.token_type": gguf.Array{Type: gguf.TypeInt32, Values: types}, "tokenizer.chat_template": chatML} {
		if err := md.Set(key, v); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := tokenizer.FromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.IsControl(first) || tok.Piece(first) != "" || chattemplate.ToolFamily(tok) != toolcall.Kimi {
		t.Fatalf("control %v, piece %q, family %v", tok.IsControl(first), tok.Piece(first), chattemplate.ToolFamily(tok))
	}
	text := func(s string) engine.Token { return engine.Token{ID: 5, Text: s} }
	control := func(i int) engine.Token { return engine.Token{ID: first + i} } // Text "", as the engine gives it
	gen := tokenGen{[]engine.Token{text("Checking."), control(0), control(2), text("functions.get_weather:0"), control(3),
		text(`{"city": "Paris", `), text(`"days": 3}`), control(4), control(1)}}
	_, hs := newTestServer(t, Config{Generator: gen, Models: templateModels{tok}})
	var got ChatCompletion
	decode(t, post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "m", "messages": askWeather, "tools": weatherTool}), &got)
	if len(got.Choices) != 1 || got.Choices[0].Message.Content != "Checking." || len(got.Choices[0].Message.ToolCalls) != 1 || got.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("got %+v", got)
	}
	if c := got.Choices[0].Message.ToolCalls[0]; c.ID != "functions.get_weather:0" || c.Function.Name != "get_weather" || c.Function.Arguments != wantArgs {
		t.Errorf("call %+v", c)
	}
}

// TestToolRequests: tool calls and results of earlier turns, and bad
// tools, as each surface sends them.
func TestToolRequests(t *testing.T) {
	_, _, url := toolServer(t, "qwen3", "ok")
	for _, c := range []struct {
		path  string
		body  string
		param string // "" = accepted
	}{
		{"/v1/chat/completions", `{"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "retrieval"}]}`, "tools[0]"},
		{"/v1/chat/completions", `{"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]}`, "tools[0].function.parameters"},
		{"/v1/chat/completions", `{"model": "m", "messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "not json"}}]}]}`, "messages[0].tool_calls[0]"},
		{"/v1/chat/completions", `{"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "sometimes"}`, "tool_choice"},
		{"/v1/messages", `{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}`, "messages.0.content"},
		{"/v1/messages", `{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "bash_20250124", "name": "bash"}]}`, "tools.0"},
		{"/v1/messages", `{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}, {"type": "text", "text": "and?"}]}], "tools": [{"name": "f", "input_schema": {"type": "object"}}]}`, ""},
		{"/api/chat", `{"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "format": "json"}`, "format"},
		{"/api/chat", `{"model": "m", "stream": false, "messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}, {"role": "tool", "content": "1"}]}`, ""},
		{"/v1/responses", `{"model": "m", "input": "x", "tools": [{"type": "web_search"}]}`, "tools[0]"},
		{"/v1/responses", `{"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c", "output": "1"}]}`, ""},
	} {
		resp := post(t, url+c.path, "", c.body)
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		decode(t, resp, &e)
		if c.param == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s %s: %s %s", c.path, c.body, resp.Status, e.Error)
			}
			continue
		}
		if resp.StatusCode != 400 || !strings.Contains(string(e.Error), c.param) {
			t.Errorf("%s %s: %s %s; want a 400 about %s", c.path, c.body, resp.Status, e.Error, c.param)
		}
	}
}

// toolClientsScript drives the official clients (openai, @anthropic-ai/sdk,
// ollama) against a server whose model answers with a Qwen-style call:
// each must see a tool call of its own shape, streamed and not, and take
// the result back in the next turn.
const toolClientsScript = `
const OpenAI = require("openai");
const Anthropic = require("@anthropic-ai/sdk");
const { Ollama } = require("ollama");
const base = process.env.BASE_URL;
const schema = { type: "object", properties: { city: { type: "string" }, days: { type: "integer", minimum: 1, maximum: 7 } }, required: ["city", "days"] };
const user = { role: "user", content: "Weather in Paris for 3 days?" };
(async () => {
  const out = {};
  const openai = new OpenAI({ baseURL: base + "/v1", apiKey: "k", maxRetries: 0, timeout: 60000 });
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather forecast", parameters: schema } }];
  const chat = await openai.chat.completions.create({ model: "m", messages: [user], tools });
  const msg = chat.choices[0].message;
  out.chat = { finish: chat.choices[0].finish_reason, content: msg.content, calls: msg.tool_calls };
  const streamed = await openai.chat.completions.stream({ model: "m", messages: [user], tools }).finalChatCompletion();
  out.chatStream = { finish: streamed.choices[0].finish_reason, content: streamed.choices[0].message.content, calls: streamed.choices[0].message.tool_calls };
  const next = await openai.chat.completions.create({ model: "m", tools, messages: [user, msg,
    { role: "tool", tool_call_id: msg.tool_calls[0].id, content: "sunny" }] });
  out.chatNext = next.choices[0].finish_reason;

  const rtools = [{ type: "function", name: "get_weather", description: "Weather forecast", parameters: schema }];
  const resp = await openai.responses.create({ model: "m", input: "Weather in Paris for 3 days?", tools: rtools });
  out.responses = resp.output.map((it) => it.type === "function_call" ? [it.type, it.name, it.arguments, it.call_id.slice(0, 5)] : [it.type, resp.output_text]);
  const rs = await openai.responses.stream({ model: "m", input: "Weather in Paris for 3 days?", tools: rtools }).finalResponse();
  out.responsesStream = rs.output.map((it) => it.type === "function_call" ? [it.type, it.name, it.arguments] : [it.type]);
  const fc = resp.output.find((it) => it.type === "function_call");
  const rnext = await openai.responses.create({ model: "m", tools: rtools, input: [user, fc, { type: "function_call_output", call_id: fc.call_id, output: "sunny" }] });
  out.responsesNext = rnext.status;

  const anthropic = new Anthropic({ baseURL: base, apiKey: "k", maxRetries: 0, timeout: 60000 });
  const atools = [{ name: "get_weather", description: "Weather forecast", input_schema: schema }];
  const am = await anthropic.messages.create({ model: "m", max_tokens: 100, messages: [user], tools: atools });
  out.anthropic = { stop: am.stop_reason, content: am.content };
  const as = await anthropic.messages.stream({ model: "m", max_tokens: 100, messages: [user], tools: atools }).finalMessage();
  out.anthropicStream = { stop: as.stop_reason, content: as.content };
  const use = am.content.find((b) => b.type === "tool_use");
  const anext = await anthropic.messages.create({ model: "m", max_tokens: 100, tools: atools, messages: [user, { role: "assistant", content: am.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] }] });
  out.anthropicNext = anext.stop_reason;

  const ollama = new Ollama({ host: base });
  const oc = await ollama.chat({ model: "m", messages: [user], tools, stream: false });
  out.ollama = { content: oc.message.content, calls: oc.message.tool_calls };
  const os = await ollama.chat({ model: "m", messages: [user], tools, stream: true });
  out.ollamaStream = [];
  for await (const part of os) for (const c of part.message.tool_calls || []) out.ollamaStream.push(c);
  const onext = await ollama.chat({ model: "m", stream: false, tools, messages: [user, oc.message, { role: "tool", content: "sunny", tool_name: "get_weather" }] });
  out.ollamaNext = onext.done;
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestToolsNodeClients: the official clients read the tool calls.
func TestToolsNodeClients(t *testing.T) {
	_, _, url := toolServer(t, "qwen3", qwenCall)
	out := runNodeScript(t, toolClientsScript, "BASE_URL="+url)
	var got struct {
		Chat, ChatStream struct {
			Finish, Content string
			Calls           []ToolCall
		}
		ChatNext                   string
		Responses                  [][]string
		ResponsesStream            [][]string
		ResponsesNext              string
		Anthropic, AnthropicStream struct {
			Stop    string
			Content []struct {
				Type, Text, ID, Name string
				Input                map[string]any
			}
		}
		AnthropicNext string
		Ollama        struct {
			Content string
			Calls   []OllamaToolCall
		}
		OllamaStream []OllamaToolCall
		OllamaNext   bool
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, c := range map[string]struct {
		Finish, Content string
		Calls           []ToolCall
	}{"chat": got.Chat, "chat stream": got.ChatStream} {
		if c.Finish != "tool_calls" || c.Content != "Let me check.\n" || len(c.Calls) != 1 || c.Calls[0].Function.Name != "get_weather" ||
			c.Calls[0].Function.Arguments != wantArgs || !strings.HasPrefix(c.Calls[0].ID, "call_") {
			t.Errorf("openai %s: %+v", name, c)
		}
	}
	if got.ChatNext != "tool_calls" {
		t.Errorf("openai, the next turn: %q", got.ChatNext)
	}
	wantResp := `[["message","Let me check.\n"],["function_call","get_weather","{\"city\": \"Paris\", \"days\": 3}","call_"]]`
	if b, _ := json.Marshal(got.Responses); string(b) != wantResp {
		t.Errorf("responses: %s", b)
	}
	wantStream := `[["message"],["function_call","get_weather","{\"city\": \"Paris\", \"days\": 3}"]]`
	if b, _ := json.Marshal(got.ResponsesStream); string(b) != wantStream || got.ResponsesNext != "completed" {
		t.Errorf("responses stream: %s, next turn %q", b, got.ResponsesNext)
	}
	for name, a := range map[string]struct {
		Stop    string
		Content []struct {
			Type, Text, ID, Name string
			Input                map[string]any
		}
	}{"messages": got.Anthropic, "stream": got.AnthropicStream} {
		if a.Stop != "tool_use" || len(a.Content) != 2 || a.Content[0].Type != "text" || a.Content[0].Text != "Let me check.\n" ||
			a.Content[1].Type != "tool_use" || a.Content[1].Name != "get_weather" || a.Content[1].Input["city"] != "Paris" || a.Content[1].Input["days"] != 3.0 {
			t.Errorf("anthropic %s: %+v", name, a)
		}
	}
	if got.AnthropicNext != "tool_use" {
		t.Errorf("anthropic, the next turn: %q", got.AnthropicNext)
	}
	if got.Ollama.Content != "Let me check.\n" || len(got.Ollama.Calls) != 1 || got.Ollama.Calls[0].Function.Name != "get_weather" || !sameJSON(got.Ollama.Calls[0].Function.Arguments, wantArgs) ||
		len(got.OllamaStream) != 1 || !sameJSON(got.OllamaStream[0].Function.Arguments, wantArgs) || !got.OllamaNext {
		t.Errorf("ollama: %+v, stream %+v, next turn %v", got.Ollama, got.OllamaStream, got.OllamaNext)
	}
}

// TestStructuredResponses: a forced tool on /v1/responses is a
// function_call item whose arguments, constrained to the tool's schema,
// parse and validate even from stories260K; streamed, they arrive as
// function_call_arguments deltas.
func TestStructuredResponses(t *testing.T) {
	_, hs := newTestServer(t, Config{})
	tools := []map[string]any{{"type": "function", "name": "get_weather", "description": "Weather forecast", "parameters": weatherSchema}}
	ask := map[string]any{"model": "stories260K", "input": "What is the weather in Paris this week?", "temperature": 0, "max_output_tokens": 60,
		"tools": tools, "tool_choice": map[string]any{"type": "function", "name": "get_weather"}}
	var got ResponseObject
	decode(t, post(t, hs.URL+"/v1/responses", "", ask), &got)
	if len(got.Output) != 1 || got.Output[0].Type != "function_call" || got.Output[0].Name != "get_weather" || got.Output[0].Arguments == nil {
		t.Fatalf("got %+v", got)
	}
	validWeather(t, "responses function_call", *got.Output[0].Arguments)

	ask["stream"] = true
	ask["tool_choice"] = "required"
	resp := post(t, hs.URL+"/v1/responses", "", ask)
	defer resp.Body.Close()
	var args, done string
	type event struct {
		Type      string `json:"type"`
		Delta     string `json:"delta"`
		Arguments string `json:"arguments"`
	}
	eachEvent(t, resp.Body, func(ev event) {
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args += ev.Delta
		case "response.function_call_arguments.done":
			done = ev.Arguments
		case "response.output_text.delta":
			t.Errorf("text delta %q in a forced call", ev.Delta)
		}
	})
	if args != done {
		t.Errorf("deltas %q, done %q", args, done)
	}
	validWeather(t, "responses function_call, streamed", args)
}

// TestToolsPlainChat: a model without a chat template (stories260K) gets
// the tools described in a system message, and earlier calls and results
// written into the transcript in the Hermes syntax it is asked to use.
func TestToolsPlainChat(t *testing.T) {
	tok := storiesEngine(t).Tokenizer
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f"}}`)}
	msgs := []Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []MessageCall{{ID: "1", Name: "f", Arguments: `{"a": 1}`}}}, {Role: "tool", Content: "2", ToolCallID: "1"}}
	p, err := chattemplate.RenderChatTools(context.Background(), tok, msgs, tools)
	if err != nil || p.Template {
		t.Fatal(p, err)
	}
	want := "System: " + toolcall.Hermes.Instructions(tools) + "\n\nUser: x\n\nAssistant: <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>\n\nTool: 2\n\nAssistant:"
	if p.Text != want {
		t.Errorf("got  %q\nwant %q", p.Text, want)
	}
	_, hs := newTestServer(t, Config{})
	var got ChatCompletion
	decode(t, post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "stories260K", "messages": askWeather, "tools": weatherTool, "max_tokens": 8, "temperature": 0}), &got)
	if len(got.Choices) != 1 || got.Choices[0].FinishReason != "length" || got.Choices[0].Message.Content == "" {
		t.Errorf("got %+v", got)
	}
}

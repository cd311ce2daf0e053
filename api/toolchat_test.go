package api

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/runtime/chattemplate"
	"strata/runtime/gguf"
	"strata/runtime/tokenizer"
)

// The tool-call round trip of testdata/toolchat/conversation.json (a
// question, two tool calls, their results, the answer, a new question),
// as each surface's client sends it. The same conversation rendered by
// Hugging Face's procedure (Python Jinja2; testdata/toolchat/render.py)
// is the golden text.
var toolChatRequests = map[string]string{
	"openai": `{"model": "m", "tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "Local time in a time zone", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}],
 "messages": [
  {"role": "developer", "content": "You are a weather assistant."},
  {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris for the next 3 days, and what time is it there?"}]},
  {"role": "assistant", "content": null, "tool_calls": [
    {"id": "functions.get_weather:0", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3}"}},
    {"id": "functions.get_time:1", "type": "function", "function": {"name": "get_time", "arguments": "{\"timezone\": \"Europe/Paris\"}"}}]},
  {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "{\"forecast\": [\"sun\", \"rain\", \"sun\"], \"unit\": \"C\", \"high\": 21}"},
  {"role": "tool", "tool_call_id": "functions.get_time:1", "content": "14:05"},
  {"role": "assistant", "content": "Sun, then rain, then sun; highs around 21°C. It is 14:05 in Paris."},
  {"role": "user", "content": "And in Lyon?"}]}`,
	"anthropic": `{"model": "m", "max_tokens": 100, "system": "You are a weather assistant.", "tools": [
  {"name": "get_weather", "description": "Weather forecast for a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}},
  {"name": "get_time", "description": "Local time in a time zone", "input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}],
 "messages": [
  {"role": "user", "content": "What is the weather in Paris for the next 3 days, and what time is it there?"},
  {"role": "assistant", "content": [
    {"type": "tool_use", "id": "functions.get_weather:0", "name": "get_weather", "input": {"city":"Paris","days":3}},
    {"type": "tool_use", "id": "functions.get_time:1", "name": "get_time", "input": {"timezone":"Europe/Paris"}}]},
  {"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "functions.get_weather:0", "content": "{\"forecast\": [\"sun\", \"rain\", \"sun\"], \"unit\": \"C\", \"high\": 21}"},
    {"type": "tool_result", "tool_use_id": "functions.get_time:1", "content": [{"type": "text", "text": "14:05"}]}]},
  {"role": "assistant", "content": [{"type": "text", "text": "Sun, then rain, then sun; highs around 21°C. It is 14:05 in Paris."}]},
  {"role": "user", "content": "And in Lyon?"}]}`,
	"ollama": `{"model": "m", "tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "Local time in a time zone", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}],
 "messages": [
  {"role": "system", "content": "You are a weather assistant."},
  {"role": "user", "content": "What is the weather in Paris for the next 3 days, and what time is it there?"},
  {"role": "assistant", "content": "", "tool_calls": [
    {"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}},
    {"function": {"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}}]},
  {"role": "tool", "tool_name": "get_weather", "content": "{\"forecast\": [\"sun\", \"rain\", \"sun\"], \"unit\": \"C\", \"high\": 21}"},
  {"role": "tool", "tool_name": "get_time", "content": "14:05"},
  {"role": "assistant", "content": "Sun, then rain, then sun; highs around 21°C. It is 14:05 in Paris."},
  {"role": "user", "content": "And in Lyon?"}]}`,
	"responses": `{"model": "m", "tools": [
  {"type": "function", "name": "get_weather", "description": "Weather forecast for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}},
  {"type": "function", "name": "get_time", "description": "Local time in a time zone", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}],
 "input": [
  {"role": "system", "content": "You are a weather assistant."},
  {"role": "user", "content": [{"type": "input_text", "text": "What is the weather in Paris for the next 3 days, and what time is it there?"}]},
  {"type": "function_call", "call_id": "functions.get_weather:0", "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3}"},
  {"type": "function_call", "call_id": "functions.get_time:1", "name": "get_time", "arguments": "{\"timezone\": \"Europe/Paris\"}"},
  {"type": "function_call_output", "call_id": "functions.get_weather:0", "output": "{\"forecast\": [\"sun\", \"rain\", \"sun\"], \"unit\": \"C\", \"high\": 21}"},
  {"type": "function_call_output", "call_id": "functions.get_time:1", "output": "14:05"},
  {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sun, then rain, then sun; highs around 21°C. It is 14:05 in Paris."}]},
  {"role": "user", "content": "And in Lyon?"}]}`,
}

// toolChat reads a surface's request into the chat messages and tools
// the template gets, through the functions its handler uses.
func toolChat(t *testing.T, surface, body string) ([]Message, []json.RawMessage) {
	t.Helper()
	j := &job{}
	var msgs []Message
	var e *Error
	switch surface {
	case "openai":
		var req ChatRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		if e = openAIStructured(&req, j); e == nil {
			msgs, e = openAIMessages(req.Messages)
		}
	case "anthropic":
		var req MessagesRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		if e = anthropicSettings(&req, j); e == nil {
			msgs, e = anthropicMessages(&req)
		}
	case "ollama":
		var req OllamaChatRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		if e = ollamaFormat(req.Format, req.Tools, j); e == nil {
			msgs, e = ollamaMessages(req.Messages)
		}
	case "responses":
		var req ResponsesRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		if e = responsesTools(&req, j); e == nil {
			msgs, e = responsesInput(req.Input)
			nameToolResults(msgs)
		}
	}
	if e != nil {
		t.Fatalf("%s: %s", surface, e.Message)
	}
	if j.tools == nil || j.tool != nil {
		t.Fatalf("%s: tools given without tool_choice must be the model's to call (auto)", surface)
	}
	return msgs, j.tools.defs
}

// templateTokenizer is stories260K's tokenizer with src as its chat template.
func templateTokenizer(t *testing.T, src string) *tokenizer.Tokenizer {
	t.Helper()
	return ggufTokenizer(t, storiesWithTemplate(t, src))
}

// ggufTokenizer is the tokenizer of the GGUF file at path.
func ggufTokenizer(t testing.TB, path string) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestToolChatGolden: a tool-call round trip sent to each surface renders
// through Qwen3's, Kimi K2's and DeepSeek-V3.1's chat templates into
// exactly the prompt Hugging Face's renderer makes of it. (DeepSeek's
// template does not render tools; its golden text has none, and neither
// does this render.)
func TestToolChatGolden(t *testing.T) {
	for _, name := range []string{"qwen3", "kimi-k2-thinking", "deepseek-v3.1"} {
		src, err := os.ReadFile(filepath.Join("testdata", "templates", name+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		golden, err := os.ReadFile(filepath.Join("testdata", "toolchat", name+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		tok := templateTokenizer(t, string(src))
		for _, surface := range []string{"openai", "anthropic", "ollama", "responses"} {
			t.Run(name+"/"+surface, func(t *testing.T) {
				msgs, tools := toolChat(t, surface, toolChatRequests[surface])
				if !strings.Contains(string(src), "tools") {
					tools = nil
				}
				p, err := chattemplate.RenderChatTools(context.Background(), tok, msgs, tools)
				if err != nil || !p.Template {
					t.Fatalf("template %v, %v (fallback %v)", p.Template, err, p.Fallback)
				}
				if p.Text != string(golden) {
					t.Errorf("rendered differently from testdata/toolchat/%s.golden:\n%s", name, firstDiff(p.Text, string(golden)))
				}
			})
		}
	}
}

// firstDiff shows where got and want part.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-80)
	return "at byte " + itoa(i) + ":\n got: …" + got[lo:min(len(got), i+80)] + "\nwant: …" + want[lo:min(len(want), i+80)]
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

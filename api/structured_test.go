package api

import (
	"encoding/json"
	"testing"
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
	// Streamed, the arguments arrive in pieces of one tool call.
	resp := post(t, hs.URL+"/v1/chat/completions", "", map[string]any{"model": "stories260K", "messages": msgs, "temperature": 0, "max_tokens": 60, "stream": true,
		"tools": weatherTool, "tool_choice": "required"})
	_ = readSSE(t, resp)
}

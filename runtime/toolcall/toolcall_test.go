package toolcall

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// run feeds out to a parser in pieces of n bytes (0 = whole) and returns
// all its text and calls.
func run(f Family, out string, n int) (string, []Call) {
	p := NewParser(f)
	var text strings.Builder
	var calls []Call
	for len(out) > 0 {
		k := len(out)
		if n > 0 {
			k = min(n, len(out))
		}
		t, c := p.Feed(out[:k])
		text.WriteString(t)
		calls = append(calls, c...)
		out = out[k:]
	}
	t, c := p.Flush()
	text.WriteString(t)
	return text.String(), append(calls, c...)
}

var parseCases = []struct {
	name  string
	f     Family
	out   string
	text  string
	calls []Call
}{
	{"hermes text only", Hermes, "The weather is fine < 3 <tool", "The weather is fine < 3 <tool", nil},
	{"hermes one call", Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
		"", []Call{{Name: "get_weather", Arguments: `{"city": "Paris", "days": 3}`}}},
	{"hermes text then two calls", Hermes, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>\n",
		"Let me check.\n", []Call{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{"x": [1, 2]}`}}},
	{"hermes qwen3 thinking", Hermes, "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"q\": \"</tool\"}}\n</tool_call>",
		"<think>\nThe user wants weather.\n</think>\n\n", []Call{{Name: "w", Arguments: `{"q": "</tool"}`}}},
	{"hermes arguments as a string", Hermes, `<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>`, "", []Call{{Name: "f", Arguments: `{"a": 1}`}}},
	{"hermes no closing tag at the end", Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n", "", []Call{{Name: "f", Arguments: `{"a": 1}`}}},
	{"hermes bad json is text", Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call> after", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call> after", nil},
	{"hermes no name is text", Hermes, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>", nil},
	{"hermes array arguments is text", Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", nil},
	{"hermes cut short is text", Hermes, "Sure. <tool_call>\n{\"name\": \"f\", \"argum", "Sure. <tool_call>\n{\"name\": \"f\", \"argum", nil},
	{"hermes text after a call", Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\nDone.", "\nDone.", []Call{{Name: "f", Arguments: `{}`}}},

	{"deepseek v3", DeepSeek, "I'll look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"I'll look.", []Call{{Name: "get_weather", Arguments: `{"city": "Paris"}`}, {Name: "get_time", Arguments: `{}`}}},
	{"deepseek v3.1", DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"", []Call{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
	{"deepseek without the section marker", DeepSeek, "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜>", "", []Call{{Name: "f", Arguments: `{"a": 1}`}}},
	{"deepseek bad fence is text", DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", nil},
	{"deepseek cut short is text", DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\"", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\"", nil},

	{"kimi two calls", Kimi, "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
		"Checking.", []Call{{ID: "functions.get_weather:0", Name: "get_weather", Arguments: `{"city": "Paris"}`}, {ID: "functions.get_time:1", Name: "get_time", Arguments: `{}`}}},
	{"kimi section end missing at the end", Kimi, "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:3<|tool_call_argument_begin|>{\"a\": true}<|tool_call_end|>",
		"", []Call{{ID: "functions.f:3", Name: "f", Arguments: `{"a": true}`}}},
	{"kimi bad arguments is text", Kimi, "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{oops}<|tool_call_end|><|tool_calls_section_end|>",
		"<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{oops}<|tool_call_end|><|tool_calls_section_end|>", nil},
	{"kimi text only", Kimi, "Hello <|tool_calls", "Hello <|tool_calls", nil},
}

// TestParse: each family's output parses into the same text and calls
// whether it arrives whole, a byte at a time or in pieces of any size.
func TestParse(t *testing.T) {
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 3, 5, 7, 16} {
				text, calls := run(c.f, c.out, n)
				if text != c.text || !reflect.DeepEqual(calls, c.calls) {
					t.Fatalf("pieces of %d: text %q, calls %+v; want %q, %+v", n, text, calls, c.text, c.calls)
				}
			}
		})
	}
}

// TestStreamHoldsBack: text streams as it comes, except a tail that could
// begin a marker, which waits until it is known; a call comes out when
// its block closes.
func TestStreamHoldsBack(t *testing.T) {
	p := NewParser(Hermes)
	steps := []struct {
		in, text string
		calls    int
	}{
		{"Let me ", "Let me ", 0},
		{"check <to", "check ", 0},
		{"day> then", "<today> then", 0},
		{" <tool_call>\n{\"name\": ", " ", 0},
		{"\"f\", \"arguments\": {}}\n</tool_", "", 0},
		{"call>", "", 1},
	}
	for i, s := range steps {
		text, calls := p.Feed(s.in)
		if text != s.text || len(calls) != s.calls {
			t.Fatalf("step %d (%q): text %q, %d calls; want %q, %d", i, s.in, text, len(calls), s.text, s.calls)
		}
	}
	if text, calls := p.Flush(); text != "" || calls != nil {
		t.Errorf("flush: %q %v", text, calls)
	}
}

func TestDetect(t *testing.T) {
	vocab := func(toks ...string) func(string) bool {
		return func(s string) bool {
			for _, x := range toks {
				if x == s {
					return true
				}
			}
			return false
		}
	}
	for _, c := range []struct {
		name     string
		template string
		has      func(string) bool
		want     Family
	}{
		{"qwen3 template", `{{- '<tool_call>\n{"name": "' }}`, nil, Hermes},
		{"deepseek v3 template", `{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] }}`, nil, DeepSeek},
		{"kimi template", `<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}`, nil, Kimi},
		{"kimi vocabulary", `{{ messages }}`, vocab("<|tool_calls_section_begin|>"), Kimi},
		{"deepseek vocabulary", ``, vocab("<｜tool▁calls▁begin｜>"), DeepSeek},
		{"nothing known", `{{ messages }}`, vocab("<s>"), Hermes},
	} {
		if got := Detect(c.template, c.has); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// FuzzParser: any output, in any pieces, parses without a panic; with no
// calls found, the text is the output itself (nothing is lost).
func FuzzParser(f *testing.F) {
	for _, c := range parseCases {
		f.Add(int(c.f), c.out, 3)
	}
	f.Fuzz(func(t *testing.T, fam int, out string, n int) {
		fa := Family(uint(fam) % 3)
		n = int(uint(n) % 64)
		text, calls := run(fa, out, n)
		if len(calls) == 0 && text != out {
			t.Fatalf("no calls, text %q != output %q", text, out)
		}
		for _, c := range calls {
			if c.Name == "" || !utf8.ValidString(c.Arguments) || !strings.HasPrefix(c.Arguments, "{") {
				t.Fatalf("call %+v", c)
			}
		}
	})
}

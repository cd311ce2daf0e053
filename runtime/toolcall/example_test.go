package toolcall_test

import (
	"fmt"

	"strata/runtime/toolcall"
)

// A Qwen3 answer arrives in pieces; the text streams, the call comes out
// whole once its block closes.
func Example() {
	p := toolcall.NewParser(toolcall.Detect(`{{- '<tool_call>\n{"name": "' }}`, nil))
	for _, piece := range []string{"Let me ", "check.\n<tool", "_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"} {
		text, calls := p.Feed(piece)
		fmt.Printf("text %q, calls %v\n", text, calls)
	}
	text, calls := p.Flush()
	fmt.Printf("end: text %q, calls %v\n", text, calls)
	// Output:
	// text "Let me ", calls []
	// text "check.\n", calls []
	// text "", calls []
	// text "", calls [{ get_weather {"city": "Paris"}}]
	// end: text "", calls []
}

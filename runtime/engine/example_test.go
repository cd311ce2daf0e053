package engine_test

import (
	"context"
	"fmt"
	"path/filepath"

	"strata/internal/testdata"
	"strata/runtime/engine"
)

// Open a model and stream a greedy continuation token by token.
func Example() {
	dir, err := testdata.Dir()
	if err != nil {
		fmt.Println(err)
		return
	}
	e, err := engine.Open(filepath.Join(dir, "gguf", "stories260K.gguf"), engine.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	res, err := e.Generate(context.Background(), engine.Request{Prompt: "Lily", MaxTokens: 12},
		func(t engine.Token) error {
			fmt.Print(t.Text)
			return nil
		})
	fmt.Println()
	fmt.Println(len(res.Tokens), res.FinishReason, err)
	// Output:
	//  and Tom were playing in the park
	// 12 length <nil>
}

package sample_test

import (
	"fmt"

	"strata/runtime/sample"
)

// Greedy decoding from a toy model whose logits never change: without
// penalties it would repeat token 2 forever; the frequency penalty lowers a
// token's logit by 0.6 each time it is emitted.
func Example() {
	forward := func() []float32 { return []float32{1.1, 0.6, 2.0, 0.9} }
	s, err := sample.New(sample.Params{FrequencyPenalty: 0.6}, 4)
	if err != nil {
		panic(err)
	}
	for range 6 {
		tok := s.Sample(forward())
		s.Accept(tok)
		fmt.Print(tok, " ")
	}
	fmt.Println()
	// Output: 2 2 0 3 2 1
}

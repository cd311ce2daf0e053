package grammar_test

import (
	"fmt"
	"math"

	"strata/runtime/grammar"
)

// chars is a toy vocabulary: one token per character, and token 0 ends
// the generation (a *tokenizer.Tokenizer is the real one).
type chars []string

func (c chars) VocabSize() int      { return len(c) }
func (c chars) Piece(id int) string { return c[id] }
func (c chars) IsEOG(id int) bool   { return id == 0 }

// Compile a schema once per request, build the vocabulary trie once per
// tokenizer, and mask every step's logits with the Matcher (a
// sample.Constraint: sampler.Constrain(m) does the masking and accepting
// inside the sampler). Here the "model" prefers to stop, then to close a
// brace, then the lowest token id: the grammar allows each only when the
// document stays valid.
func Example() {
	s, err := grammar.Compile([]byte(`{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	vocab := chars{"<eos>", "0", "1", "2", "\"", ":", ",", "{", "}", "n", "x", " "}
	m := grammar.NewMatcher(s, grammar.VocabOf(vocab), 20)
	out := ""
	for range 20 {
		logits := make([]float32, len(vocab))
		for i := range logits {
			logits[i] = -float32(i) // prefers low ids
		}
		logits[0], logits[8] = 100, 50 // <eos>, then }
		m.Mask(logits)
		best := 0
		for i, l := range logits {
			if l > logits[best] {
				best = i
			}
		}
		if math.IsInf(float64(logits[best]), -1) || vocab.IsEOG(best) {
			break
		}
		m.Accept(best)
		out += vocab.Piece(best)
	}
	fmt.Println(out, m.Done())
	// Output:
	// {"n":1} true
}

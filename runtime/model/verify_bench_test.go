package model

import (
	"fmt"
	"testing"

	"strata/runtime/tensor"
)

// BenchmarkStoriesVerify times one session's step of n rows after 300
// cached positions of stories260K, with every row's logits: a speculative
// check of n-1 guesses (n = 1: a plain step). What a row adds to a step
// is what speculation pays for each guess on one node.
func BenchmarkStoriesVerify(b *testing.B) {
	f := openModel(b, "gguf/stories260K.gguf")
	m, _ := Load(f, 0, 5)
	for _, threads := range []int{1, 2} {
		pool := tensor.NewPool(threads)
		for _, n := range []int{1, 2, 3, 4, 6, 9} {
			b.Run(fmt.Sprintf("threads%d/rows%d", threads, n), func(b *testing.B) {
				s := m.NewState(pool, 16, 512)
				c := m.NewCache(512)
				toks := make([]int, n)
				for i := range toks {
					toks[i] = 1 + i
				}
				logits := make([]float32, n*m.Vocab)
				for b.Loop() {
					c.Len = 300
					if err := s.Embed(toks); err != nil {
						b.Fatal(err)
					}
					if err := s.Forward(c, n); err != nil {
						b.Fatal(err)
					}
					if err := s.LogitsRows(0, n, logits); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		pool.Close()
	}
}

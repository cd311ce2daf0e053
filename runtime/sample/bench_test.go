package sample

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchParams are the configurations benchmarked and checked for
// allocations.
var benchParams = map[string]Params{
	"greedy":  {RepeatPenalty: 1.1},
	"default": {Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1},
	"topP":    {Temperature: 0.8, TopP: 0.95, RepeatPenalty: 1.1},
	"minP":    {Temperature: 0.8, MinP: 0.05, RepeatPenalty: 1.1},
	"full":    {Temperature: 1},
}

// randomLogits is roughly what a model emits: a few strong candidates over
// a broad normal floor.
func randomLogits(vocab int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, seed))
	l := make([]float32, vocab)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2)
	}
	for range 10 {
		l[r.IntN(vocab)] += 8
	}
	return l
}

// BenchmarkSample measures Sample plus Accept per token, including copying
// the logits (Sample overwrites them), for each configuration and
// vocabulary size.
func BenchmarkSample(b *testing.B) {
	for _, vocab := range []int{32000, 151936} {
		for _, name := range []string{"greedy", "default", "topP", "minP", "full"} {
			b.Run(fmt.Sprintf("%s/vocab=%d", name, vocab), func(b *testing.B) {
				s, err := New(benchParams[name], vocab)
				if err != nil {
					b.Fatal(err)
				}
				src := randomLogits(vocab, 1)
				logits := make([]float32, vocab)
				b.SetBytes(int64(4 * vocab))
				b.ReportAllocs()
				for b.Loop() {
					copy(logits, src)
					s.Accept(s.Sample(logits))
				}
			})
		}
	}
}

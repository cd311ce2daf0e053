package engine

import (
	"context"
	"strings"
	"testing"

	"strata/internal/testdata"
)

// BenchmarkRetoldStory times decoding in process, with and without n-gram
// guesses at every step, on the case make bench-speculate gives a node:
// stories260K asked to continue a story it has just told (its own 200
// tokens, then their first two sentences). The prompt comes from the
// engine's prompt cache after the first answer, so what is timed is the
// 128 tokens' decoding; us/token is the loop's own decode time.
func BenchmarkRetoldStory(b *testing.B) {
	for _, src := range []string{SpeculateOff, SpeculateNGram} {
		b.Run(src, func(b *testing.B) {
			e, err := Open(testdata.Path(b, "gguf/stories260K.gguf"), Options{Threads: 1, GuessEveryStep: true})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			story, err := e.Generate(context.Background(), Request{MaxTokens: 200}, func(Token) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
			two := strings.SplitAfterN(story.Text, ".", 3)
			prompt := story.Text + "\n" + two[0] + two[1]
			var decode float64
			var tokens, steps, acc int
			for b.Loop() {
				res, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 128, Speculate: src}, func(Token) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
				decode += res.DecodeDuration.Seconds()
				tokens += len(res.Tokens)
				steps += res.Stats.Steps
				acc += res.Accepted
			}
			b.ReportMetric(float64(tokens)/float64(steps), "tok/step")
			b.ReportMetric(decode/float64(tokens)*1e6, "us/token")
		})
	}
}

package stage

import (
	"context"
	"strings"
	"testing"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/runtime/engine"
)

// BenchmarkRetoldStoryOnNode is make bench-speculate's one-node case
// without the HTTP server and processes around it: stories260K asked to
// continue a story it has just told (its own 200 tokens, then their first
// two sentences), 128 tokens, on a one-stage ring of shard actors in this
// process, without guesses, with n-gram guesses drafted on the last stage
// (through the token shortcut), and with the session drafting them
// (without the shortcut, as before the stage drafted). us/token is the
// decode time per token.
func BenchmarkRetoldStoryOnNode(b *testing.B) {
	store := oracle.Stories(b)
	story := oracle.OneNode(b, store["stories260K"], engine.Request{MaxTokens: 200})
	two := strings.SplitAfterN(story.Text, ".", 3)
	prompt := story.Text + "\n" + two[0] + two[1]
	for _, c := range []struct {
		name string
		opts origin.Options
	}{
		{"off", origin.Options{}},
		{"ngram-on-stage", origin.Options{Speculate: engine.SpeculateNGram}},
		{"ngram-in-session", origin.Options{Speculate: engine.SpeculateNGram, NoShortcut: true, GuessEveryStep: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			lc := newLocalCluster(b, 1, 64e6, store)
			c.opts.PlanContext = 1024 // the prompt cache holds the prompt after the first answer: decoding is timed
			cl := lc.cluster(c.opts)
			defer cl.Close()
			var decode float64
			var tokens, steps int
			for b.Loop() {
				res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 128}, func(engine.Token) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
				decode += res.DecodeDuration.Seconds()
				tokens += len(res.Tokens)
				steps += res.Stats.Steps
			}
			b.ReportMetric(float64(tokens)/float64(steps), "tok/step")
			b.ReportMetric(decode/float64(tokens)*1e6, "us/token")
		})
	}
}

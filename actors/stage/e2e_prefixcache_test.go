//go:build e2e

package stage

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"strata/actors/origin"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// Issue 18's measurement on a bigger model: a two-stage ring of a
// random-weight TinyLlama-1.1B cut to 2 layers (Q8_0), a 400-token
// conversation, then the same plus its answer and one new line. The
// second request must find ≥ 390 tokens cached and answer as a run
// without the cache does; the times to first token are logged (timing is
// not asserted: the machine is shared).
func TestE2EPromptCacheTTFT(t *testing.T) {
	path := filepath.Join(os.TempDir(), "strata-tinyllama-1.1b-2layers-q8_0-seed1.gguf")
	if _, err := os.Stat(path); err != nil {
		if err := synth.WriteFile(path, model.Shapes["tinyllama-1.1b"], synth.Options{Type: tensor.Q8_0, Seed: 1, Layers: 2}); err != nil {
			t.Fatal(err)
		}
	}
	store := catalog.Files{"tiny": path}
	lc := newLocalCluster(t, 2, 200<<20, store)
	cl := lc.cluster(origin.Options{PlanContext: 1024})
	defer cl.Close()
	ref := newLocalCluster(t, 2, 200<<20, store).cluster(origin.Options{PlanContext: 1024, PromptCache: -1})
	defer ref.Close()
	if p, _, err := cl.Plan("tiny"); err != nil || len(p.Stages) != 2 {
		t.Fatalf("plan %v, %v; want 2 stages", p, err)
	}
	timed := func(c *origin.Origin, tokens []int) (engine.Result, time.Duration) {
		start := time.Now()
		var ttft time.Duration
		res, err := c.Generate(context.Background(), engine.Request{Model: "tiny", Tokens: tokens, MaxTokens: 8}, func(engine.Token) error {
			if ttft == 0 {
				ttft = time.Since(start)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return res, ttft
	}
	timed(cl, []int{1, 2, 3}) // loads the shards
	timed(ref, []int{1, 2, 3})
	rng := rand.New(rand.NewPCG(1, 2))
	words := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 100 + rng.IntN(30000)
		}
		return out
	}
	turn1 := append([]int{1}, words(399)...)
	first, ttft1 := timed(cl, turn1)
	turn2 := append(append(append([]int(nil), turn1...), first.Tokens...), words(12)...)
	second, ttft2 := timed(cl, turn2)
	want, _ := timed(ref, turn2)
	t.Logf("tinyllama-1.1b, 2 layers, Q8_0, 2 stages: first request %d tokens, first token after %v; second %d tokens, %d cached, first token after %v: %.1f× sooner",
		len(turn1), ttft1, len(turn2), second.CachedTokens, ttft2, float64(ttft1)/float64(ttft2))
	if second.CachedTokens < 390 {
		t.Errorf("%d tokens cached, want ≥ 390", second.CachedTokens)
	}
	// The token after the prompt reads every cached position: a cache cut
	// in the wrong place or holding another session's keys changes it. The
	// later tokens may part from the uncached run's without anything being
	// wrong: the uncached run prefills positions 400-419 in one batch where
	// the cached one decoded 400-406 one at a time, the batch and one-token
	// kernels sum in different orders, and this model's random weights
	// leave near ties a last bit can flip (greedy equality over whole
	// answers is checked on stories260K by TestPromptCacheAcrossStages).
	if len(second.Tokens) == 0 || len(want.Tokens) == 0 || second.Tokens[0] != want.Tokens[0] {
		t.Errorf("cached answer %v starts unlike the uncached %v", second.Tokens, want.Tokens)
	}
	same := 0
	for same < min(len(second.Tokens), len(want.Tokens)) && second.Tokens[same] == want.Tokens[same] {
		same++
	}
	t.Logf("cached and uncached answers agree on their first %d of %d tokens", same, len(want.Tokens))
}

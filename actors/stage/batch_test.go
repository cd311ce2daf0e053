package stage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/model"
	"strata/runtime/sample"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// Eight sessions at once on one node and on a ring of three stages: each
// gives the tokens it gives alone (greedy and seeded sampling), and the
// shards did run steps of several sessions as one batch.
func TestBatchedSessionsAsAlone(t *testing.T) {
	store := oracle.Stories(t)
	var reqs []engine.Request
	for i := range 8 {
		r := engine.Request{Model: "stories260K", Prompt: []string{"Lily", "Tom had a red ball.", "", "Once upon a time"}[i%4], MaxTokens: 40 + 5*i}
		if i%2 == 1 {
			r.Sampling = sample.Params{Temperature: 0.9, TopK: 40, Seed: uint64(i)}
		}
		reqs = append(reqs, r)
	}
	for _, c := range []struct {
		nodes, stages int
		mem           uint64
	}{{1, 1, 64 << 20}, {3, 3, 1200e3}} {
		t.Run(fmt.Sprintf("%d-stages", c.stages), func(t *testing.T) {
			lc := newLocalCluster(t, c.nodes, c.mem, store)
			cl := lc.cluster(origin.Options{PlanContext: 256, PlanSessions: 8, PromptCache: -1})
			defer cl.Close()
			if p, _, err := cl.Plan("stories260K"); err != nil || len(p.Stages) != c.stages {
				t.Fatalf("plan %v, %v; want %d stages", p, err, c.stages)
			}
			alone := make([]engine.Result, len(reqs))
			for i, r := range reqs {
				var err error
				if alone[i], err = cl.Generate(context.Background(), r, func(engine.Token) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			runs0, carried0 := lc.batches()
			together := make([]engine.Result, len(reqs))
			errs := make([]error, len(reqs))
			var wg sync.WaitGroup
			for i, r := range reqs {
				wg.Go(func() {
					together[i], errs[i] = cl.Generate(context.Background(), r, func(engine.Token) error { return nil })
				})
			}
			wg.Wait()
			for i := range reqs {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if together[i].Text != alone[i].Text {
					t.Errorf("session %d in company:\n got %q\nalone %q", i, together[i].Text, alone[i].Text)
				}
			}
			runs, carried := lc.batches()
			runs, carried = runs-runs0, carried-carried0
			t.Logf("%d batches carried %d steps (%.2f per batch)", runs, carried, float64(carried)/float64(runs))
			if carried <= runs {
				t.Errorf("no batch carried more than one session's step: %d batches, %d steps", runs, carried)
			}
			if rows := lc.batchRows.Load(); rows < lc.batchSteps.Load() {
				t.Errorf("%d rows for %d steps", rows, lc.batchSteps.Load())
			}
			lc.waitFree(t)
		})
	}
}

// batches sums the batches lc's shards ran and the steps they carried.
func (lc *localCluster) batches() (runs, carried int64) {
	return lc.batchRuns.Load(), lc.batchSteps.Load()
}

// On a model summed row-sequentially (Q4_K), sessions that start while
// others decode (their prompt chunks may share the stage's forward passes
// with the others' steps) each give one node's text alone. Whether steps
// did share a pass depends on timing: logged, not asserted (the engine's
// TestPromptChunkSharesAStep asserts the sharing deterministically).
func TestQ4KSessionsInCompanyAsOneNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q4k.gguf")
	shape := model.Shape{Name: "llama-small", Arch: "llama", Layers: 4, Embd: 256, FFN: 512, Heads: 4, KVHeads: 2, Vocab: 512, Context: 512, RopeBase: 10000}
	if err := synth.WriteFile(path, shape, synth.Options{Type: tensor.Q4_K, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	store := catalog.Files{"q4k": path}
	lc := newLocalCluster(t, 1, 64<<20, store)
	cl := lc.cluster(origin.Options{PlanContext: 512, PlanSessions: 4})
	defer cl.Close()
	var reqs []engine.Request
	for i := range 4 {
		var toks []int
		for j := range 10 + 45*i {
			toks = append(toks, 1+(i*31+j*7)%500)
		}
		reqs = append(reqs, engine.Request{Model: "q4k", Tokens: toks, MaxTokens: 60})
	}
	got := make([]engine.Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 2 * time.Millisecond) // the later ones start while the first decode
			got[i], errs[i] = cl.Generate(context.Background(), r, func(engine.Token) error { return nil })
		})
	}
	wg.Wait()
	for i, r := range reqs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		r.Model = ""
		want := oracle.OneNode(t, path, r)
		if !slices.Equal(got[i].Tokens, want.Tokens) {
			t.Errorf("session %d in company:\n got %v\nwant %v", i, got[i].Tokens, want.Tokens)
		}
	}
	runs, steps := lc.batchRuns.Load(), lc.batchSteps.Load()
	t.Logf("%d forward passes carried %d steps and %d rows", runs, steps, lc.batchRows.Load())
	if steps == runs {
		t.Log("no two steps shared a forward pass this time (the sessions did not overlap)")
	}
	lc.waitFree(t)
}

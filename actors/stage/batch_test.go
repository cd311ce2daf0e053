package stage

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/runtime/engine"
	"strata/runtime/sample"
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

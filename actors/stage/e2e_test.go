//go:build e2e

// Distributed runs of a synthetic tinyllama-1.1b (1.2 GB, written once
// and cached in the temp directory). They run in make test's second
// pass, without the race detector: go test -tags e2e -run E2E ./actors/...
package stage

import (
	"context"
	"fmt"
	"testing"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/runtime/catalog"
	"strata/runtime/engine"
)

func TestE2ETinyllamaAcrossNodes(t *testing.T) {
	path := oracle.TinyllamaQ8(t)
	req := engine.Request{Prompt: "the quick brown fox", MaxTokens: 20}
	want := oracle.OneNode(t, path, req)
	oneDecode := want.DecodeDuration
	t.Logf("1 node: %d tokens, decode %.2f tok/s", len(want.Tokens), float64(len(want.Tokens)-1)/oneDecode.Seconds())
	store := catalog.Files{"tinyllama": path}
	for _, c := range []struct {
		nodes, stages int
		mem           uint64
	}{{2, 2, 700e6}, {3, 3, 450e6}, {5, 5, 280e6}} {
		t.Run(fmt.Sprintf("%d-nodes", c.nodes), func(t *testing.T) {
			lc := newLocalCluster(t, c.nodes, c.mem, store)
			cl := lc.cluster(origin.Options{PlanContext: 256})
			defer cl.Close()
			p, _, err := cl.Plan("tinyllama")
			if err != nil || len(p.Stages) != c.stages {
				t.Fatalf("plan %v %v; want %d stages", p, err, c.stages)
			}
			res, err := cl.Generate(context.Background(), engine.Request{Model: "tinyllama", Prompt: req.Prompt, MaxTokens: req.MaxTokens}, func(engine.Token) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(res.Tokens) != fmt.Sprint(want.Tokens) {
				t.Fatalf("%d stages:\n got %v\nwant %v", c.stages, res.Tokens, want.Tokens)
			}
			lc.waitFree(t)
		})
	}
}

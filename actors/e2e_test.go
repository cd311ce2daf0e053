//go:build e2e

// Distributed runs of a synthetic tinyllama-1.1b (1.2 GB, written once
// and cached in the temp directory). They run in make test's second
// pass, without the race detector: go test -tags e2e -run E2E ./actors
package actors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"strata/runtime/engine"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// tinyllamaQ8 is the same file `strata synth --shape tinyllama-1.1b
// --type Q8_0 --seed 1` writes (the cmd/strata e2e tests share it).
func tinyllamaQ8(t *testing.T) string {
	t.Helper()
	path := filepath.Join(os.TempDir(), "strata-e2e-tinyllama-1.1b-q8_0-seed1.gguf")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := synth.WriteFile(path, model.Shapes["tinyllama-1.1b"], synth.Options{Type: tensor.Q8_0, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

func oneNode(t *testing.T, path string, req engine.Request) (engine.Result, time.Duration) {
	t.Helper()
	res := singleNode(t, path, req)
	return res, res.DecodeDuration
}

func TestE2ETinyllamaAcrossNodes(t *testing.T) {
	path := tinyllamaQ8(t)
	req := engine.Request{Prompt: "the quick brown fox", MaxTokens: 20}
	want, oneDecode := oneNode(t, path, req)
	t.Logf("1 node: %d tokens, decode %.2f tok/s", len(want.Tokens), float64(len(want.Tokens)-1)/oneDecode.Seconds())
	store := Files{"tinyllama": path}
	for _, c := range []struct {
		nodes, stages int
		mem           uint64
	}{{2, 2, 700e6}, {3, 3, 450e6}, {5, 5, 280e6}} {
		t.Run(fmt.Sprintf("%d-nodes", c.nodes), func(t *testing.T) {
			lc := newLocalCluster(t, c.nodes, c.mem, store)
			cl := lc.cluster(ClusterOptions{PlanContext: 256})
			defer cl.Close()
			p, _, err := cl.Plan("tinyllama")
			if err != nil || len(p.Stages) != c.stages {
				t.Fatalf("plan %v %v; want %d stages", p, err, c.stages)
			}
			res, err := cl.Generate(context.Background(), Request{Model: "tinyllama", Prompt: req.Prompt, MaxTokens: req.MaxTokens}, func(engine.Token) error { return nil })
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

// Tokens/s on one node against three libp2p nodes on loopback, and the
// transport time per hop.
func TestE2ETinyllamaThreePeersSpeed(t *testing.T) {
	path := tinyllamaQ8(t)
	req := engine.Request{Prompt: "the quick brown fox", MaxTokens: 40}
	want, oneDecode := oneNode(t, path, req)
	nodes := startNodesWith(t, map[string]string{"tinyllama": path}, 256, 3, 450e6, 1)
	// A first run loads the shards; the second is measured.
	if _, err := nodes[0].Cluster.Generate(context.Background(), Request{Model: "tinyllama", Prompt: "warm up", MaxTokens: 2}, func(engine.Token) error { return nil }); err != nil {
		t.Fatal(err)
	}
	res, err := nodes[0].Cluster.Generate(context.Background(), Request{Model: "tinyllama", Prompt: req.Prompt, MaxTokens: req.MaxTokens}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Tokens) != fmt.Sprint(want.Tokens) {
		t.Fatalf("3 peers:\n got %v\nwant %v", res.Tokens, want.Tokens)
	}
	st := res.Stats
	t.Logf("tinyllama-1.1b Q8_0 decode: 1 node %.2f tok/s; 3 libp2p nodes on loopback %.2f tok/s (round trip %v, compute %v, transport per hop %v over %d hops)",
		float64(len(want.Tokens)-1)/oneDecode.Seconds(), float64(len(res.Tokens)-1)/res.DecodeDuration.Seconds(),
		st.Round, st.Compute, st.HopOverhead(), st.Stages+1)
}

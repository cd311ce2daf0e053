//go:build e2e

// Distributed runs of a synthetic tinyllama-1.1b (1.2 GB, written once
// and cached in the temp directory). They run in make test's second
// pass, without the race detector: go test -tags e2e -run E2E ./actors/...
package actors

import (
	"context"
	"fmt"
	"testing"

	"strata/actors/internal/oracle"
	"strata/runtime/engine"
)

// Tokens/s on one node against three libp2p nodes on loopback, and the
// transport time per hop.
func TestE2ETinyllamaThreePeersSpeed(t *testing.T) {
	path := oracle.TinyllamaQ8(t)
	req := engine.Request{Prompt: "the quick brown fox", MaxTokens: 40}
	want := oracle.OneNode(t, path, req)
	oneDecode := want.DecodeDuration
	nodes := startNodesWith(t, map[string]string{"tinyllama": path}, 256, 3, 450e6, 1)
	// A first run loads the shards; the second is measured.
	if _, err := nodes[0].Origin.Generate(context.Background(), engine.Request{Model: "tinyllama", Prompt: "warm up", MaxTokens: 2}, func(engine.Token) error { return nil }); err != nil {
		t.Fatal(err)
	}
	res, err := nodes[0].Origin.Generate(context.Background(), engine.Request{Model: "tinyllama", Prompt: req.Prompt, MaxTokens: req.MaxTokens}, func(engine.Token) error { return nil })
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

package actors

import (
	"context"
	"strings"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/engine"
)

// A node that runs a draft model (--speculate draft) keeps its weights
// and one session's draft cache out of the memory it offers: placement
// (which plans with what nodes offer) sees that much less, and a node
// whose --memory cannot hold the draft refuses to start, in words.
func TestDraftHoldsNodeMemory(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	draft, err := engine.Open(path, engine.Options{Threads: 1, Context: 512, PromptCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer draft.Close()
	need := draft.Footprint()
	if need < 1_000_000 { // 1.2 MB of weights and 5 layers' KV for 512 positions
		t.Fatalf("draft footprint %d bytes: weights or cache not counted", need)
	}
	nd := startFetchNodeWith(t, "a", map[string]string{"stories260K": path}, 64<<20, nil, func(c *NodeConfig) {
		c.Origin.Speculate, c.Origin.Draft = engine.SpeculateDraft, draft
	})
	if got := nd.Peers.MemoryOffered(); got != 64<<20-need {
		t.Errorf("a node of 64 MiB with a draft of %d bytes offers %d, want %d", need, got, 64<<20-need)
	}
	if got := nd.Host.UsedBytes(); got != 0 {
		t.Errorf("the shard host counts %d bytes before any shard", got)
	}

	cfg := fetchNodeConfig(t, map[string]string{"stories260K": path}, need/2, nil)
	cfg.Origin.Speculate, cfg.Origin.Draft = engine.SpeculateDraft, draft
	if small, err := StartNode(context.Background(), cfg); err == nil {
		small.Close()
		t.Fatalf("a node with --memory %d started with a draft of %d bytes", need/2, need)
	} else if !strings.Contains(err.Error(), "draft model") {
		t.Errorf("error does not name the draft: %v", err)
	}
}

// archOf reads GOARCH out of the platform a node announces.
func TestArchOf(t *testing.T) {
	for platform, want := range map[string]string{"linux/amd64 6.1.0-18-amd64": "amd64", "darwin/arm64 24A335": "arm64", "linux/arm64": "arm64", "": "", "weird": ""} {
		if got := archOf(platform); got != want {
			t.Errorf("archOf(%q) = %q, want %q", platform, got, want)
		}
	}
}

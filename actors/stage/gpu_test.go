package stage

import (
	"context"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/runtime/engine"
	"strata/runtime/gpu"
	"strata/runtime/model"
)

// TestGPUStage: a 3-stage pipeline whose middle node puts its shard's
// matrix products on a Vulkan device (the first: lavapipe in CI) gives
// one node's greedy text, token for token, and the device's hold on the
// weights is released when the shard stops.
func TestGPUStage(t *testing.T) {
	d, err := gpu.Open(0)
	if err != nil {
		if os.Getenv("STRATA_WANT_VULKAN") != "" {
			t.Fatalf("STRATA_WANT_VULKAN is set, and: %v", err)
		}
		t.Skipf("no Vulkan device: %v", err)
	}
	defer d.Close()
	store := oracle.Stories(t)
	prompt := "Once upon a time, there was a little girl named Lily."
	want := oracle.OneNode(t, store["stories260K"], engine.Request{Prompt: prompt, MaxTokens: 120})
	var held, released atomic.Int32
	var offloads []*gpu.Offload // written by the host's goroutine before the session runs
	lc := newLocalClusterWith(t, 3, 800e3, store, func(i int, c *HostConfig) {
		if i != 1 {
			return
		}
		c.Accelerate = func(m *model.Model, _ int) (model.Accelerator, func(), error) {
			o, err := d.OffloadLayers(m, gpu.AllLayers)
			if err != nil {
				return nil, nil, err
			}
			held.Add(1)
			offloads = append(offloads, o)
			return o, func() { o.Free(); released.Add(1) }, nil
		}
	})
	cl := lc.cluster(origin.Options{PlanContext: 512})
	if p, _, err := cl.Plan("stories260K"); err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v, %v; want 3 stages", p, err)
	}
	res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 120}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want.Tokens) {
		t.Fatalf("tokens differ from one node\n got %v\nwant %v", res.Tokens, want.Tokens)
	}
	if held.Load() != 1 {
		t.Fatalf("%d shards on the device, want 1", held.Load())
	}
	if c := offloads[0].Calls(); c == 0 {
		t.Fatal("the device computed no product")
	}
	cl.Close()
	// The shard stops (as when evicted): the device lets its weights go.
	h := lc.hosts[1]
	h.mu.Lock()
	var pids []*actor.PID
	for _, s := range h.shards {
		pids = append(pids, s.pid)
	}
	h.mu.Unlock()
	for _, p := range pids {
		if err := lc.system.Root.StopFuture(p).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if released.Load() != held.Load() {
		t.Errorf("the device still holds %d shards' weights after they stopped", held.Load()-released.Load())
	}
}

package stage

import (
	"context"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/runtime/engine"
	"strata/runtime/gpu"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

// TestGPUStage: a 3-stage pipeline whose middle node puts its shard's
// matrix products on a Vulkan device (the first: lavapipe in CI) gives
// one node's greedy text, token for token; the device's scratch is
// counted in the node's memory while the shard lives, and the device's
// hold on the weights and that memory are released when the shard stops.
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
	var scratch uint64
	lc := newLocalClusterWith(t, 3, 800e3, store, func(i int, c *HostConfig) {
		if i != 1 {
			return
		}
		c.Accelerate = func(m *model.Model, rows int, _ uint64) (Acceleration, error) {
			o, err := d.OffloadLayers(m, gpu.AllLayers)
			if err != nil {
				return Acceleration{}, err
			}
			held.Add(1)
			offloads = append(offloads, o)
			scratch = o.MemoryBytes(rows)
			return Acceleration{Acc: o, Release: func() { o.Free(); released.Add(1) }, Bytes: scratch}, nil
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
	var weights uint64
	for _, s := range h.shards {
		pids = append(pids, s.pid)
		weights += s.weightBytes
	}
	h.mu.Unlock()
	if used, dev := h.UsedBytes(), h.DeviceUsedBytes(); scratch == 0 || used < weights || dev != scratch {
		t.Errorf("the node counts %d bytes for %d of weights, and %d for the device's %d of scratch", used, weights, dev, scratch)
	}
	for _, p := range pids {
		if err := lc.system.Root.StopFuture(p).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if released.Load() != held.Load() {
		t.Errorf("the device still holds %d shards' weights after they stopped", held.Load()-released.Load())
	}
	// The host forgets a stopped shard when it hears of the stop (its
	// Terminated), a moment after the shard itself stopped.
	for deadline := time.Now().Add(5 * time.Second); h.UsedBytes() != 0 || h.DeviceUsedBytes() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes, and %d of the device's, still counted after the node's shards stopped", h.UsedBytes(), h.DeviceUsedBytes())
		}
	}
}

// TestDeviceScratchOverTheBudget: a device whose scratch is over what the
// node keeps for devices (HostConfig.DeviceBytes) is released at once,
// and the shard runs on the CPU (one node's text), its scratch not
// counted.
func TestDeviceScratchOverTheBudget(t *testing.T) {
	store := oracle.Stories(t)
	prompt := "Once upon a time, there was a little girl named Lily."
	want := oracle.OneNode(t, store["stories260K"], engine.Request{Prompt: prompt, MaxTokens: 40})
	var offered, released atomic.Int32
	var acc countingAccelerator
	lc := newLocalClusterWith(t, 3, 800e3, store, func(i int, c *HostConfig) {
		c.DeviceBytes = 100e3
		c.Accelerate = func(m *model.Model, rows int, free uint64) (Acceleration, error) {
			offered.Add(1)
			return Acceleration{Acc: &acc, Release: func() { released.Add(1) }, Bytes: free + 1}, nil
		}
	})
	cl := lc.cluster(origin.Options{PlanContext: 512})
	res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 40}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want.Tokens) {
		t.Fatalf("tokens differ from one node\n got %v\nwant %v", res.Tokens, want.Tokens)
	}
	if offered.Load() == 0 || released.Load() != offered.Load() || acc.calls.Load() != 0 {
		t.Errorf("%d shards offered to the device, %d released, %d products asked of it", offered.Load(), released.Load(), acc.calls.Load())
	}
	for i, h := range lc.hosts {
		if dev := h.DeviceUsedBytes(); dev != 0 {
			t.Errorf("node %d counts %d bytes of device scratch", i, dev)
		}
	}
}

// countingAccelerator holds no matrix and counts the products asked of it.
type countingAccelerator struct{ calls atomic.Int64 }

func (a *countingAccelerator) MatMul([]float32, tensor.Matrix, []float32, int) (bool, error) {
	a.calls.Add(1)
	return false, nil
}

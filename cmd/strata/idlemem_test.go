package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReturnMemoryWhenIdle: memory goes back once per idle period, not
// while sessions run, and again after the next busy spell.
func TestReturnMemoryWhenIdle(t *testing.T) {
	var busy atomic.Bool
	var frees, wakes atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	busy.Store(true)
	go func() {
		returnMemoryWhenIdle(ctx, busy.Load, func(idle bool) {
			if idle {
				frees.Add(1)
			} else {
				wakes.Add(1)
			}
		}, 30*time.Millisecond, 2*time.Millisecond)
		close(done)
	}()
	waitFor := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for frees.Load() != want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := frees.Load(); got != want {
			t.Fatalf("%d frees, want %d", got, want)
		}
	}
	time.Sleep(100 * time.Millisecond)
	waitFor(0) // busy all along
	busy.Store(false)
	waitFor(1)
	time.Sleep(100 * time.Millisecond)
	waitFor(1) // once per idle period
	busy.Store(true)
	time.Sleep(20 * time.Millisecond)
	if wakes.Load() != 1 {
		t.Fatalf("%d wakes after the first busy spell, want 1", wakes.Load())
	}
	busy.Store(false)
	waitFor(2)
	cancel()
	<-done
	if wakes.Load() != 2 {
		t.Fatalf("%d wakes after the node stopped idle, want 2 (the busy target back)", wakes.Load())
	}
}

// TestIdleHeapKeepsTheHeapTight: an idle node's collector target is
// idleGCPercent, and the busy one comes back when it is busy again.
func TestIdleHeapKeepsTheHeapTight(t *testing.T) {
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	idle := idleHeap()
	idle(false) // busy before it was ever idle: nothing to restore
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC %d before the node was idle, want 100", got)
	}
	idle(true)
	if got := debug.SetGCPercent(idleGCPercent); got != idleGCPercent {
		t.Fatalf("GOGC %d while idle, want %d", got, idleGCPercent)
	}
	idle(false)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC %d once busy again, want the busy 100", got)
	}
	// GOGC=off (-1) comes back too.
	debug.SetGCPercent(-1)
	idle(true)
	idle(false)
	if got := debug.SetGCPercent(100); got != -1 {
		t.Fatalf("GOGC %d once busy again, want off (-1) as it was", got)
	}
}

// TestReturnHeapFreesPooledBuffers: what a sync.Pool holds when the node
// goes idle is given back too (one collection only moves it to the
// pool's victim cache).
func TestReturnHeapFreesPooledBuffers(t *testing.T) {
	var pool sync.Pool
	returnHeap()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	buf := make([]byte, 64<<20)
	pool.Put(&buf)
	returnHeap()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("a pooled 64 MiB buffer still holds %d MiB of heap after returnHeap", grew>>20)
	}
	runtime.KeepAlive(&pool)
}

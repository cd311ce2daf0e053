package main

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReturnMemoryWhenIdle: memory goes back once per idle period, not
// while sessions run, and again after the next busy spell.
func TestReturnMemoryWhenIdle(t *testing.T) {
	var busy atomic.Bool
	var frees atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	busy.Store(true)
	go func() {
		returnMemoryWhenIdle(ctx, busy.Load, func() { frees.Add(1) }, 30*time.Millisecond, 2*time.Millisecond)
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
	busy.Store(false)
	waitFor(2)
	cancel()
	<-done
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

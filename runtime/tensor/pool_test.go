package tensor

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolCoverage checks that Run covers [0,n) exactly once with at most
// Threads() contiguous, non-empty chunks, for sizes around the thread count.
func TestPoolCoverage(t *testing.T) {
	for _, threads := range []int{-1, 0, 1, 2, 3, 4, 7} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 100, 1001} {
			hits := make([]int32, n)
			var calls atomic.Int32
			var mu sync.Mutex
			var chunks [][2]int
			p.Run(n, func(lo, hi int) {
				calls.Add(1)
				if lo >= hi || lo < 0 || hi > n {
					t.Errorf("threads %d n %d: bad chunk [%d,%d)", threads, n, lo, hi)
					return
				}
				mu.Lock()
				chunks = append(chunks, [2]int{lo, hi})
				mu.Unlock()
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads %d n %d: index %d covered %d times", threads, n, i, h)
				}
			}
			want := min(n, p.Threads())
			if int(calls.Load()) != want {
				t.Errorf("threads %d n %d: %d calls, want %d (chunks %v)", threads, n, calls.Load(), want, chunks)
			}
		}
		if threads > 0 && p.Threads() != threads {
			t.Errorf("Threads() = %d, want %d", p.Threads(), threads)
		}
		p.Close()
		p.Close() // idempotent
		// After Close, Run still works, serially.
		var sum int
		p.Run(10, func(lo, hi int) { sum += hi - lo })
		if sum != 10 {
			t.Errorf("Run after Close covered %d", sum)
		}
	}
}

func TestNilPool(t *testing.T) {
	var p *Pool
	if p.Threads() != 1 {
		t.Errorf("nil Threads() = %d", p.Threads())
	}
	var got [][2]int
	p.Run(5, func(lo, hi int) { got = append(got, [2]int{lo, hi}) })
	p.Run(0, func(lo, hi int) { t.Error("called for n=0") })
	if len(got) != 1 || got[0] != [2]int{0, 5} {
		t.Errorf("nil Run chunks %v", got)
	}
	p.Close()
}

func TestPoolPanic(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for _, bad := range []int{0, 5, 9} { // in the caller's chunk and in workers'
		var done atomic.Int32
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("bad index %d: recovered %v, want boom", bad, r)
				}
			}()
			p.Run(10, func(lo, hi int) {
				defer done.Add(1)
				if lo <= bad && bad < hi {
					panic("boom")
				}
			})
		}()
		if done.Load() != 3 {
			t.Errorf("bad index %d: Run returned before all chunks finished (%d)", bad, done.Load())
		}
	}
	// The pool is still usable.
	var n atomic.Int32
	p.Run(6, func(lo, hi int) { n.Add(int32(hi - lo)) })
	if n.Load() != 6 {
		t.Errorf("after panic covered %d", n.Load())
	}
}

// TestPoolConcurrentCallers runs Run from several goroutines at once.
func TestPoolConcurrentCallers(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				var s atomic.Int64
				n := 10 + g
				p.Run(n, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						s.Add(int64(i))
					}
				})
				if s.Load() != int64(n*(n-1)/2) {
					t.Errorf("sum %d", s.Load())
					return
				}
			}
		}()
	}
	wg.Wait()
}

type summer struct{ x, part []float32 }

func (s *summer) run(lo, hi int) {
	var acc float32
	for _, v := range s.x[lo:hi] {
		acc += v
	}
	s.part[lo] = acc
}

func TestPoolRunNoAlloc(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	s := &summer{x: make([]float32, 1000), part: make([]float32, 1000)}
	fn := s.run // bound once: a func value reused across Runs costs nothing
	if a := testing.AllocsPerRun(100, func() { p.Run(1000, fn) }); a != 0 {
		t.Errorf("%v allocations per Run", a)
	}
}

// TestPoolRunsWithoutItsWorkers parks the workers and then runs with the
// wake-ups dropped, as happened under qemu (a store passing a later load),
// and as a worker that the OS does not schedule for a while looks: the Run
// must not wait for them — the caller takes every chunk itself, each once.
func TestPoolRunsWithoutItsWorkers(t *testing.T) {
	p := NewPool(3)          // closed only on success: Close would wait for a hung Run
	time.Sleep(20 * spinFor) // the workers stop spinning and park
	dropWakeups = true
	defer func() { dropWakeups = false }()
	var ran [3]atomic.Int32
	done := make(chan struct{})
	go func() {
		p.Run(3, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				ran[i].Add(1)
			}
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run with dropped wake-ups did not finish: it waited for workers that were never woken")
	}
	p.Close()
	for i := range ran {
		if n := ran[i].Load(); n != 1 {
			t.Errorf("index %d ran %d times, want 1", i, n)
		}
	}
}

// TestPoolEach: every item runs once, on a worker index below the workers
// asked for (and 0 without a pool, with one worker or after Close), for
// more and fewer items than workers; a panic in an item reaches the
// caller after the other items are done, and the pool stays usable.
func TestPoolEach(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 4} {
		p := NewPool(threads)
		for _, workers := range []int{1, 2, 3, 8} {
			for _, items := range []int{0, 1, 2, 5, 100} {
				hits := make([]int32, items)
				var bad atomic.Int32
				p.Each(workers, items, func(w, i int) {
					if w < 0 || w >= workers || (threads == 1 || workers == 1) && w != 0 {
						bad.Add(1)
					}
					atomic.AddInt32(&hits[i], 1)
				})
				for i, h := range hits {
					if h != 1 {
						t.Fatalf("threads %d workers %d items %d: item %d ran %d times", threads, workers, items, i, h)
					}
				}
				if bad.Load() != 0 {
					t.Errorf("threads %d workers %d items %d: %d items on a worker index out of range", threads, workers, items, bad.Load())
				}
			}
		}
		var done atomic.Int32
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("threads %d: recovered %v, want boom", threads, r)
				}
			}()
			p.Each(threads, 10, func(_, i int) {
				if i == 7 {
					panic("boom")
				}
				done.Add(1)
			})
		}()
		if threads > 1 && done.Load() != 9 {
			t.Errorf("threads %d: Each returned with %d of the other 9 items done", threads, done.Load())
		}
		var n atomic.Int32
		p.Each(threads, 6, func(_, i int) { n.Add(1) })
		if n.Load() != 6 {
			t.Errorf("threads %d: after a panic %d of 6 items ran", threads, n.Load())
		}
		p.Close()
		var after []int
		p.Each(threads, 3, func(w, i int) { after = append(after, w) })
		if len(after) != 3 || after[0]+after[1]+after[2] != 0 {
			t.Errorf("threads %d: Each after Close ran on workers %v, want 0, 0, 0", threads, after)
		}
	}
	var nilPool *Pool
	var ran int
	nilPool.Each(4, 5, func(w, i int) { ran += 1 + w })
	if ran != 5 {
		t.Errorf("a nil pool ran %d items on worker 0 (want 5)", ran)
	}
}

func TestPoolEachNoAlloc(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var sum atomic.Int64
	fn := func(_, i int) { sum.Add(int64(i)) } // bound once
	if a := testing.AllocsPerRun(100, func() { p.Each(2, 100, fn) }); a != 0 {
		t.Errorf("%v allocations per Each", a)
	}
}

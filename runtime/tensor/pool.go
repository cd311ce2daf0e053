package tensor

import (
	"runtime"
	"sync"
)

// Pool is a set of persistent worker goroutines that run data-parallel
// kernels. One Run executes at a time (concurrent callers wait their turn);
// fn must not call Run on the same pool. A nil *Pool is valid and runs
// everything serially on the caller's goroutine.
type Pool struct {
	threads int
	wake    []chan struct{} // one per worker goroutine (threads-1 of them)
	exited  sync.WaitGroup  // worker goroutines still running

	mu       sync.Mutex // serialises Run and the fields below
	closed   bool
	fn       func(lo, hi int)
	n        int
	chunks   int
	done     sync.WaitGroup
	pmu      sync.Mutex // guards panicked (workers write it concurrently)
	panicked any

	job   matJob           // MatMul's arguments, set under mu
	jobFn func(lo, hi int) // job.run, bound once so dispatch does not allocate

	actJob actJob           // MatMulAct's arguments, set under mu
	actFn  func(lo, hi int) // actJob.run, bound once
}

// NewPool starts a pool of threads workers (the caller of Run counts as one
// of them, so threads-1 goroutines are started). threads <= 0 means
// runtime.GOMAXPROCS(0). Call Close to stop the goroutines.
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1)}
	p.jobFn = p.job.run
	p.actFn = p.actJob.run
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		p.exited.Add(1)
		go p.worker(i + 1)
	}
	return p
}

// Threads returns the number of workers, counting the caller of Run; 1 for
// a nil Pool.
func (p *Pool) Threads() int {
	if p == nil {
		return 1
	}
	return p.threads
}

// Run splits [0, n) into at most Threads() contiguous chunks of near-equal
// size and calls fn(lo, hi) once per non-empty chunk, on the workers and on
// the caller's goroutine, returning when all calls have returned. Chunk k
// is [k*n/c, (k+1)*n/c) for c chunks. If a call panics, Run panics with the
// same value after every chunk has finished. After Close, and on a nil
// Pool, Run calls fn(0, n) directly.
//
// Run allocates nothing itself, but fn is handed to other goroutines, so a
// closure literal that captures variables is heap-allocated by the caller
// on every call; hot paths bind fn once (say, a method value kept in a
// struct) and reuse it, as MatVec does.
func (p *Pool) Run(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if p == nil || p.threads == 1 {
		fn(0, n)
		return
	}
	p.mu.Lock()
	r := p.runLocked(n, fn)
	p.mu.Unlock()
	if r != nil {
		panic(r)
	}
}

// runLocked is Run with p.mu held; it returns the value of a panic in fn
// instead of panicking, so callers can restore state first.
func (p *Pool) runLocked(n int, fn func(lo, hi int)) any {
	if n <= 0 {
		return nil
	}
	chunks := min(n, p.threads)
	if p.closed {
		chunks = 1
	}
	p.fn, p.n, p.chunks = fn, n, chunks
	p.done.Add(chunks - 1)
	for k := 1; k < chunks; k++ {
		p.wake[k-1] <- struct{}{}
	}
	p.chunk(0)
	p.done.Wait()
	p.fn = nil
	r := p.panicked
	p.panicked = nil
	return r
}

// chunk runs chunk k of the current Run, recording a panic instead of
// letting it kill the worker goroutine.
func (p *Pool) chunk(k int) {
	defer func() {
		if r := recover(); r != nil {
			p.pmu.Lock()
			if p.panicked == nil {
				p.panicked = r
			}
			p.pmu.Unlock()
		}
	}()
	lo, hi := k*p.n/p.chunks, (k+1)*p.n/p.chunks
	if lo < hi {
		p.fn(lo, hi)
	}
}

func (p *Pool) worker(k int) {
	defer p.exited.Done()
	for range p.wake[k-1] {
		p.chunk(k)
		p.done.Done()
	}
}

// Close stops the worker goroutines and waits for them to exit. It waits
// for a Run in progress; later Runs execute serially. Close is idempotent
// and a no-op on a nil Pool.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		for _, c := range p.wake {
			close(c)
		}
	}
	p.mu.Unlock()
	p.exited.Wait()
}

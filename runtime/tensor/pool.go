package tensor

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a set of persistent worker goroutines that run data-parallel
// kernels. One Run executes at a time (concurrent callers wait their turn);
// fn must not call Run on the same pool. A nil *Pool is valid and runs
// everything serially on the caller's goroutine.
//
// A decode step runs a few hundred short Runs back to back, so waking a
// parked goroutine for each (an OS thread wake-up, slow when the cores are
// busy) would dominate: after a Run, workers spin for a short while
// (spinFor) watching for the next one, then park.
type Pool struct {
	threads int
	wake    []chan struct{} // one per worker goroutine (threads-1 of them)
	parked  []atomic.Int32  // 1 while worker k+1 is (about to be) blocked on wake[k]
	exited  sync.WaitGroup  // worker goroutines still running

	// gen is the Run generation: a counter times genChunks plus the Run's
	// chunk count (0 after Close: exit). A change tells workers to look.
	gen atomic.Uint64
	_   [56]byte // claim and pending, written per chunk, on another cache line than gen, which idle workers poll
	// claim hands out the current Run's chunks: the Run's number in the
	// high 32 bits, its chunk count in the next 16, the next chunk to take
	// in the low 16. Whoever takes chunk k (a worker, or the caller once
	// its own are done) runs it, so a Run never waits for a worker that
	// has not been scheduled yet — on a core shared with other processes
	// (co-located nodes at the default --threads) that wait was a whole
	// time slice per product. The Run's number makes a worker that looked
	// at one Run and resumed in the next fail its compare-and-swap.
	claim   atomic.Uint64
	pending atomic.Int32 // chunks of the current Run not yet finished

	mu       sync.Mutex // serialises Run and the fields below
	runs     uint32     // Runs started, for claim
	closed   bool
	fn       func(lo, hi int)
	n        int
	chunks   int
	pmu      sync.Mutex // guards panicked (workers write it concurrently)
	panicked any

	job   matJob           // MatMul's arguments, set under mu
	jobFn func(lo, hi int) // job.run, bound once so dispatch does not allocate

	actJob actJob         // MatMulAct's arguments, set under mu
	actFn  func(w, i int) // actJob.rows, bound once

	each   eachJob          // Each's items, set under mu
	eachFn func(lo, hi int) // each.run, bound once
}

// spinFor is how long an idle worker (and a caller waiting for workers)
// polls before blocking.
const spinFor = 100 * time.Microsecond

// genChunks is the factor of gen's counter; chunk counts stay below it.
const genChunks = 1 << 16

// NewPool starts a pool of threads workers (the caller of Run counts as one
// of them, so threads-1 goroutines are started). threads <= 0 means
// runtime.GOMAXPROCS(0). Call Close to stop the goroutines.
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	threads = min(threads, genChunks-1)
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1), parked: make([]atomic.Int32, threads-1)}
	p.each.spans = make([]atomic.Uint64, threads)
	p.jobFn = p.job.run
	p.actFn = p.actJob.rows
	p.eachFn = p.each.run
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
// the caller's goroutine (the caller runs chunk 0, then any chunk no worker
// has taken yet), returning when all calls have returned. Chunk k
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

// Each calls fn(w, i) once for every item i in [0, items), on up to
// workers of the pool's workers, returning when all calls have returned:
// worker w (0 <= w < workers, the index of its scratch) takes the items
// of its own equal share in order, then takes the last items left in
// the others' shares until none is left, so a worker that starts late
// (its core busy with something else) leaves its share to the others,
// and a worker runs neighbouring items one after another (what the batch
// kernels count on when they hint a chunk's next rows into the cache).
// Which worker runs an item must not change the item's result. On a nil
// Pool, with one worker or one thread, the caller runs every item as
// worker 0. Panics as Run does; like Run it allocates nothing itself (bind
// fn once on hot paths).
func (p *Pool) Each(workers, items int, fn func(w, i int)) {
	if items <= 0 {
		return
	}
	if p == nil || p.threads == 1 || workers <= 1 || items == 1 {
		for i := range items {
			fn(0, i)
		}
		return
	}
	p.mu.Lock()
	r := p.eachLocked(workers, items, fn)
	p.mu.Unlock()
	if r != nil {
		panic(r)
	}
}

// eachLocked is Each with p.mu held, returning a panic's value as
// runLocked does.
func (p *Pool) eachLocked(workers, items int, fn func(w, i int)) any {
	ws := min(workers, items, p.threads)
	p.each.fn, p.each.shares = fn, ws
	for w := range ws {
		p.each.spans[w].Store(span(w*items/ws, (w+1)*items/ws))
	}
	r := p.runLocked(ws, p.eachFn)
	p.each.fn = nil
	return r
}

// eachJob holds Each's items in the Pool: a chunk of the Run is a worker
// index (a run of them where the Run has fewer chunks, after Close), whose
// call takes the items of its share from the front, then the others'
// from the back, until none is left.
type eachJob struct {
	fn     func(w, i int)
	shares int
	spans  []atomic.Uint64 // per share, the items left: span(next, end)
}

// span packs the items [next, end) of a share into one word (items stay
// below 2^32: chunks of rows, heads, experts), so that the front (its
// worker) and the back (the others) are taken by one compare-and-swap.
func span(next, end int) uint64 { return uint64(end)<<32 | uint64(next) }

func (j *eachJob) run(lo, hi int) {
	for k := lo; k < hi; k++ {
		s := &j.spans[k]
		for v := s.Load(); uint32(v) < uint32(v>>32); v = s.Load() {
			if s.CompareAndSwap(v, v+1) {
				j.fn(lo, int(uint32(v)))
			}
		}
	}
	for d := 1; d < j.shares; d++ {
		s := &j.spans[(lo+d)%j.shares]
		for v := s.Load(); uint32(v) < uint32(v>>32); v = s.Load() {
			if s.CompareAndSwap(v, v-1<<32) {
				j.fn(lo, int(v>>32)-1)
			}
		}
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
	if chunks == 1 {
		p.chunk(0)
	} else {
		// Chunk 0 is the caller's (the workers' counter starts at 1),
		// so its own first chunk costs no compare-and-swap.
		p.runs++
		p.pending.Store(int32(chunks))
		p.claim.Store(uint64(p.runs)<<32 | uint64(chunks)<<16 | 1)     // publishes fn, n, chunks
		p.gen.Add(genChunks - p.gen.Load()%genChunks + uint64(chunks)) // tells the workers
		if !dropWakeups {
			p.wakeParked(chunks)
		}
		p.chunk(0)
		p.pending.Add(-1)
		p.work()
		p.waitPending()
	}
	p.fn = nil
	r := p.panicked
	p.panicked = nil
	return r
}

// work takes chunks of the current Run and runs them until none is left.
func (p *Pool) work() {
	for {
		v := p.claim.Load()
		k, chunks := v&0xffff, v>>16&0xffff
		if k >= chunks {
			return
		}
		if p.claim.CompareAndSwap(v, v+1) {
			p.chunk(int(k))
			p.pending.Add(-1)
		}
	}
}

// waitPending waits for the chunks that workers took and are still
// running: spinning first, then yielding.
func (p *Pool) waitPending() {
	deadline := time.Now().Add(spinFor)
	for i := 0; p.pending.Load() != 0; i++ {
		if i&63 == 63 && time.Now().After(deadline) {
			runtime.Gosched()
		}
	}
}

// dropWakeups makes Run skip its wake-ups, as a weak emulator may in
// effect (qemu running arm64 code on an x86 host was seen to let a store
// pass a later load and park a worker past its wake-up); tests set it to
// check that the caller then runs every chunk itself.
var dropWakeups bool

// wakeParked hands a wake-up token to each worker below chunks that is
// marked parked.
func (p *Pool) wakeParked(chunks int) {
	for k := 1; k < chunks; k++ {
		if p.parked[k-1].CompareAndSwap(1, 0) {
			p.wake[k-1] <- struct{}{}
		}
	}
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
	seen := uint64(0)
	for {
		seen = p.await(k, seen)
		chunks := int(seen % genChunks)
		if chunks == 0 {
			return // closed
		}
		p.work()
	}
}

// await returns the pool's generation once it differs from seen: it spins
// for spinFor, then parks on worker k's channel. The dispatcher bumps the
// generation before looking at parked, and a worker marks itself parked
// before its last look at the generation, so a wake-up is never missed.
// The mark is a Swap, not a Store: a read-modify-write is a full fence on
// every host, so the look cannot be hoisted above it even where plain
// atomic stores are emulated weakly (see waitPending).
func (p *Pool) await(k int, seen uint64) uint64 {
	deadline := time.Now().Add(spinFor)
	for i := 0; ; i++ {
		if g := p.gen.Load(); g != seen {
			return g
		}
		if i&63 == 63 && time.Now().After(deadline) {
			break
		}
	}
	for {
		p.parked[k-1].Swap(1)
		if g := p.gen.Load(); g != seen {
			if !p.parked[k-1].CompareAndSwap(1, 0) {
				<-p.wake[k-1] // the dispatcher saw us parked and sent a token
			}
			return g
		}
		<-p.wake[k-1]
		if g := p.gen.Load(); g != seen {
			return g
		}
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
		p.gen.Add(genChunks - p.gen.Load()%genChunks) // chunk count 0: exit
		for k := range p.wake {
			if p.parked[k].CompareAndSwap(1, 0) {
				p.wake[k] <- struct{}{}
			}
		}
	}
	p.mu.Unlock()
	p.exited.Wait()
}

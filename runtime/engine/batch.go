package engine

import (
	"errors"
	"fmt"
	"sync"

	"strata/runtime/model"
)

// Continuous batching on one node. Every generation's forward passes go
// through the engine's batcher: one goroutine that owns a State and, at
// each step, runs the decoded tokens of up to Model.InvariantRows
// generations as one ForwardBatch, so the weights are read once for all
// of them. Generations arrive and leave at any step. A prompt chunk runs
// alone, in its turn (first come, first served): a batch of more rows
// takes the batch kernels, whose sums would make a generation's tokens
// depend on its company. Within the bound every row is computed as it
// would be alone, so they do not.

// errClosed answers work sent to a closed engine.
var errClosed = errors.New("engine: closed")

// work is one generation's rows for the next step: tokens at positions
// cache.Len.., and where the logits of the last row go.
type work struct {
	cache  *model.Cache
	tokens []int
	logits []float32 // filled with the last row's logits (every row's, with every)
	every  bool      // the logits of every row, row after row (speculative verification)
	done   chan error
}

// batcher runs the steps of every generation of an engine.
type batcher struct {
	st    *model.State
	rows  int // the most rows one step runs (the State's batch)
	limit int // the most one-token steps run together (Model.InvariantRows)

	mu      sync.Mutex
	pending []*work
	wake    chan struct{}
	closed  bool
	stopped chan struct{}

	// Scratch of one step, reused.
	segs []model.Segment
	toks []int
	ran  []*work

	// Counters, under mu: steps run and rows they carried.
	steps, rowsRun int64
}

// newBatcher starts the batcher of st, whose Batch bounds a step's rows;
// limit bounds the one-token steps it runs together.
func newBatcher(st *model.State, limit int) *batcher {
	b := &batcher{st: st, rows: st.Batch, limit: max(1, min(limit, st.Batch)), wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go b.run()
	return b
}

// do runs w's tokens (at most rows of them) in a coming step and waits
// for it.
func (b *batcher) do(w *work) error {
	if len(w.tokens) < 1 || len(w.tokens) > b.rows {
		return fmt.Errorf("engine: a step of %d tokens; 1..%d allowed", len(w.tokens), b.rows)
	}
	if room := min(w.cache.Capacity, b.st.Capacity()) - w.cache.Len; len(w.tokens) > room {
		return fmt.Errorf("engine: context full: %d + %d positions exceed %d", w.cache.Len, len(w.tokens), w.cache.Len+room)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errClosed
	}
	b.pending = append(b.pending, w)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return <-w.done
}

// close stops the batcher once the work sent before runs; later work is
// refused.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	<-b.stopped
}

// stats returns the steps run and the rows they carried.
func (b *batcher) stats() (steps, rows int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.steps, b.rowsRun
}

func (b *batcher) run() {
	defer close(b.stopped)
	for {
		b.mu.Lock()
		for len(b.pending) == 0 {
			if b.closed {
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
			<-b.wake
			b.mu.Lock()
		}
		// First come, first served: the oldest work first; a prompt
		// chunk alone, or with it the oldest other one-token steps, up to
		// the limit. The rest waits for the next step.
		b.ran, b.segs, b.toks = b.ran[:0], b.segs[:0], b.toks[:0]
		rest := b.pending[:0]
		n := 0
		alone := len(b.pending[0].tokens) > 1
		for _, w := range b.pending {
			if len(b.ran) > 0 && (alone || len(w.tokens) > 1 || len(b.ran) == b.limit) {
				rest = append(rest, w)
				continue
			}
			b.ran = append(b.ran, w)
			b.segs = append(b.segs, model.Segment{Cache: w.cache, N: len(w.tokens)})
			b.toks = append(b.toks, w.tokens...)
			n += len(w.tokens)
		}
		clear(b.pending[len(rest):])
		b.pending = rest
		b.steps++
		b.rowsRun += int64(n)
		b.mu.Unlock()
		b.step()
	}
}

// step runs the collected work as one forward pass and answers it.
func (b *batcher) step() {
	err := b.st.Embed(b.toks)
	if err == nil {
		err = b.st.ForwardBatch(b.segs)
	}
	row := 0
	for _, w := range b.ran {
		row += len(w.tokens)
		werr := err
		switch {
		case werr != nil:
		case w.every:
			werr = b.st.LogitsRows(row-len(w.tokens), len(w.tokens), w.logits)
		default:
			var logits []float32
			if logits, werr = b.st.LogitsOf(row - 1); werr == nil {
				copy(w.logits, logits)
			}
		}
		w.done <- werr
	}
}

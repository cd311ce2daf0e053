package engine

import (
	"errors"
	"fmt"
	"sync"

	"strata/runtime/model"
)

// Continuous batching on one node. Every generation's forward passes go
// through the engine's batcher: one goroutine that owns a State and, at
// each step, runs the work of several generations (decoded tokens,
// prompt chunks, speculative checks) as one ForwardBatch of up to
// Model.InvariantRows rows, so the weights are read once for all of them.
// Generations arrive and leave at any step. Within the bound every row is
// computed as it would be alone, so a generation's tokens do not depend
// on its company; a model of Q4_K/Q5_K/Q6_K matrices has no bound (up to
// the State's rows), so a prompt chunk shares its step with others'
// decoding instead of stalling it. Work of more rows than the bound (a
// prompt chunk of a float or Q8_0 model) runs alone, in its turn.

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
	limit int // the most rows run together (Model.InvariantRows, at most rows)

	mu      sync.Mutex
	pending []*work
	wake    chan struct{}
	closed  bool
	stopped chan struct{}

	// Scratch of one step, reused.
	segs []model.Segment
	toks []int
	ran  []*work
	// The rows sampled in a step and their logits.
	vocab  int
	last   []int
	logits []float32

	// Counters, under mu: steps run, rows they carried, and steps where
	// work of several rows (a prompt chunk, a speculative check) ran in
	// company.
	steps, rowsRun, mixed int64
}

// newBatcher starts the batcher of st, whose Batch bounds a step's rows;
// limit bounds the rows of the work it runs together; vocab is the
// model's vocabulary size (a row of logits).
func newBatcher(st *model.State, vocab, limit int) *batcher {
	b := &batcher{st: st, vocab: vocab, rows: st.Batch, limit: max(1, min(limit, st.Batch)), wake: make(chan struct{}, 1), stopped: make(chan struct{})}
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

// stats returns the steps run, the rows they carried, and the steps that
// ran work of several rows in company.
func (b *batcher) stats() (steps, rows, mixed int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.steps, b.rowsRun, b.mixed
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
		// First come, first served: the oldest work first, then the
		// others that fit within the limit, in order; work of more rows
		// than the limit only alone. The rest waits for the next step.
		b.ran, b.segs, b.toks = b.ran[:0], b.segs[:0], b.toks[:0]
		rest := b.pending[:0]
		n := 0
		for _, w := range b.pending {
			if len(b.ran) > 0 && n+len(w.tokens) > b.limit {
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
		if len(b.ran) > 1 && n > len(b.ran) {
			b.mixed++
		}
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
	for i := 0; i < len(b.ran); {
		// The next works that sample their last row get their logits
		// from one read of the output head (model.LogitsGroup at a time).
		b.last = b.last[:0]
		at := row
		for _, w := range b.ran[i:] {
			if w.every || len(b.last) == model.LogitsGroup {
				break
			}
			at += len(w.tokens)
			b.last = append(b.last, at-1)
		}
		var logits []float32
		lerr := err // a failure here is these works', not the later ones'
		if len(b.last) > 0 && err == nil {
			logits = b.logitsScratch(len(b.last))
			lerr = b.st.LogitsAt(b.last, logits)
		}
		for k := range max(1, len(b.last)) {
			w := b.ran[i]
			row += len(w.tokens)
			werr := lerr
			switch {
			case werr != nil:
			case w.every:
				werr = b.st.LogitsRows(row-len(w.tokens), len(w.tokens), w.logits)
			default:
				copy(w.logits, logits[k*b.vocab:(k+1)*b.vocab])
			}
			w.done <- werr
			i++
		}
	}
}

// logitsScratch returns room for the logits of n rows.
func (b *batcher) logitsScratch(n int) []float32 {
	need := n * b.vocab
	if cap(b.logits) < need {
		b.logits = make([]float32, need)
	}
	return b.logits[:need]
}

package engine

import (
	"errors"
	"fmt"
	"slices"
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
// decoding instead of stalling it: decoding first, then prompt chunks
// fill the step's rows, the last one split (collect). Work of more rows
// than the bound (a prompt chunk of a float or Q8_0 model) runs alone,
// in its turn.

// errClosed answers work sent to a closed engine.
var errClosed = errors.New("engine: closed")

// work is one generation's rows for the next step: tokens at positions
// cache.Len.., and where the logits of the last row go.
type work struct {
	cache  *model.Cache
	tokens []int     // the batcher advances it past the rows of a split chunk it ran
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

	// The prompt chunk split by this step (collect), and its rows in it.
	split     *work
	splitRows int
	take      []bool

	// Counters, under mu: steps run, rows they carried, steps where work
	// of several rows (a prompt chunk, a speculative check) ran in
	// company, and prompt chunks split to fill a step.
	steps, rowsRun, mixed, splits int64
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
		n := b.collect()
		b.steps++
		b.rowsRun += int64(n)
		if works := len(b.ran) + min(b.splitRows, 1); works > 1 && n > works {
			b.mixed++
		}
		b.mu.Unlock()
		b.step()
	}
}

// collect takes the work of the next step from pending (b.mu held) into
// ran, segs and toks and returns its rows. Work of more rows than the
// limit runs alone when it is the oldest (and waits until it is). Else
// the step is filled in two passes, each in order of arrival: first
// decoding (one-token steps and speculative checks, whole), then prompt
// chunks, whole while they fit, and the first that does not fit takes the
// rows left (b.split: its first splitRows tokens run now, the rest stays
// in its place for a later step). So a long prompt shares every step
// with the others' decoding instead of taking turns with it, and
// decoding runs in every step. Splitting never changes a row: within the
// limit every row is computed as it is alone, and a chunk is split only
// where it is within the limit.
func (b *batcher) collect() int {
	b.ran, b.segs, b.toks = b.ran[:0], b.segs[:0], b.toks[:0]
	b.split, b.splitRows = nil, 0
	if cap(b.take) < len(b.pending) {
		b.take = make([]bool, len(b.pending), 2*len(b.pending))
	}
	b.take = b.take[:len(b.pending)]
	clear(b.take)
	n := 0
	if first := b.pending[0]; len(first.tokens) > b.limit {
		b.take[0], n = true, len(first.tokens)
	} else {
		for pass := range 2 {
			for i, w := range b.pending {
				prompt := len(w.tokens) > 1 && !w.every
				if b.take[i] || prompt != (pass == 1) || len(w.tokens) > b.limit {
					continue
				}
				switch room := b.limit - n; {
				case len(w.tokens) <= room:
					b.take[i] = true
					n += len(w.tokens)
				case prompt && room > 0 && b.split == nil:
					b.split, b.splitRows = w, room
					n += room
				}
			}
		}
	}
	rest := b.pending[:0]
	for i, w := range b.pending {
		if !b.take[i] {
			rest = append(rest, w)
			continue
		}
		b.ran = append(b.ran, w)
		b.segs = append(b.segs, model.Segment{Cache: w.cache, N: len(w.tokens)})
		b.toks = append(b.toks, w.tokens...)
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	// The split chunk's rows go last, after every row step answers.
	if w := b.split; w != nil {
		b.segs = append(b.segs, model.Segment{Cache: w.cache, N: b.splitRows})
		b.toks = append(b.toks, w.tokens[:b.splitRows]...)
		w.tokens = w.tokens[b.splitRows:]
		b.splits++
	}
	return n
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
	// A split chunk whose rows failed ends with them (its rest would run
	// at the wrong positions).
	if w := b.split; w != nil && err != nil {
		b.mu.Lock()
		b.pending = slices.DeleteFunc(b.pending, func(p *work) bool { return p == w })
		b.mu.Unlock()
		w.done <- err
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

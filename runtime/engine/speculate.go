package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"strata/runtime/sample"
	"strata/runtime/tokenizer"
)

// Speculative decoding. A step that feeds one token may instead feed it
// together with k guessed successors (drafted by n-gram lookup in the
// text so far, or by a small draft model of the same vocabulary) as one
// batch of k+1 rows: the weights are read once, so checking k guesses
// costs little more than one token. The target's sampler then draws the
// token of each row in order, exactly as it would one step at a time, and
// stops at the first draw that differs from the guess; every draw up to
// and including that one is a token of the answer, and the KV cache is
// cut back past the rejected guesses.
//
// For a guess that is one fixed token (an n-gram's continuation, or a
// draft model's greedy choice) this "draw and compare" rule is the
// rejection-sampling rule of speculative sampling: a guess d is kept with
// probability p(d), and otherwise the token is drawn from p without d.
// So the answer's distribution is the target's. More: the draws consume
// the sampler's random numbers in the same order and see the same logits
// (the batch-invariant forward pass gives every row the logits it gets
// alone), so with the same seed the answer is the one without
// speculation, token for token, greedy or not.
//
// Exactness needs the verification batch within Model.InvariantRows: k is
// capped there (no cap for a model of Q4_K/Q5_K/Q6_K matrices, nor for
// a float one on amd64; seven guesses for a Q8_0 one, two for a float one
// on arm64), and on a cluster within every stage's architecture's bound.

// Speculation sources (Request.Speculate, Options.Speculate).
const (
	SpeculateOff   = "off"
	SpeculateNGram = "ngram" // guesses from earlier occurrences of the last tokens
	SpeculateDraft = "draft" // guesses from the draft model (Options.Draft)
)

// CheckSpeculate checks a speculation source: "", off, ngram or draft.
func CheckSpeculate(s string) error {
	switch s {
	case "", SpeculateOff, SpeculateNGram, SpeculateDraft:
		return nil
	}
	return fmt.Errorf("speculation %q: want off, ngram or draft", s)
}

// maxDraft is the most tokens drafted for one step: the step's batch is
// one more, 16, a whole number of the batch kernels' passes (four or
// eight vectors; 17 took a fifth pass of four for one more guess, and
// the pipeline's draft ran 5-10 % slower). A cluster's Forward carries
// up to wire's MaxGuesses (16). At 8, stories260K retelling its story
// took 8 guesses in 8 of 29 checked steps and 6 of those were all right;
// at 16 it made 2.67 tokens a step, not 2.51, and an n-gram token on one
// node cost 36.1-36.8 µs, not 38.7-41.2 (in process, 2026-12-07). A
// step's guesses still adapt (Learn: kept+1 after a miss, doubling after
// a step of all right, up to this) and stay within the model's batch
// invariance bound (the caller's most).
const maxDraft = 15

// maxRest is the most steps speculation rests after repeated misses.
const maxRest = 32

// drafter proposes the tokens that follow seq.
type drafter interface {
	// draft appends to dst up to k tokens guessed to follow seq (the
	// prompt and every token of the answer so far).
	draft(dst, seq []int, k int) ([]int, error)
}

// ngramDrafter guesses by prompt lookup: the earlier occurrence of the
// longest run of the text's last tokens (at least ngramMin, at most
// ngramMax; the latest of equally long ones) and what followed it. Agents
// that edit code or quote documents, and stories that repeat themselves,
// reuse long spans. A match of n tokens guesses at most n-1: a short
// match is weak evidence, a long one a quoted span. (On stories260K
// retelling its story: 76 of 99 guesses right, where the latest match of
// the last 4 to 2 tokens, up to 8 guesses, got 73 of 113.)
type ngramDrafter struct{}

const (
	ngramMax = 64
	ngramMin = 2
)

func (ngramDrafter) draft(dst, seq []int, k int) ([]int, error) {
	last := len(seq) - 1
	best, from := 0, 0
	// Every earlier end e of a run equal to the text's last tokens:
	// seq[e-n:e] == seq[last+1-n:last+1], the run followed by seq[e].
	for e := last; e >= 1 && best < ngramMax; e-- {
		n := 0
		for n < min(e, ngramMax) && seq[e-1-n] == seq[last-n] {
			n++
		}
		if n > best {
			best, from = n, e
		}
	}
	if best < ngramMin {
		return dst, nil
	}
	k = min(k, best-1)
	return append(dst, seq[from:min(from+k, len(seq))]...), nil
}

// modelDrafter guesses with a draft model: greedy continuations from its
// own KV cache, which follows the answer (cut back to what it shares with
// the text, then fed the rest). The cache is made at the first guess (a
// generation that never guesses, in company, holds none) and holds up to
// capacity positions, at most the draft engine's context; a text longer
// than that gets no guesses.
//
// What it drafted stays in the cache as a chain: held is the text it was
// given (the first given tokens) and its greedy continuation, every one
// fed, and the logits are those after held's last. So when the text grows
// by tokens the chain foresaw (the target accepted every guess, and the
// draft also guessed the token the target drew after them, as after
// drafting ahead), the next guesses are read off the chain and only the
// rest is drafted.
type modelDrafter struct {
	d        *Engine
	capacity int
	held     []int // the tokens whose keys and values the cache holds
	given    int   // held[:given] came from a text, the rest was drafted
	w        work
	// stop ends a draft between two tokens (drafting ahead, stopped
	// because the text is known).
	stop atomic.Bool
}

func newModelDrafter(d *Engine, capacity int) *modelDrafter {
	return &modelDrafter{d: d, capacity: min(capacity, d.ctxLen)}
}

func (m *modelDrafter) draft(dst, seq []int, k int) ([]int, error) {
	k = min(k, m.capacity-len(seq))
	if k < 1 {
		return dst, nil
	}
	if m.w.cache == nil {
		m.w = work{cache: m.d.Model.NewCache(m.capacity), logits: make([]float32, m.d.Model.Vocab), done: make(chan error, 1)}
	}
	p := 0
	for p < len(m.held) && p < len(seq) && m.held[p] == seq[p] {
		p++
	}
	if p < len(seq) || len(seq) < m.given {
		// The text left the chain: cut the cache back to what they share
		// and feed the rest (the last token at least: its logits give the
		// first guess).
		p = min(p, len(seq)-1)
		m.held = append(m.held[:p], seq[p:]...)
		m.given = len(seq)
		m.w.cache.Len = p
		for i := p; i < len(seq); i += m.d.batch {
			m.w.tokens = seq[i:min(i+m.d.batch, len(seq))]
			if err := m.d.batcher.do(&m.w); err != nil {
				m.held, m.given = m.held[:0], 0
				return dst, err
			}
		}
	}
	// The chain past the text first, then greedy from the logits after
	// held's last token.
	start := len(dst)
	var one [1]int
	for n := 0; n < k && !m.stop.Load(); n = len(dst) - start {
		if i := len(seq) + n; i < len(m.held) {
			dst = append(dst, m.held[i])
			continue
		}
		t := sample.Greedy(m.w.logits)
		dst = append(dst, t)
		if n == k-1 {
			break
		}
		one[0] = t
		m.w.tokens = one[:]
		if err := m.d.batcher.do(&m.w); err != nil {
			m.held, m.given = m.held[:0], 0
			return dst, err
		}
		m.held = append(m.held, t)
	}
	return dst, nil
}

// ahead drafts n tokens past text in the background; the drafter and
// text are the goroutine's until its error comes on the channel it
// returns (m.stop ends it sooner).
func (m *modelDrafter) ahead(text []int, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := m.draft(nil, text, n)
		done <- err
	}()
	return done
}

// Speculator is one generation's guesser: a source of guesses, and how
// many to make, adapted to how many the model accepts. The engine and a
// cluster's session (strata/actors/origin) each drive one per generation.
type Speculator struct {
	src     drafter
	vocab   int // guesses are ids below it (a draft's embedding may be padded)
	most    int // the most guesses one step may check
	k       int // guesses for the next step
	guesses []int
	// Back-off: after a step whose only guess was wrong, the next rest
	// steps do not guess (a wrong guess costs the draft and a wider
	// step); rest doubles with each such miss, up to maxRest, and is
	// reset by a right guess.
	rest, resting int
	pace          *pacer
	// ahead is the error channel of the draft model's drafting ahead
	// while a step is checked (DraftAhead); nil when none runs.
	ahead <-chan error
	// Drafted counts the guesses checked, Accepted those the model
	// agreed with.
	Drafted, Accepted int
}

// NewSpeculator returns a guesser from source (ngram; draft, with draft,
// the draft model, whose own KV cache holds up to capacity positions) for
// a model of vocab tokens that makes at most most guesses a step; nil for
// "" or off, or when most < 1. The caller caps most at its batch
// invariance bound (Model.InvariantRows - 1) for the answer to stay exact.
func NewSpeculator(source string, draft *Engine, capacity, vocab, most int) (*Speculator, error) {
	var src drafter
	switch source {
	case "", SpeculateOff:
		return nil, nil
	case SpeculateNGram:
		src = ngramDrafter{}
	case SpeculateDraft:
		if draft == nil {
			return nil, errors.New("speculation from a draft model, but none was opened (--speculate draft:PATH, Options.Draft)")
		}
		src = newModelDrafter(draft, capacity)
	default:
		return nil, fmt.Errorf("unknown speculation source %q", source)
	}
	most = min(most, maxDraft)
	if most < 1 {
		return nil, nil
	}
	return &Speculator{src: src, vocab: vocab, most: most, k: most, pace: newPacer(time.Now)}, nil
}

// Tick tells the speculator that the generation handed out a token (any
// token, checked or not), and how many checked tokens wait to be handed
// out after it: it times the answer, to guess only where guessing is
// faster (pace.go).
func (sp *Speculator) Tick(waiting int) {
	if sp.pace != nil {
		sp.pace.tick(waiting)
	}
}

// GuessEveryStep turns the pacing off: the speculator guesses at every
// step, also where plain steps are faster.
func (sp *Speculator) GuessEveryStep() { sp.pace = nil }

// Plain is how many more tokens the generation runs without guesses
// because plain steps have been faster; 0 while it guesses. A cluster
// session uses the token shortcut for them.
func (sp *Speculator) Plain() int {
	if sp.pace == nil || !sp.pace.plain {
		return 0
	}
	return sp.pace.left()
}

// Most is the most guesses one step checks.
func (sp *Speculator) Most() int { return sp.most }

// Guess returns up to room guesses for the tokens after seq (the prompt
// and the answer so far, the last token not yet run); none while it
// rests after misses, while plain steps are faster (Plain), or when
// room < 1. The slice is reused by the next Guess. A source that fails
// (a draft model's error) guesses no more in
// this generation: the error is returned once, and the generation may go
// on without guesses.
func (sp *Speculator) Guess(seq []int, room int) ([]int, error) {
	if err := sp.settle(); err != nil {
		sp.src = nil
		return nil, err
	}
	k := min(sp.k, room)
	if sp.Plain() > 0 {
		return nil, nil
	}
	if sp.resting > 0 || k < 1 || sp.src == nil {
		sp.resting = max(0, sp.resting-1)
		return nil, nil
	}
	var err error
	sp.guesses, err = sp.src.draft(sp.guesses[:0], seq, k)
	if err != nil {
		sp.src = nil
		return nil, err
	}
	// Only ids of the model's vocabulary: a guess past it ends the run.
	for i, t := range sp.guesses {
		if t < 0 || t >= sp.vocab {
			sp.guesses = sp.guesses[:i]
			break
		}
	}
	return sp.guesses, nil
}

// DraftAhead lets a draft model go on drafting, in the background, past
// a step's text seq and the guesses it checks, while the target checks
// them elsewhere (a pipeline's stages): when the target accepts every
// guess and draws the token the draft foresaw after them, the next
// Guess reads its guesses off what was drafted meanwhile, and the draft
// is off the step's path. Drafting stops at the next Guess (between two
// tokens) or at Close. most is the most guesses the next step may take
// (Guess's room). Nothing for n-gram guesses (they cost nothing), or
// without guesses.
func (sp *Speculator) DraftAhead(seq, guesses []int, most int) {
	m, ok := sp.src.(*modelDrafter)
	if !ok || len(guesses) == 0 || sp.ahead != nil {
		return
	}
	text := slices.Concat(seq, guesses)
	// The token after the guesses, then as many as the next step may guess.
	sp.ahead = m.ahead(text, min(sp.most, most)+1)
}

// settle stops drafting ahead and waits for it; its error if it failed.
func (sp *Speculator) settle() error {
	if sp.ahead == nil {
		return nil
	}
	m := sp.src.(*modelDrafter)
	m.stop.Store(true)
	err := <-sp.ahead
	m.stop.Store(false)
	sp.ahead = nil
	return err
}

// Close stops drafting ahead: the generation is over.
func (sp *Speculator) Close() { sp.settle() }

// Learn adapts the next guesses to a step's outcome: kept of guessed
// guesses were right.
func (sp *Speculator) Learn(guessed, kept int) {
	sp.Drafted += guessed
	sp.Accepted += kept
	switch {
	case guessed == 0:
	case kept == guessed:
		sp.k = min(2*sp.k, sp.most)
		sp.rest = 0
	case kept > 0:
		sp.k = kept + 1
		sp.rest = 0
	case sp.k > 1:
		sp.k = 1
	default:
		sp.rest = min(max(1, 2*sp.rest), maxRest)
		sp.resting = sp.rest
	}
}

// DraftFits says whether draft can guess for a model of vocabulary t:
// the same tokens, id for id (a draft of other tokens would guess other
// words); an error says where they differ. Their embeddings may be padded
// to different sizes: guesses past the target's are dropped.
func DraftFits(t *tokenizer.Tokenizer, draft *Engine) error {
	d := draft.Tokenizer
	if t.VocabSize() != d.VocabSize() {
		return fmt.Errorf("engine: the draft model's vocabulary has %d tokens, the target's %d: a draft must share the vocabulary", d.VocabSize(), t.VocabSize())
	}
	for i := range t.VocabSize() {
		if t.Token(i) != d.Token(i) {
			return fmt.Errorf("engine: the draft model's token %d is %q, the target's %q: a draft must share the vocabulary", i, d.Token(i), t.Token(i))
		}
	}
	return nil
}

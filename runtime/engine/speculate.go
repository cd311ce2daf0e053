package engine

import (
	"fmt"
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
// capped there (no cap for a model of Q4_K/Q5_K/Q6_K matrices; two
// guesses for a float or Q8_0 one).

// Speculation sources (Request.Speculate, Options.Speculate).
const (
	SpeculateOff   = "off"
	SpeculateNGram = "ngram" // guesses from earlier occurrences of the last tokens
	SpeculateDraft = "draft" // guesses from the draft model (Options.Draft)
)

// ParseSpeculate checks a speculation source: "", off, ngram or draft.
func ParseSpeculate(s string) (string, error) {
	switch s {
	case "", SpeculateOff, SpeculateNGram, SpeculateDraft:
		return s, nil
	}
	return "", fmt.Errorf("speculation %q: want off, ngram or draft", s)
}

// maxDraft is the most tokens drafted for one step: the step's batch is
// one more.
const maxDraft = 8

// maxRest is the most steps speculation rests after repeated misses.
const maxRest = 32

// guessing reports whether this step should guess, counting a resting
// step down.
func (sp *speculation) guessing() bool {
	if sp.resting > 0 {
		sp.resting--
		return false
	}
	return true
}

// learn adapts k (and the rest) to a step's outcome: kept of guessed
// guesses were right.
func (sp *speculation) learn(guessed, kept int) {
	sp.drafted += guessed
	sp.accepted += kept
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

// drafter proposes the tokens that follow seq.
type drafter interface {
	// draft appends to dst up to k tokens guessed to follow seq (the
	// prompt and every token of the answer so far).
	draft(dst, seq []int, k int) ([]int, error)
}

// ngramDrafter guesses by prompt lookup: the latest earlier occurrence of
// the text's last n tokens (n from ngramMax down to ngramMin) and what
// followed it. Agents that edit code or quote documents, and stories that
// repeat themselves, reuse long spans.
type ngramDrafter struct{}

const (
	ngramMax = 4
	ngramMin = 2
)

func (ngramDrafter) draft(dst, seq []int, k int) ([]int, error) {
	for n := min(ngramMax, len(seq)-1); n >= ngramMin; n-- {
		tail := seq[len(seq)-n:]
		// The latest start j < len(seq)-n where seq[j:j+n] == tail.
		for j := len(seq) - n - 1; j >= 0; j-- {
			if !equalInts(seq[j:j+n], tail) {
				continue
			}
			follow := seq[j+n : min(j+n+k, len(seq))]
			return append(dst, follow...), nil
		}
	}
	return dst, nil
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// modelDrafter guesses with a draft model: greedy continuations from its
// own KV cache, which follows the answer (cut back to what it shares with
// the text, then fed the rest).
type modelDrafter struct {
	d    *Engine
	held []int // the tokens whose keys and values the cache holds
	w    work
}

func newModelDrafter(d *Engine, capacity int) *modelDrafter {
	m := d.Model
	c := m.NewCache(capacity)
	return &modelDrafter{d: d, w: work{cache: c, logits: make([]float32, m.Vocab), done: make(chan error, 1)}}
}

func (m *modelDrafter) draft(dst, seq []int, k int) ([]int, error) {
	p := 0
	for p < len(m.held) && p < len(seq) && m.held[p] == seq[p] {
		p++
	}
	p = min(p, len(seq)-1) // the last token runs again: its logits are the first guess
	m.held = append(m.held[:p], seq[p:]...)
	m.w.cache.Len = p
	k = min(k, m.w.cache.Capacity-len(seq))
	for i := p; i < len(seq); i += m.d.batch {
		m.w.tokens = seq[i:min(i+m.d.batch, len(seq))]
		if err := m.d.batcher.do(&m.w); err != nil {
			return dst, err
		}
	}
	var one [1]int
	for i := range k {
		t := argmax(m.w.logits)
		dst = append(dst, t)
		if i == k-1 {
			break
		}
		one[0] = t
		m.w.tokens = one[:]
		if err := m.d.batcher.do(&m.w); err != nil {
			return dst, err
		}
		m.held = append(m.held, t)
	}
	return dst, nil
}

// argmax is the greedy choice: the lowest id of the largest logit.
func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// speculation is one generation's drafting state.
type speculation struct {
	src     drafter
	most    int   // the most guesses one step may verify (exactness, batch)
	k       int   // guesses for the next step; adapts to the acceptance
	seq     []int // the prompt and every token returned so far
	guesses []int
	batch   []int // a step's tokens: the fed one, then the guesses
	ahead   []int // verified tokens not yet returned
	// Back-off: after a step whose only guess was wrong, the next rest
	// steps do not guess (a wrong guess costs the draft and a wider
	// step); rest doubles with each such miss, up to maxRest, and is
	// reset by a right guess.
	rest, resting int
	// Counts for the Result.
	drafted, accepted int
}

// newSpeculation returns the drafting state of a generation, or nil
// (speculation off, or the model's batch invariance leaves no room for a
// guess).
func (e *Engine) newSpeculation(source string, prompt []int) (*speculation, error) {
	if source == "" {
		source = e.speculate
	}
	most := min(maxDraft, e.batch-1, e.Model.InvariantRows()-1)
	var src drafter
	switch source {
	case "", SpeculateOff:
		return nil, nil
	case SpeculateNGram:
		src = ngramDrafter{}
	case SpeculateDraft:
		if e.draft == nil {
			return nil, fmt.Errorf("engine: speculation from a draft model, but none was opened (Options.Draft)")
		}
		src = newModelDrafter(e.draft, e.ctxLen)
	default:
		return nil, fmt.Errorf("engine: unknown speculation source %q", source)
	}
	if most < 1 {
		return nil, nil
	}
	return &speculation{src: src, most: most, k: most, seq: append(make([]int, 0, len(prompt)+256), prompt...)}, nil
}

// checkDraftVocab refuses a draft model whose tokens differ from the
// target's: its guesses would be other words.
func checkDraftVocab(target, draft *Engine) error {
	t, d := target.Tokenizer, draft.Tokenizer
	if t.VocabSize() != d.VocabSize() || target.Model.Vocab != draft.Model.Vocab {
		return fmt.Errorf("engine: the draft model's vocabulary has %d tokens, the target's %d: a draft must share the vocabulary", d.VocabSize(), t.VocabSize())
	}
	for i := range t.VocabSize() {
		if t.Token(i) != d.Token(i) {
			return fmt.Errorf("engine: the draft model's token %d is %q, the target's %q: a draft must share the vocabulary", i, d.Token(i), t.Token(i))
		}
	}
	return nil
}

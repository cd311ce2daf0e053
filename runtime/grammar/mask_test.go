package grammar

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"strata/runtime/sample"
)

// maskByScan is Mask as it was before the walk counted the tokens it
// allows: it scans the whole vocabulary to learn whether any is. It is
// the reference TestMaskSameAsScan holds Mask to, and reports whether it
// had to walk again without the budget's bound.
func (m *Matcher) maskByScan(logits []float32) (rewalked bool) {
	clear(m.allowed)
	if canEnd(m.st) {
		for _, t := range m.v.eog {
			m.allowed[t] = true
		}
	}
	limit := math.MaxInt
	if m.budget >= 0 {
		limit = m.budget - 1
	}
	m.stack[0] = append(m.stack[0][:0], m.st...)
	m.walk(0, 0, limit)
	anyAllowed := func() bool {
		for _, a := range m.allowed {
			if a {
				return true
			}
		}
		return false
	}
	if limit != math.MaxInt && !anyAllowed() {
		m.walk(0, 0, math.MaxInt)
		rewalked = true
	}
	m.apply(logits)
	return rewalked
}

// maskSchemas are the schemas the mask comparison runs: objects, an
// enum, a bounded array, numbers, bounded strings and any JSON.
var maskSchemas = []string{
	weather,
	`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"enum":["x","y",3]}},"required":["c"]}`,
	`{"type":"array","items":{"type":"integer","minimum":-20,"maximum":-3},"minItems":1,"maxItems":3}`,
	`{"type":"number"}`,
	`{"type":"string","minLength":2,"maxLength":3}`,
	`{}`,
}

// TestMaskSameAsScan: sampling under two matchers in step, one masked
// by Mask and one by the scanning reference, they mask the same tokens
// (bit for bit the same logits) at every step, budgets tight enough that
// the walk without the budget's bound runs too.
func TestMaskSameAsScan(t *testing.T) {
	toy := newToy()
	vocabs := []struct {
		name string
		tok  Tokenizer
	}{{"toy", toy}}
	vocabs = append(vocabs, struct {
		name string
		tok  Tokenizer
	}{"llama-32k", llama32k(t)})
	for _, voc := range vocabs {
		v := VocabOf(voc.tok)
		trials, steps := 40, 40
		if voc.name != "toy" {
			trials, steps = 4, 12 // a 32k mask takes milliseconds
		}
		rewalks := 0
		for si, src := range maskSchemas {
			s, err := Compile([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(si), 3))
			got, want := make([]float32, v.size), make([]float32, v.size)
			for trial := range trials {
				budget := 2 + trial%12
				if trial%4 == 0 {
					budget = 0 // no budget
				}
				a, b := NewMatcher(s, v, budget), NewMatcher(s, v, budget)
				for n := range steps {
					for i := range got {
						got[i] = float32(rng.NormFloat64() * 3)
					}
					copy(want, got)
					a.Mask(got)
					if b.maskByScan(want) {
						rewalks++
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s, schema %d, trial %d, step %d: token %d (%q) masked to %v, the scan gives %v",
								voc.name, si, trial, n, i, v.pieces[i], got[i], want[i])
						}
					}
					if a.dead != b.dead {
						t.Fatalf("%s, schema %d, trial %d, step %d: dead %v, the scan says %v", voc.name, si, trial, n, a.dead, b.dead)
					}
					best, bestL := -1, float32(math.Inf(-1))
					for i, l := range got {
						if l > bestL {
							best, bestL = i, l
						}
					}
					if best < 0 || voc.tok.IsEOG(best) {
						break
					}
					a.Accept(best)
					b.Accept(best)
				}
			}
		}
		// The comparison must have covered the second walk, the path the
		// count decides.
		if rewalks == 0 {
			t.Errorf("%s: no mask needed the walk without the budget's bound; the budgets do not test it", voc.name)
		}
		t.Logf("%s: %d masks walked twice", voc.name, rewalks)
	}
}

// TestAllowsAgreesWithMask: for runs of tokens, some drawn under the mask
// and some at random, Allows counts exactly the leading tokens that a
// Mask-then-Accept walk leaves unmasked, up to where Mask's fallback for
// a too-tight budget allows what Allows does not, and changes nothing:
// the matcher masks the same after it.
func TestAllowsAgreesWithMask(t *testing.T) {
	toy := newToy()
	v := VocabOf(toy)
	logits := make([]float32, v.size)
	for si, src := range maskSchemas {
		s, err := Compile([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(si), 9))
		cut := 0
		for trial := range 60 {
			budget := 0 // none
			switch trial % 3 {
			case 1:
				budget = 40 + trial
			case 2:
				budget = 2 + trial%12 // tight: it cuts, and Mask falls back
			}
			m := NewMatcher(s, v, budget)
			// A prefix drawn under the mask puts the document somewhere.
			for range rng.IntN(6) {
				m.Mask(fill(logits, rng))
				m.Accept(sample.Greedy(logits))
			}
			// Guesses: mostly tokens the mask allows in turn, some not.
			walker := NewMatcher(s, v, budget)
			walker.st, walker.budget = append([]frame(nil), m.st...), m.budget
			var guesses []int
			want := -1
			for i := range 8 {
				if walker.maskByScan(fill(logits, rng)) && want < 0 {
					// Too few tokens left for any ending within the
					// budget: Mask allows every valid token, Allows none.
					want = i
				}
				g := sample.Greedy(logits)
				if rng.IntN(5) == 0 {
					g = rng.IntN(v.size)
				}
				if math.IsInf(float64(logits[g]), -1) && want < 0 {
					want = i
				}
				guesses = append(guesses, g)
				walker.Accept(g)
				if want < 0 && slices.Contains(v.eog, int32(g)) {
					want = i + 1 // nothing follows an end
				}
			}
			if want < 0 {
				want = len(guesses)
			}
			if m.dead {
				continue
			}
			m.Mask(fill(logits, rand.New(rand.NewPCG(1, 1))))
			before := append([]float32(nil), logits...)
			if got := m.Allows(guesses); got != want {
				t.Fatalf("schema %d, trial %d: Allows(%q) = %d, the mask walk allows %d", si, trial, pieces(v, guesses), got, want)
			}
			m.Mask(fill(logits, rand.New(rand.NewPCG(1, 1))))
			for i := range logits {
				if math.Float32bits(logits[i]) != math.Float32bits(before[i]) {
					t.Fatalf("schema %d, trial %d: Allows changed the matcher's mask at token %d", si, trial, i)
				}
			}
			if want < len(guesses) {
				cut++
			}
		}
		if cut == 0 {
			t.Errorf("schema %d: no run was cut: the test checks nothing", si)
		}
	}
}

func fill(logits []float32, rng *rand.Rand) []float32 {
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	return logits
}

func pieces(v *Vocab, tokens []int) []string {
	var p []string
	for _, t := range tokens {
		p = append(p, v.pieces[t])
	}
	return p
}

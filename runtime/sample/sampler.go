package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// pcgStream is the second PCG seed word; only Params.Seed varies.
const pcgStream = 0x9e3779b97f4a7c15

// Sampler picks tokens from logits with a fixed Params. It holds the
// penalty history and the PRNG, so use one Sampler per sequence. It is not
// safe for concurrent use.
type Sampler struct {
	p     Params
	vocab int
	rng   *rand.Rand
	pcg   *rand.PCG

	// cands is scratch for the filters, one key per vocabulary token.
	cands []key
	// mass is topP's probability mass per logit bucket.
	mass [topPBuckets]float64

	// Penalty history, allocated only when a penalty is on.
	// counts[t] is how often t occurs in the window; present lists the
	// tokens with counts[t] > 0, and where[t] is t's index in present,
	// so that Sample touches only tokens that were seen.
	counts  []int32
	present []int32
	where   []int32
	// ring holds the window's tokens, oldest at head once it is full
	// (len(ring) == window); unused when the window is the whole history.
	ring   []int32
	head   int
	window int

	// c, when set, masks the logits first and follows the drawn tokens.
	c Constraint
}

// Constrain makes every following Sample draw only tokens c allows, and
// tell c which one it drew. Tokens given to Accept do not reach c (the
// prompt is not part of what c constrains). nil removes the constraint.
func (s *Sampler) Constrain(c Constraint) { s.c = c }

// Allows returns how many of tokens, in order, the constraint would let
// the sampler draw (see Lookahead): all of them without a constraint or
// with one that cannot look ahead.
func (s *Sampler) Allows(tokens []int) int {
	if c, ok := s.c.(Lookahead); ok {
		return c.Allows(tokens)
	}
	return len(tokens)
}

// New returns a Sampler for logits of length vocabSize. It validates p and
// allocates all scratch that Sample needs: 8 bytes per vocabulary token,
// plus 8 more when a penalty is on.
func New(p Params, vocabSize int) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if vocabSize <= 0 || vocabSize > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d", ErrVocabSize, vocabSize)
	}
	s := &Sampler{p: p, vocab: vocabSize, cands: make([]key, vocabSize)}
	s.pcg = rand.NewPCG(p.Seed, pcgStream)
	s.rng = rand.New(s.pcg)
	if p.penaltiesOn() {
		s.window = p.window()
		s.counts = make([]int32, vocabSize)
		s.where = make([]int32, vocabSize)
		n := vocabSize
		if s.window > 0 {
			n = min(n, s.window)
			// The ring grows with the history up to the window, so a huge
			// PenaltyLastN costs memory only once that many tokens are seen.
			s.ring = make([]int32, 0, min(s.window, 4096))
		}
		s.present = make([]int32, 0, n)
	}
	return s, nil
}

// Reset forgets the penalty history and reseeds the PRNG from Params.Seed,
// so that the Sampler behaves as if it were new.
func (s *Sampler) Reset() {
	for _, t := range s.present {
		s.counts[t] = 0
	}
	s.present = s.present[:0]
	s.ring = s.ring[:0]
	s.head = 0
	s.pcg.Seed(s.p.Seed, pcgStream)
}

// Accept records token, from the prompt or just sampled, in the penalty
// history. It panics if token is outside [0, vocabSize). It does nothing
// when every penalty is off.
func (s *Sampler) Accept(token int) {
	if token < 0 || token >= s.vocab {
		panic(fmt.Sprintf("sample: Accept(%d) outside vocabulary of %d", token, s.vocab))
	}
	if s.counts == nil {
		return
	}
	t := int32(token)
	if s.window > 0 {
		if len(s.ring) < s.window {
			s.ring = append(s.ring, t)
		} else {
			s.forget(s.ring[s.head])
			s.ring[s.head] = t
			s.head++
			if s.head == s.window {
				s.head = 0
			}
		}
	}
	if s.counts[t] == 0 {
		s.where[t] = int32(len(s.present))
		s.present = append(s.present, t)
	}
	s.counts[t]++
}

// forget removes one occurrence of t from the window counts.
func (s *Sampler) forget(t int32) {
	s.counts[t]--
	if s.counts[t] > 0 {
		return
	}
	i, last := s.where[t], s.present[len(s.present)-1]
	s.present[i] = last
	s.where[last] = i
	s.present = s.present[:len(s.present)-1]
}

// Sample returns the next token for logits, which must have length
// vocabSize; it panics otherwise. It applies the penalties to logits in
// place, then the filters in Params order, and draws from what is left.
// Logits of -Inf or NaN are never drawn while a finite one is left. If a
// logit is +Inf, or none is finite, Sample returns the greedy choice
// instead (the lowest id of the largest non-NaN logit; 0 if all are NaN),
// without drawing a random number.
// Sample does not record the token: call Accept with it.
// It allocates nothing.
func (s *Sampler) Sample(logits []float32) int {
	if len(logits) != s.vocab {
		panic(fmt.Sprintf("sample: Sample with %d logits, vocabulary is %d", len(logits), s.vocab))
	}
	if s.c == nil {
		return s.sample(logits)
	}
	s.c.Mask(logits)
	id := s.sample(logits)
	s.c.Accept(id)
	return id
}

func (s *Sampler) sample(logits []float32) int {
	s.applyPenalties(logits)
	if s.p.Temperature == 0 {
		return argmax(logits)
	}
	c, maxLogit := s.filter(logits)
	if len(c) == 0 || math.IsInf(float64(maxLogit), 1) {
		return argmax(logits)
	}
	sum := softmax(c, maxLogit, s.p.Temperature)
	return draw(c, sum, s.rng.Float64())
}

// applyPenalties adjusts the logits of tokens in the penalty window:
// repeat penalty first, then frequency and presence, as llama.cpp does.
func (s *Sampler) applyPenalties(logits []float32) {
	repeat := s.p.repeatOn()
	r, freq, pres := s.p.RepeatPenalty, s.p.FrequencyPenalty, s.p.PresencePenalty
	for _, t := range s.present {
		l := logits[t]
		if repeat {
			if l > 0 {
				l /= r
			} else {
				l *= r
			}
		}
		logits[t] = l - float32(s.counts[t])*freq - pres
	}
}

// Greedy is the greedy choice: the lowest id holding the largest logit,
// skipping NaN; 0 if every logit is NaN. logits are not changed.
func Greedy(logits []float32) int { return argmax(logits) }

// argmax is Greedy.
func argmax(logits []float32) int {
	first := 0
	for first < len(logits) && logits[first] != logits[first] {
		first++
	}
	if first == len(logits) {
		return 0
	}
	best, bestL := first, logits[first]
	for i := first + 1; i < len(logits); i++ {
		if l := logits[i]; l > bestL { // false for NaN
			best, bestL = i, l
		}
	}
	return best
}

// filter runs TopK, TopP and MinP over the drawable logits and returns the
// survivors' keys (a prefix of s.cands, in no particular order) and the
// largest logit, which always survives. With +Inf among the logits it
// returns early; the caller then takes the argmax.
func (s *Sampler) filter(logits []float32) ([]key, float32) {
	c := s.cands[:0]
	maxLogit := float32(math.Inf(-1))
	topPOn := s.p.TopP > 0 && s.p.TopP < 1
	minPDone := false
	k := s.p.TopK
	if k > 0 && k <= topKHeapMax {
		c = topKScan(c, logits, k)
		for _, x := range c {
			maxLogit = max(maxLogit, keyLogit(x))
		}
	} else {
		for _, l := range logits {
			if l > maxLogit { // false for NaN, unlike max
				maxLogit = l
			}
		}
		if math.IsInf(float64(maxLogit), 0) {
			return c, maxLogit
		}
		// MinP keeps a best-first run with a threshold fixed by maxLogit,
		// so without TopP in between (whose normaliser needs every
		// candidate) it can go first and spare building most keys.
		floor := math.Inf(-1)
		if s.p.MinP > 0 && !topPOn {
			floor, minPDone = minPFloor(maxLogit, s.p.MinP), true
		}
		for i, l := range logits {
			if float64(l) >= floor && !math.IsInf(float64(l), -1) { // NaN fails
				c = append(c, makeKey(l, i))
			}
		}
		if k > 0 && k < len(c) {
			selectTop(c, k)
			c = c[:k]
		}
	}
	if len(c) == 0 || math.IsInf(float64(maxLogit), 1) {
		return c, maxLogit
	}
	if topPOn && len(c) > 1 {
		c = s.topP(c, maxLogit, s.p.TopP)
	}
	if s.p.MinP > 0 && !minPDone && len(c) > 1 {
		c = minP(c, maxLogit, s.p.MinP)
	}
	return c, maxLogit
}

const (
	// topPSortMax is the largest candidate count that topP simply sorts.
	topPSortMax = 256
	// topPBuckets logit buckets, spread evenly over at most topPSpan nats
	// below the maximum, let topP sort only the bucket where the cumulative
	// probability crosses TopP; logits further down share the last bucket.
	topPBuckets = 1024
	topPSpan    = 64
)

// topP keeps the shortest best-first run of c whose probability (at
// temperature 1) reaches p, in O(len(c)) plus the sort of one bucket.
func (s *Sampler) topP(c []key, maxLogit, p float32) []key {
	m := float64(maxLogit)
	if len(c) <= topPSortMax {
		var sum float64
		for _, k := range c {
			sum += expNeg(float64(keyLogit(k)) - m)
		}
		slices.Sort(c)
		return c[:cut(c, m, 0, float64(p)*sum)]
	}

	// Bucket b holds logits l with floor((m-l)*scale) == b, clamped: a
	// monotone map, so every logit in a lower bucket beats every logit in
	// a higher one, and ties share a bucket.
	span := min(m-float64(keyLogit(slices.Max(c))), topPSpan)
	scale := 0.0
	if span > 0 {
		scale = topPBuckets / span
	}
	bucket := func(l float32) int {
		x := (m - float64(l)) * scale
		if x >= topPBuckets-1 {
			return topPBuckets - 1
		}
		return int(x)
	}
	mass := &s.mass
	clear(mass[:])
	for _, k := range c {
		l := keyLogit(k)
		mass[bucket(l)] += expNeg(float64(l) - m)
	}
	var sum float64
	for _, w := range mass {
		sum += w
	}
	target := float64(p) * sum
	// Find the bucket where the cumulative mass reaches target; p < 1, so
	// the last non-empty bucket does at the latest.
	var cum float64
	cross := 0
	for cross < topPBuckets-1 && cum+mass[cross] < target {
		cum += mass[cross]
		cross++
	}
	// Three-way partition: buckets before cross, cross, after cross.
	lt, i, gt := 0, 0, len(c)
	for i < gt {
		switch b := bucket(keyLogit(c[i])); {
		case b < cross:
			c[lt], c[i] = c[i], c[lt]
			lt++
			i++
		case b > cross:
			gt--
			c[i], c[gt] = c[gt], c[i]
		default:
			i++
		}
	}
	mid := c[lt:gt]
	slices.Sort(mid)
	return c[:lt+cut(mid, m, cum, target)]
}

// cut returns how many of the sorted keys c it takes for cum plus their
// weights exp(logit-m) to reach target; all of them if rounding says never.
func cut(c []key, m, cum, target float64) int {
	for i, k := range c {
		cum += expNeg(float64(keyLogit(k)) - m)
		if cum >= target {
			return i + 1
		}
	}
	return len(c)
}

// minPFloor is the lowest logit that MinP keeps: p >= minP * p_max means
// logit >= maxLogit + ln(minP).
func minPFloor(maxLogit, minP float32) float64 {
	return float64(maxLogit) + math.Log(float64(minP))
}

// minP keeps, in order, the candidates at or above minPFloor.
func minP(c []key, maxLogit, minP float32) []key {
	floor := minPFloor(maxLogit, minP)
	n := 0
	for _, k := range c {
		if float64(keyLogit(k)) >= floor {
			c[n] = k
			n++
		}
	}
	return c[:n]
}

// softmax replaces each key in c by its token id with, in the high 32
// bits, the float32 weight exp((logit-maxLogit)/temp), and returns the sum
// of the weights; maxLogit's weight is 1, so the sum is at least 1.
func softmax(c []key, maxLogit, temp float32) float64 {
	m, inv := float64(maxLogit), 1/float64(temp)
	var sum float64
	for i, k := range c {
		w := float32(expNeg((float64(keyLogit(k)) - m) * inv))
		c[i] = uint64(math.Float32bits(w))<<32 | uint64(uint32(k))
		sum += float64(w)
	}
	return sum
}

// draw picks an id from softmax's output c (weights summing to sum) with u
// uniform in [0, 1).
func draw(c []key, sum, u float64) int {
	target := u * sum
	var cum float64
	last := 0
	for _, k := range c {
		w := math.Float32frombits(uint32(k >> 32))
		if w == 0 {
			continue
		}
		cum += float64(w)
		if target < cum {
			return keyID(k)
		}
		last = keyID(k)
	}
	return last // only reached through rounding in cum
}

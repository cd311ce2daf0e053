package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// lnp returns natural-log logits for a probability vector, so that the
// tests' expected frequencies can be computed by hand.
func lnp(p ...float64) []float32 {
	l := make([]float32, len(p))
	for i, x := range p {
		l[i] = float32(math.Log(x))
	}
	return l
}

func mustNew(t testing.TB, p Params, vocab int) *Sampler {
	t.Helper()
	s, err := New(p, vocab)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var inf = float32(math.Inf(1))
var nan = float32(math.NaN())

func TestGreedy(t *testing.T) {
	tests := []struct {
		name    string
		p       Params
		history []int
		logits  []float32
		want    int
	}{
		{"argmax", Params{}, nil, []float32{0.1, 2, -3, 1.9}, 1},
		{"last", Params{}, nil, []float32{-1, -2, -3, -0.5}, 3},
		{"tie lowest id", Params{}, nil, []float32{1, 3, 0, 3, 3}, 1},
		{"all equal", Params{}, nil, []float32{7, 7, 7}, 0},
		{"filters ignored", Params{TopK: 1, TopP: 0.1, MinP: 0.9}, nil, []float32{0, 1, 2}, 2},
		{"NaN skipped", Params{}, nil, []float32{nan, 1, nan, 0}, 1},
		{"all NaN", Params{}, nil, []float32{nan, nan}, 0},
		{"+Inf", Params{}, nil, []float32{1, inf, inf}, 1},
		{"-Inf masked", Params{}, nil, []float32{-inf, -5}, 1},
		{"repeat penalty applies", Params{RepeatPenalty: 4}, []int{3}, []float32{2, -1, 0.5, 3}, 0},
		{"presence penalty applies", Params{PresencePenalty: 1.5}, []int{3}, []float32{2, -1, 0.5, 3}, 0},
		{"negative presence favours", Params{PresencePenalty: -3}, []int{2}, []float32{2, -1, 0.5, 3}, 2},
		{"penalty ties lowest id", Params{FrequencyPenalty: 0.5}, []int{1, 1}, []float32{2, 3, 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, tt.p, len(tt.logits))
			for _, h := range tt.history {
				s.Accept(h)
			}
			if got := s.Sample(slices.Clone(tt.logits)); got != tt.want {
				t.Errorf("Sample(%v) = %d, want %d", tt.logits, got, tt.want)
			}
		})
	}
}

// TestDistribution samples each filter alone on a small hand-computed
// distribution and checks the empirical support and frequencies.
func TestDistribution(t *testing.T) {
	base := lnp(0.5, 0.3, 0.15, 0.05)
	tests := []struct {
		name   string
		p      Params
		logits []float32
		want   []float64 // expected frequency per token; 0 = must never appear
	}{
		{"T=1 no filter", Params{Temperature: 1}, base, []float64{0.5, 0.3, 0.15, 0.05}},
		// p^2 = .25 .09 .0225 .0025, sum .365
		{"T=0.5", Params{Temperature: 0.5}, base, []float64{0.6849, 0.2466, 0.0616, 0.0068}},
		// sqrt(p) = .7071 .5477 .3873 .2236, sum 1.8657
		{"T=2", Params{Temperature: 2}, base, []float64{0.3790, 0.2936, 0.2076, 0.1199}},
		{"TopK=1", Params{Temperature: 1, TopK: 1}, base, []float64{1, 0, 0, 0}},
		{"TopK=2", Params{Temperature: 1, TopK: 2}, base, []float64{0.625, 0.375, 0, 0}},
		{"TopK=3", Params{Temperature: 1, TopK: 3}, base, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
		{"TopK>vocab", Params{Temperature: 1, TopK: 10}, base, []float64{0.5, 0.3, 0.15, 0.05}},
		{"TopK ties lowest id", Params{Temperature: 1, TopK: 2}, []float32{0, 1, 1, 1}, []float64{0, 0.5, 0.5, 0}},
		{"TopP=0.4", Params{Temperature: 1, TopP: 0.4}, base, []float64{1, 0, 0, 0}},
		{"TopP=0.7", Params{Temperature: 1, TopP: 0.7}, base, []float64{0.625, 0.375, 0, 0}},
		{"TopP=0.9", Params{Temperature: 1, TopP: 0.9}, base, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
		{"TopP=1 off", Params{Temperature: 1, TopP: 1}, base, []float64{0.5, 0.3, 0.15, 0.05}},
		{"TopP unsorted input", Params{Temperature: 1, TopP: 0.7}, lnp(0.05, 0.3, 0.15, 0.5), []float64{0, 0.375, 0, 0.625}},
		{"MinP=0.2", Params{Temperature: 1, MinP: 0.2}, base, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
		{"MinP=0.5", Params{Temperature: 1, MinP: 0.5}, base, []float64{0.625, 0.375, 0, 0}},
		{"MinP=0.7", Params{Temperature: 1, MinP: 0.7}, base, []float64{1, 0, 0, 0}},
		{"MinP=1 keeps ties", Params{Temperature: 1, MinP: 1}, []float32{2, 1, 2}, []float64{0.5, 0, 0.5}},
		// Filters see temperature-1 probabilities; then p^2 over {0,1,2}.
		{"TopK=3 T=0.5", Params{Temperature: 0.5, TopK: 3}, base, []float64{0.25 / 0.3625, 0.09 / 0.3625, 0.0225 / 0.3625, 0}},
		{"TopP=0.7 T=2", Params{Temperature: 2, TopP: 0.7}, base, []float64{0.7071 / 1.2548, 0.5477 / 1.2548, 0, 0}},
		{"-Inf never drawn", Params{Temperature: 1}, []float32{-inf, 0, nan, 0}, []float64{0, 0.5, 0, 0.5}},
		{"+Inf wins", Params{Temperature: 1}, []float32{0, inf, 5, inf}, []float64{0, 1, 0, 0}},
		{"all -Inf", Params{Temperature: 1}, []float32{-inf, -inf}, []float64{1, 0}},
		{"+Inf wins with TopK", Params{Temperature: 1, TopK: 2}, []float32{0, inf, 5, inf}, []float64{0, 1, 0, 0}},
		{"all -Inf with TopK", Params{Temperature: 1, TopK: 2}, []float32{nan, -inf, -inf}, []float64{0, 1, 0}},
		{"-Inf with TopK", Params{Temperature: 1, TopK: 3}, []float32{nan, -inf, 1, 1}, []float64{0, 0, 0.5, 0.5}},
		{"weight underflow", Params{Temperature: 1}, []float32{0, -800, 0}, []float64{0.5, 0, 0.5}},
		{"penalty shifts mass", Params{Temperature: 1, PresencePenalty: float32(math.Log(3))}, base, nil},
	}
	const n = 10000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.Seed = 1
			s := mustNew(t, tt.p, len(tt.logits))
			want := tt.want
			if want == nil { // token 0 accepted once: 0.5/3 vs 0.3 .15 .05
				s.Accept(0)
				want = []float64{0.5 / 3 / (0.5/3 + 0.5), 0.3 / (0.5/3 + 0.5), 0.15 / (0.5/3 + 0.5), 0.05 / (0.5/3 + 0.5)}
			}
			counts := make([]int, len(tt.logits))
			logits := make([]float32, len(tt.logits))
			for range n {
				copy(logits, tt.logits)
				counts[s.Sample(logits)]++
			}
			for i, c := range counts {
				got := float64(c) / n
				if (want[i] == 0) != (c == 0) {
					t.Errorf("token %d drawn %d times, want frequency %.4f", i, c, want[i])
				}
				if math.Abs(got-want[i]) > 0.02 {
					t.Errorf("token %d frequency %.4f, want %.4f", i, got, want[i])
				}
			}
		})
	}
}

// refCand and refBetter are the filters' order written out directly,
// independent of the key encoding.
type refCand struct {
	id    int
	logit float32
}

func refBetter(a, b refCand) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

func refCompare(a, b refCand) int {
	switch {
	case refBetter(a, b):
		return -1
	case refBetter(b, a):
		return 1
	}
	return 0
}

// refFilter is the simple version of Sampler.filter: sort everything, then
// cut. It returns the sorted ids that survive TopK, TopP and MinP.
func refFilter(logits []float32, p Params) []int {
	var c []refCand
	for i, l := range logits {
		if !math.IsNaN(float64(l)) && !math.IsInf(float64(l), -1) {
			c = append(c, refCand{i, l})
		}
	}
	slices.SortFunc(c, refCompare)
	if p.TopK > 0 && p.TopK < len(c) {
		c = c[:p.TopK]
	}
	m := float64(c[0].logit)
	if p.TopP > 0 && p.TopP < 1 {
		var sum, cum float64
		for _, x := range c {
			sum += math.Exp(float64(x.logit) - m)
		}
		for i, x := range c {
			cum += math.Exp(float64(x.logit) - m)
			if cum/sum >= float64(p.TopP) {
				c = c[:i+1]
				break
			}
		}
	}
	if p.MinP > 0 {
		for i, x := range c {
			if math.Exp(float64(x.logit)-m) < float64(p.MinP) {
				c = c[:i]
				break
			}
		}
	}
	ids := make([]int, len(c))
	for i, x := range c {
		ids[i] = x.id
	}
	slices.Sort(ids)
	return ids
}

// TestFilterMatchesReference checks the filters against refFilter on random
// logits, with and without ties and far outliers, over vocabularies that
// take each path: top-k by heap and by quickselect, top-p by sorting and by
// buckets, min-p before and after top-p.
func TestFilterMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	skipped, total := 0, 0
	defer func() {
		if skipped > total/20 {
			t.Errorf("%d of %d trials skipped as ambiguous", skipped, total)
		}
	}()
	for _, vocab := range []int{1, 2, 3, 5, 13, 64, 65, 256, 257, 1000, 5000, 20000} {
		for trial := range 30 {
			total++
			logits := make([]float32, vocab)
			ties := trial%3 == 0
			scale := []float64{0.05, 1, 5}[trial%3]
			for i := range logits {
				logits[i] = float32(r.NormFloat64() * scale)
				if ties {
					logits[i] = float32(math.Round(float64(logits[i]) * 4))
				}
				if r.IntN(20) == 0 {
					logits[i] = -inf
				}
			}
			if trial%5 == 4 { // far outliers: buckets clamp at topPSpan
				logits[r.IntN(vocab)] = -1e30
				logits[r.IntN(vocab)] = 70
			}
			logits[r.IntN(vocab)] = 0 // at least one finite logit
			p := Params{Temperature: 1}
			if r.IntN(2) == 0 {
				p.TopK = 1 + r.IntN(vocab+5)
			}
			if r.IntN(3) > 0 {
				p.TopP = r.Float32()
			}
			if r.IntN(3) == 0 {
				p.MinP = r.Float32() * 0.3
			}
			if checkFilter(t, logits, p) {
				skipped++
			}
		}
	}
}

// checkFilter fails t unless Sampler.filter keeps what refFilter keeps. It
// reports true instead when they differ but rounding (expNeg vs math.Exp,
// summation order) could decide the TopP or MinP boundary.
func checkFilter(t *testing.T, logits []float32, p Params) (ambiguous bool) {
	t.Helper()
	s := mustNew(t, p, len(logits))
	c, _ := s.filter(logits)
	got := make([]int, len(c))
	for i, k := range c {
		got[i] = keyID(k)
	}
	slices.Sort(got)
	want := refFilter(logits, p)
	if slices.Equal(got, want) {
		return false
	}
	lo, hi := p, p
	lo.TopP *= 1 - 1e-6
	lo.MinP *= 1 - 1e-6
	hi.TopP = min(1, hi.TopP*(1+1e-6))
	hi.MinP = min(1, hi.MinP*(1+1e-6))
	if !slices.Equal(refFilter(logits, lo), want) || !slices.Equal(refFilter(logits, hi), want) {
		return true
	}
	t.Fatalf("vocab %d %+v: filter kept %d ids, reference %d\n got %v\nwant %v",
		len(logits), p, len(got), len(want), head(got), head(want))
	return false
}

// FuzzFilter compares filter with refFilter on logits decoded from two
// bytes each (value/64, so ties are common; 0x8000 is -Inf, 0x7fff NaN).
func FuzzFilter(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0x80, 0, 0x7f, 0xff, 0, 2}, uint16(2), uint16(40000), uint16(3000))
	f.Add(make([]byte, 2000), uint16(0), uint16(60000), uint16(0))
	f.Add([]byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0}, uint16(3), uint16(0), uint16(30000))
	f.Fuzz(func(t *testing.T, data []byte, topK, topP, minP uint16) {
		logits := make([]float32, len(data)/2)
		drawable := false
		for i := range logits {
			switch v := int16(uint16(data[2*i])<<8 | uint16(data[2*i+1])); v {
			case math.MinInt16:
				logits[i] = -inf
			case math.MaxInt16:
				logits[i] = nan
			default:
				logits[i] = float32(v) / 64
				drawable = true
			}
		}
		if !drawable {
			return
		}
		p := Params{Temperature: 1, TopK: int(topK), TopP: float32(topP) / 65535, MinP: float32(minP) / 65535}
		if checkFilter(t, logits, p) {
			return
		}
		s := mustNew(t, p, len(logits))
		if tok := s.Sample(logits); tok < 0 || tok >= len(logits) || !slices.Contains(refFilter(logits, p), tok) {
			t.Fatalf("Sample = %d, not a candidate", tok)
		}
	})
}

func head(ids []int) []int { return ids[:min(len(ids), 20)] }

func TestExpNeg(t *testing.T) {
	for x := 0.0; x >= -708; x -= 0.00071 {
		want := math.Exp(x)
		if got := expNeg(x); math.Abs(got-want) > 1e-8*want {
			t.Fatalf("expNeg(%v) = %v, want %v", x, got, want)
		}
	}
	for _, x := range []float64{0, -1, -708, math.Log(math.SmallestNonzeroFloat32)} {
		if got, want := expNeg(x), math.Exp(x); math.Abs(got-want) > 1e-8*want {
			t.Errorf("expNeg(%v) = %v, want %v", x, got, want)
		}
	}
	for _, x := range []float64{-708.5, -1e10, math.Inf(-1)} {
		if got := expNeg(x); got != 0 {
			t.Errorf("expNeg(%v) = %v, want 0", x, got)
		}
	}
}

func TestKeyOrder(t *testing.T) {
	values := []float32{-inf, -math.MaxFloat32, -1e10, -2, -1, -math.SmallestNonzeroFloat32,
		float32(math.Copysign(0, -1)), 0, math.SmallestNonzeroFloat32, 1e-30, 0.5, 1, 3, 1e20, math.MaxFloat32, inf}
	var c []refCand
	for id := range 3 {
		for _, v := range values {
			c = append(c, refCand{id, v})
		}
	}
	for _, a := range c {
		ka := makeKey(a.logit, a.id)
		if keyID(ka) != a.id || keyLogit(ka) != a.logit {
			t.Errorf("key(%v, %d) decodes to (%v, %d)", a.logit, a.id, keyLogit(ka), keyID(ka))
		}
		for _, b := range c {
			if got, want := ka < makeKey(b.logit, b.id), refBetter(a, b); got != want {
				t.Errorf("key(%v, %d) < key(%v, %d) = %v, want %v", a.logit, a.id, b.logit, b.id, got, want)
			}
		}
	}
	if id := math.MaxInt32; keyID(makeKey(1, id)) != id {
		t.Errorf("largest id does not round-trip")
	}
}

func TestSelectTop(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	inputs := map[string]func(i, n int) float32{
		"random":     func(i, n int) float32 { return r.Float32() },
		"ascending":  func(i, n int) float32 { return float32(i) },
		"descending": func(i, n int) float32 { return float32(n - i) },
		"all equal":  func(i, n int) float32 { return 1 },
		"few values": func(i, n int) float32 { return float32(r.IntN(3)) },
		"organ pipe": func(i, n int) float32 { return float32(min(i, n-i)) },
	}
	for name, gen := range inputs {
		t.Run(name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 3, 16, 17, 18, 100, 1000} {
				for _, k := range []int{0, 1, 2, n / 3, n / 2, n - 1, n, n + 1} {
					c := make([]key, n)
					for i := range c {
						c[i] = makeKey(gen(i, n), i)
					}
					want := slices.Sorted(slices.Values(c))
					selectTop(c, k)
					kk := max(0, min(k, n))
					if top := slices.Sorted(slices.Values(c[:kk])); !slices.Equal(top, want[:kk]) {
						t.Fatalf("n=%d k=%d: top set differs", n, k)
					}
					if rest := slices.Sorted(slices.Values(c[kk:])); !slices.Equal(rest, want[kk:]) {
						t.Fatalf("n=%d k=%d: rest differs", n, k)
					}
				}
			}
		})
	}
}

func TestPenalties(t *testing.T) {
	logits := []float32{2, -1, 0.5, 3, 1}
	history := []int{0, 0, 1, 3}
	tests := []struct {
		name string
		p    Params
		want []float32
	}{
		{"off", Params{RepeatPenalty: 1}, []float32{2, -1, 0.5, 3, 1}},
		// > 0 divides, <= 0 multiplies, once per token whatever the count.
		{"repeat", Params{RepeatPenalty: 2}, []float32{1, -2, 0.5, 1.5, 1}},
		{"repeat < 1", Params{RepeatPenalty: 0.5}, []float32{4, -0.5, 0.5, 6, 1}},
		// counts 0:2 1:1 3:1; logit -= count*0.5 + 0.25
		{"frequency+presence", Params{FrequencyPenalty: 0.5, PresencePenalty: 0.25}, []float32{0.75, -1.75, 0.5, 2.25, 1}},
		{"frequency", Params{FrequencyPenalty: 1}, []float32{0, -2, 0.5, 2, 1}},
		{"presence", Params{PresencePenalty: 1}, []float32{1, -2, 0.5, 2, 1}},
		{"all", Params{RepeatPenalty: 2, FrequencyPenalty: 0.5, PresencePenalty: 0.25}, []float32{-0.25, -2.75, 0.5, 0.75, 1}},
		{"window 2", Params{RepeatPenalty: 2, PenaltyLastN: 2}, []float32{2, -2, 0.5, 1.5, 1}},
		{"window 3 counts", Params{FrequencyPenalty: 1, PenaltyLastN: 3}, []float32{1, -2, 0.5, 2, 1}},
		{"window 1", Params{PresencePenalty: 1, PenaltyLastN: 1}, []float32{2, -1, 0.5, 2, 1}},
		{"whole history", Params{FrequencyPenalty: 1, PenaltyLastN: -1}, []float32{0, -2, 0.5, 2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, tt.p, len(logits))
			for _, h := range history {
				s.Accept(h)
			}
			got := slices.Clone(logits)
			s.applyPenalties(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("penalised %v = %v, want %v", logits, got, tt.want)
			}
		})
	}
}

func TestPenaltyDefaultWindow(t *testing.T) {
	for _, tt := range []struct {
		others int
		want   float32
	}{{DefaultPenaltyLastN - 1, 1}, {DefaultPenaltyLastN, 2}} {
		s := mustNew(t, Params{PresencePenalty: 1}, 2)
		s.Accept(0)
		for range tt.others {
			s.Accept(1)
		}
		l := []float32{2, 0}
		s.applyPenalties(l)
		if l[0] != tt.want {
			t.Errorf("token 0 then %d others: logit %v, want %v", tt.others, l[0], tt.want)
		}
	}
}

// TestPenaltyWindowMatchesReference compares the incremental window counts
// with counting the last N tokens of the history directly.
func TestPenaltyWindowMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	const vocab = 50
	for _, lastN := range []int{-1, 0, 1, 2, 7, 64, 5000} {
		p := Params{RepeatPenalty: 1.3, FrequencyPenalty: 0.2, PresencePenalty: 0.1, PenaltyLastN: lastN}
		s := mustNew(t, p, vocab)
		var hist []int
		for step := range 600 {
			if step == 300 {
				s.Reset()
				hist = hist[:0]
			}
			tok := r.IntN(vocab / (1 + step%3)) // vary how many tokens repeat
			s.Accept(tok)
			hist = append(hist, tok)

			win := hist
			if n := p.window(); n > 0 && len(win) > n {
				win = win[len(win)-n:]
			}
			count := make([]int, vocab)
			for _, h := range win {
				count[h]++
			}
			logits := make([]float32, vocab)
			for i := range logits {
				logits[i] = float32(r.NormFloat64())
			}
			want := slices.Clone(logits)
			for i, c := range count {
				if c == 0 {
					continue
				}
				l := want[i]
				if l > 0 {
					l /= p.RepeatPenalty
				} else {
					l *= p.RepeatPenalty
				}
				want[i] = l - float32(c)*p.FrequencyPenalty - p.PresencePenalty
			}
			s.applyPenalties(logits)
			if !slices.Equal(logits, want) {
				t.Fatalf("PenaltyLastN %d step %d: penalties differ from reference", lastN, step)
			}
		}
	}
}

func TestAcceptNoPenaltiesKeepsNoHistory(t *testing.T) {
	s := mustNew(t, Params{Temperature: 1}, 10)
	s.Accept(3)
	if s.counts != nil || len(s.present) != 0 {
		t.Error("history kept with every penalty off")
	}
}

// run samples steps tokens from a fixed sequence of pseudo-random logits,
// accepting each.
func run(s *Sampler, vocab, steps int) []int {
	r := rand.New(rand.NewPCG(11, 11))
	logits := make([]float32, vocab)
	out := make([]int, steps)
	for i := range out {
		for j := range logits {
			logits[j] = float32(r.NormFloat64())
		}
		out[i] = s.Sample(logits)
		s.Accept(out[i])
	}
	return out
}

func TestReproducible(t *testing.T) {
	p := Params{Temperature: 1.2, TopK: 200, TopP: 0.98, MinP: 0.01, RepeatPenalty: 1.1, FrequencyPenalty: 0.1, Seed: 99}
	const vocab, steps = 1000, 200
	a := run(mustNew(t, p, vocab), vocab, steps)
	t.Run("same seed", func(t *testing.T) {
		if b := run(mustNew(t, p, vocab), vocab, steps); !slices.Equal(a, b) {
			t.Error("same seed gave different tokens")
		}
	})
	t.Run("other seed", func(t *testing.T) {
		q := p
		q.Seed++
		b := run(mustNew(t, q, vocab), vocab, steps)
		same := 0
		for i := range a {
			if a[i] == b[i] {
				same++
			}
		}
		if same > steps/2 {
			t.Errorf("seeds %d and %d agree on %d of %d tokens", p.Seed, q.Seed, same, steps)
		}
	})
	t.Run("reset", func(t *testing.T) {
		s := mustNew(t, p, vocab)
		run(s, vocab, 37)
		s.Reset()
		if b := run(s, vocab, steps); !slices.Equal(a, b) {
			t.Error("Reset did not reproduce a new Sampler")
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		p     Params
		field string // "" = valid
	}{
		{"zero", Params{}, ""},
		{"typical", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PenaltyLastN: -1}, ""},
		{"bounds", Params{TopP: 1, MinP: 1, PresencePenalty: -2, FrequencyPenalty: -2}, ""},
		{"negative temperature", Params{Temperature: -0.1}, "Temperature"},
		{"NaN temperature", Params{Temperature: nan}, "Temperature"},
		{"Inf temperature", Params{Temperature: inf}, "Temperature"},
		{"negative TopK", Params{TopK: -1}, "TopK"},
		{"TopP > 1", Params{TopP: 1.5}, "TopP"},
		{"TopP < 0", Params{TopP: -0.1}, "TopP"},
		{"TopP NaN", Params{TopP: nan}, "TopP"},
		{"MinP > 1", Params{MinP: 1.01}, "MinP"},
		{"MinP < 0", Params{MinP: -0.5}, "MinP"},
		{"negative RepeatPenalty", Params{RepeatPenalty: -1}, "RepeatPenalty"},
		{"Inf RepeatPenalty", Params{RepeatPenalty: inf}, "RepeatPenalty"},
		{"NaN PresencePenalty", Params{PresencePenalty: nan}, "PresencePenalty"},
		{"Inf FrequencyPenalty", Params{FrequencyPenalty: -inf}, "FrequencyPenalty"},
		{"PenaltyLastN < -1", Params{PenaltyLastN: -2}, "PenaltyLastN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate() = %v, want ErrInvalidParams naming %s", err, tt.field)
			}
			if _, nerr := New(tt.p, 10); !errors.Is(nerr, ErrInvalidParams) {
				t.Errorf("New() error = %v, want ErrInvalidParams", nerr)
			}
		})
	}
	t.Run("several", func(t *testing.T) {
		err := Params{Temperature: -1, TopK: -1}.Validate()
		if msg := err.Error(); !strings.Contains(msg, "Temperature") || !strings.Contains(msg, "TopK") {
			t.Errorf("Validate() = %v, want both fields reported", err)
		}
	})
}

func TestNewVocabSize(t *testing.T) {
	for _, n := range []int{0, -1, math.MaxInt32 + 1} {
		if _, err := New(Params{}, n); !errors.Is(err, ErrVocabSize) {
			t.Errorf("New(vocab %d) error = %v, want ErrVocabSize", n, err)
		}
	}
}

func TestPanics(t *testing.T) {
	s := mustNew(t, Params{}, 4)
	for name, f := range map[string]func(){
		"short logits":  func() { s.Sample(make([]float32, 3)) },
		"long logits":   func() { s.Sample(make([]float32, 5)) },
		"Accept(-1)":    func() { s.Accept(-1) },
		"Accept(vocab)": func() { s.Accept(4) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}

func TestSampleAllocatesNothing(t *testing.T) {
	const vocab = 5000
	for name, p := range benchParams {
		t.Run(name, func(t *testing.T) {
			s := mustNew(t, p, vocab)
			src := randomLogits(vocab, 1)
			logits := make([]float32, vocab)
			tok := 0
			allocs := testing.AllocsPerRun(100, func() {
				copy(logits, src)
				tok = s.Sample(logits)
				s.Accept(tok)
			})
			if allocs != 0 {
				t.Errorf("Sample+Accept: %v allocs per run, want 0", allocs)
			}
		})
	}
}

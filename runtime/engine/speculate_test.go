package engine

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/grammar"
	"strata/runtime/sample"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// specPair writes a small synthetic target and its draft: the same shape
// and seed with fewer layers, so the draft shares the target's
// embedding, output head and first layers. The shape is Peaked (its
// residual carries a token channel that decides the top logit), so the
// two agree often, as a trained draft and target do.
func specPair(t testing.TB, typ tensor.Type, layers, draftLayers int) (target, draft string) {
	dir := t.TempDir()
	shape := smallLlama
	shape.Context = 1024
	shape.Peaked = true
	target, draft = filepath.Join(dir, "target.gguf"), filepath.Join(dir, "draft.gguf")
	if err := synth.WriteFile(target, shape, synth.Options{Type: typ, Seed: 5, Layers: layers}); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteFile(draft, shape, synth.Options{Type: typ, Seed: 5, Layers: draftLayers}); err != nil {
		t.Fatal(err)
	}
	return target, draft
}

// The answer with speculation is the answer without it, token for token:
// greedy, sampled with a seed, with a repeat penalty; from n-gram
// lookup and from a draft model; on a model summed row-sequentially
// (Q4_K: any number of guesses) and on float and Q8_0 ones (two guesses,
// their batch-invariance bound). And speculation did guess, and the
// model did agree with some guesses.
func TestSpeculationGivesTheSameAnswer(t *testing.T) {
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	q4Target, q4Draft := specPair(t, tensor.Q4_K, 4, 1)
	q8Target, q8Draft := specPair(t, tensor.Q8_0, 4, 1)
	cases := []struct {
		name, target, draft string
		prompt              string
		tokens              []int
	}{
		// stories260K is its own draft: its guesses are its greedy choices.
		{name: "stories260K", target: stories, draft: stories, prompt: "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day,"},
		{name: "Q4_K", target: q4Target, draft: q4Draft, tokens: []int{1, 17, 99, 300, 17, 99, 41}},
		{name: "Q8_0", target: q8Target, draft: q8Draft, tokens: []int{1, 5, 6, 7, 8, 5, 6}},
	}
	samplings := map[string]sample.Params{
		"greedy":  {},
		"sampled": {Temperature: 0.8, TopK: 40, Seed: 7},
		"penalty": {RepeatPenalty: 1.3, Seed: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plain, spec := openPair(t, c.target, c.draft)
			if spec.Model.InvariantRows() < 3 {
				t.Fatalf("invariant rows %d: no room for a guess", spec.Model.InvariantRows())
			}
			for sname, params := range samplings {
				for _, source := range []string{SpeculateNGram, SpeculateDraft} {
					req := Request{Prompt: c.prompt, Tokens: c.tokens, MaxTokens: 120, Sampling: params}
					want, err := plain.Generate(context.Background(), req, func(Token) error { return nil })
					if err != nil {
						t.Fatal(err)
					}
					req.Speculate = source
					var streamed []int
					got, err := spec.Generate(context.Background(), req, func(tok Token) error {
						streamed = append(streamed, tok.ID)
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got.Tokens, want.Tokens) || got.Text != want.Text {
						t.Errorf("%s, %s: the answer changed\n got %v\nwant %v", sname, source, got.Tokens, want.Tokens)
					}
					t.Logf("%s, %s: %d tokens in %d steps (%d without); %d guessed, %d right", sname, source,
						len(got.Tokens), got.Stats.Steps, want.Stats.Steps, got.Drafted, got.Accepted)
					if source == SpeculateDraft && (got.Drafted == 0 || got.Accepted == 0) {
						t.Errorf("%s, draft: %d guessed, %d right", sname, got.Drafted, got.Accepted)
					}
					if got.Accepted > 0 && got.Stats.Steps >= want.Stats.Steps {
						t.Errorf("%s, %s: %d steps with %d guesses accepted, %d without", sname, source, got.Stats.Steps, got.Accepted, want.Stats.Steps)
					}
				}
			}
		})
	}
}

// stories260K repeats itself: n-gram lookup guesses well on a prompt
// that already holds the story it continues.
func TestNGramGuessesRepeatedText(t *testing.T) {
	e, err := Open(testdata.Path(t, "gguf/stories260K.gguf"), Options{Threads: 1, PromptCache: -1, GuessEveryStep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	story, err := e.Generate(context.Background(), Request{MaxTokens: 100}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	prompt := append(append(append([]int{}, e.Encode("")...), story.Tokens...), e.Encode("")...)
	want, err := e.Generate(context.Background(), Request{Tokens: prompt, MaxTokens: 100}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	more := 0 // tokens said to be followed at once: each accepted guess's predecessor
	res, err := e.Generate(context.Background(), Request{Tokens: prompt, MaxTokens: 100, Speculate: SpeculateNGram}, func(t Token) error {
		if t.More {
			more++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want.Tokens) {
		t.Fatalf("retold story differs\n got %v\nwant %v", res.Tokens, want.Tokens)
	}
	if more != res.Accepted {
		t.Errorf("%d tokens said another follows at once; %d guesses were accepted", more, res.Accepted)
	}
	if res.Accepted < 30 {
		t.Errorf("%d of %d guesses right, in %d steps", res.Accepted, res.Drafted, res.Stats.Steps)
	}
	t.Logf("%d tokens in %d steps: %d guessed, %d right", len(res.Tokens), res.Stats.Steps, res.Drafted, res.Accepted)
}

// The n-gram lookup guesses what followed the longest earlier run of the
// text's last tokens (the latest of equally long ones), at most one token
// fewer than the run.
func TestNGramDraft(t *testing.T) {
	for _, c := range []struct {
		name string
		seq  []int
		k    int
		want []int
	}{
		{"the longest run, not the latest", []int{1, 2, 3, 9, 8, 5, 2, 3, 7, 1, 2, 3}, 8, []int{9, 8}},
		{"the latest of equal runs", []int{1, 2, 8, 1, 2, 9, 1, 2}, 8, []int{9}},
		{"a quoted span, k guesses", []int{1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5}, 2, []int{6, 7}},
		{"a quoted span, one fewer than the run", []int{1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5}, 8, []int{6, 7, 8, 1}},
		{"the run overlaps the text's tail", []int{7, 7, 7}, 8, []int{7}},
		{"one token is no run", []int{5, 1, 6, 1}, 8, nil},
		{"no earlier run", []int{1, 2, 3, 4}, 8, nil},
		{"k = 0", []int{1, 2, 3, 1, 2, 3}, 0, nil},
		{"too short", []int{4}, 8, nil},
	} {
		got, err := ngramDrafter{}.draft([]int{-1}, c.seq, c.k)
		if err != nil || !slices.Equal(got, append([]int{-1}, c.want...)) {
			t.Errorf("%s: %v guesses %v, %v; want %v after dst's -1", c.name, c.seq, got, err, c.want)
		}
	}
}

// Drafting ahead (a pipeline's session, while its stages check a step):
// the draft model goes on past the guesses; when the text then grows by
// what it foresaw, the next guesses are read off what it drafted, with
// no token fed, and are the guesses a fresh drafter makes for that text.
// A text that leaves that chain, and drafting stopped at once, give a
// fresh drafter's guesses too.
func TestDraftAhead(t *testing.T) {
	_, draftPath := specPair(t, tensor.Q4_K, 1, 1)
	d, err := Open(draftPath, Options{Threads: 1, Context: 256, PromptCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const most = 6
	newSpec := func(most int) *Speculator {
		sp, err := NewSpeculator(SpeculateDraft, d, 256, d.Model.Vocab, most)
		if err != nil {
			t.Fatal(err)
		}
		sp.GuessEveryStep()
		return sp
	}
	guess := func(sp *Speculator, text []int, k int) []int {
		t.Helper()
		g, err := sp.Guess(text, k)
		if err != nil || len(g) != k {
			t.Fatalf("%d guesses after %v, %v; want %d", len(g), text, err, k)
		}
		return slices.Clone(g)
	}
	fresh := func(text []int, k int) []int { return guess(newSpec(maxDraft), text, k) }

	seq := []int{1, 17, 99, 300, 17, 99, 41}
	sp := newSpec(most)
	g := guess(sp, seq, 4)
	chain := fresh(slices.Concat(seq, g), most+2) // the token after the guesses, then the next step's, and one more
	sp.DraftAhead(seq, g, most)
	if err := <-sp.ahead; err != nil {
		t.Fatal(err)
	}
	sp.ahead = nil
	m := sp.src.(*modelDrafter)
	fed := m.w.cache.Len
	if want := len(seq) + len(g) + most; fed != want || len(m.held) != want {
		t.Fatalf("drafted ahead to %d positions (%d held); want %d", fed, len(m.held), want)
	}
	text := slices.Concat(seq, g, chain[:1])
	if got := guess(sp, text, 4); !slices.Equal(got, chain[1:5]) || m.w.cache.Len != fed {
		t.Errorf("after the foreseen text: guesses %v with %d positions fed; want %v read off the chain (%d)", got, m.w.cache.Len, chain[1:5], fed)
	}
	// All the next step may guess: the chain's rest, then drafted on.
	if got := guess(sp, text, most); !slices.Equal(got, chain[1:most+1]) {
		t.Errorf("past the chain: guesses %v; want %v", got, chain[1:most+1])
	}
	// A text shorter than the one given: the chain past it was given,
	// not drafted, so it drafts again.
	if got, want := guess(sp, seq[:5], 3), fresh(seq[:5], 3); !slices.Equal(got, want) {
		t.Errorf("after a shorter text: guesses %v; a fresh drafter's %v", got, want)
	}

	// The text leaves the chain: the target disagreed with the third guess.
	other := slices.Concat(seq, g[:2], []int{(g[2] + 1) % d.Model.Vocab})
	if got, want := guess(sp, other, 4), fresh(other, 4); !slices.Equal(got, want) {
		t.Errorf("after a text off the chain: guesses %v; a fresh drafter's %v", got, want)
	}
	// Drafting ahead stopped at once by the next guess, for the text it
	// foresaw: whatever it drafted before the stop is read back, the rest
	// drafted; a fresh drafter's guesses either way.
	g = guess(sp, other, 3)
	next := fresh(slices.Concat(other, g), 1)
	sp.DraftAhead(other, g, most)
	text = slices.Concat(other, g, next)
	if got, want := guess(sp, text, 5), fresh(text, 5); !slices.Equal(got, want) {
		t.Errorf("after a stopped draft: guesses %v; a fresh drafter's %v", got, want)
	}
	sp.DraftAhead(text, g, most)
	sp.Close()
	if sp.ahead != nil {
		t.Error("Close left drafting ahead running")
	}
}

// The prompt cache after a speculative answer holds exactly the answer:
// the next turn resumes it and gives the uncached answer.
func TestSpeculationThenPromptCache(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	cached, err := Open(path, Options{Threads: 1, Context: 512, Draft: path, GuessEveryStep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cached.Close()
	plain, err := Open(path, Options{Threads: 1, Context: 512, PromptCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	turn1 := cached.Encode("Lily and Tom went to the park. They saw a big dog.")
	first, err := cached.Generate(context.Background(), Request{Tokens: turn1, MaxTokens: 37, Speculate: SpeculateDraft}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if first.Accepted == 0 {
		t.Fatalf("no guess accepted: %d guessed", first.Drafted)
	}
	turn2 := append(append(append([]int{}, turn1...), first.Tokens...), cached.Tokenizer.Encode("\nThen Tom said", false, false)...)
	got, err := cached.Generate(context.Background(), Request{Tokens: turn2, MaxTokens: 40, Speculate: SpeculateDraft}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain.Generate(context.Background(), Request{Tokens: turn2, MaxTokens: 40}, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got.CachedTokens < len(turn1) {
		t.Errorf("second turn: %d tokens cached, want at least %d", got.CachedTokens, len(turn1))
	}
	if !slices.Equal(got.Tokens, want.Tokens) {
		t.Fatalf("cached speculative answer differs\n got %v\nwant %v", got.Tokens, want.Tokens)
	}
}

// With temperature 1, the token at the first position decided by a
// verification step follows the target's distribution: a chi-square test
// over 2000 seeds, on the samples whose first token was the most common
// one (so that they share the prefix). The draft is stories260K itself:
// it always guesses the target's argmax, which a wrong verification rule
// (keeping the guess) would return every time.
func TestSpeculativeSamplingDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("2000 generations")
	}
	path := testdata.Path(t, "gguf/stories260K.gguf")
	e, err := Open(path, Options{Threads: 1, Context: 64, PromptCache: -1, Draft: path, GuessEveryStep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt := e.Encode("Once upon a time")
	const n = 2000
	firsts := map[int][]int{} // first token -> the second tokens after it
	drafted := 0
	for seed := range n {
		res, err := e.Generate(context.Background(), Request{Tokens: prompt, MaxTokens: 2, Speculate: SpeculateDraft,
			Sampling: sample.Params{Temperature: 1, Seed: uint64(seed)}}, func(Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tokens) == 2 {
			firsts[res.Tokens[0]] = append(firsts[res.Tokens[0]], res.Tokens[1])
		}
		drafted += res.Drafted
	}
	mode := -1
	for tok, seconds := range firsts {
		if mode < 0 || len(seconds) > len(firsts[mode]) {
			mode = tok
		}
	}
	seconds := firsts[mode]
	// The target's distribution after prompt + mode, computed apart.
	m := e.Model
	st := m.NewState(nil, 16, 64)
	c := m.NewCache(64)
	seq := append(append([]int{}, prompt...), mode)
	if err := st.Embed(seq); err != nil {
		t.Fatal(err)
	}
	if err := st.Forward(c, len(seq)); err != nil {
		t.Fatal(err)
	}
	logits, err := st.LogitsOf(len(seq) - 1)
	if err != nil {
		t.Fatal(err)
	}
	p := softmaxOf(logits)
	stat, df := chiSquare(seconds, p, 5)
	limit := chiSquareQuantile(df, 0.999)
	t.Logf("%d samples after token %d; %d guesses checked in %d generations; chi-square %.1f on %d degrees of freedom (0.999 quantile %.1f)",
		len(seconds), mode, drafted, n, stat, df, limit)
	if len(seconds) < 300 {
		t.Fatalf("only %d samples share the first token", len(seconds))
	}
	if drafted < n {
		t.Fatalf("%d guesses in %d generations: the second tokens did not come from checking steps", drafted, n)
	}
	if stat > limit {
		t.Errorf("chi-square %.1f > %.1f: the speculative samples do not follow the target's distribution", stat, limit)
	}
}

func softmaxOf(logits []float32) []float64 {
	top := float64(slices.Max(logits))
	p := make([]float64, len(logits))
	var sum float64
	for i, l := range logits {
		p[i] = math.Exp(float64(l) - top)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// chiSquare is Pearson's statistic of samples against p, with the tokens
// whose expected count is below minExpected pooled into one bin; it
// returns the statistic and the degrees of freedom.
func chiSquare(samples []int, p []float64, minExpected float64) (float64, int) {
	counts := make([]float64, len(p))
	for _, s := range samples {
		counts[s]++
	}
	n := float64(len(samples))
	var stat, restObs, restExp float64
	bins := 0
	for i, q := range p {
		if e := q * n; e >= minExpected {
			stat += (counts[i] - e) * (counts[i] - e) / e
			bins++
		} else {
			restObs += counts[i]
			restExp += e
		}
	}
	if restExp > 0 {
		stat += (restObs - restExp) * (restObs - restExp) / restExp
		bins++
	}
	return stat, bins - 1
}

// chiSquareQuantile approximates the q quantile of the chi-square
// distribution with df degrees of freedom (Wilson–Hilferty).
func chiSquareQuantile(df int, q float64) float64 {
	z := math.Sqrt2 * math.Erfinv(2*q-1)
	k := float64(df)
	h := 2 / (9 * k)
	return k * math.Pow(1-h+z*math.Sqrt(h), 3)
}

// Speculating generations in company give the tokens each gives alone
// (speculation steps aside while others share the steps, and takes up
// again when a generation is alone).
func TestSpeculationInCompany(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	e, err := Open(path, Options{Threads: 2, Context: 256, PromptCache: -1, Draft: path, Speculate: SpeculateDraft, GuessEveryStep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var reqs []Request
	for i := range 4 {
		reqs = append(reqs, Request{Tokens: []int{1, 2 + i*17, 3 + i*5}, MaxTokens: 40 + 30*i})
	}
	alone := make([]Result, len(reqs))
	for i, r := range reqs {
		if alone[i], err = e.Generate(context.Background(), r, func(Token) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if alone[i].Accepted == 0 {
			t.Fatalf("request %d alone: no guess accepted", i)
		}
	}
	got := make([]Result, len(reqs))
	errs := make(chan error, len(reqs))
	for i, r := range reqs {
		go func() {
			var err error
			got[i], err = e.Generate(context.Background(), r, func(Token) error { return nil })
			errs <- err
		}()
	}
	for range reqs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range reqs {
		if !slices.Equal(got[i].Tokens, alone[i].Tokens) {
			t.Errorf("request %d in company:\n got %v\nwant %v", i, got[i].Tokens, alone[i].Tokens)
		}
	}
}

// Structured output: guesses the grammar would mask are cut before the
// check, so with stories260K as its own draft (its guesses are the
// unconstrained greedy choices, and the check's rows are bit for bit the
// draft's) every guess that reaches a check is drawn: none is rejected.
// The answer is the one without speculation.
func TestGuessesPassTheGrammarFirst(t *testing.T) {
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	sc, err := grammar.Compile([]byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":60},"age":{"type":"integer"}},"required":["name","age"]}`))
	if err != nil {
		t.Fatal(err)
	}
	plain, spec := openPair(t, stories, stories)
	req := Request{Prompt: `Lily was a little girl. {"name": "Lily`, MaxTokens: 60, Schema: sc}
	want, err := plain.Generate(context.Background(), req, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	req.Speculate = SpeculateDraft
	got, err := spec.Generate(context.Background(), req, func(Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, want.Tokens) {
		t.Errorf("the answer changed\n got %q\nwant %q", got.Text, want.Text)
	}
	t.Logf("%q: %d guessed, %d right, %d steps (%d without)", got.Text, got.Drafted, got.Accepted, got.Stats.Steps, want.Stats.Steps)
	if got.Drafted == 0 || got.Accepted != got.Drafted {
		t.Errorf("%d guesses checked, %d drawn: a guess the grammar masks reached a check", got.Drafted, got.Accepted)
	}
}

// A stop string ends a speculating answer where it ends the plain one,
// even when the tokens after it were already checked.
func TestSpeculationStopsAtAStopString(t *testing.T) {
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	plain, spec := openPair(t, stories, stories)
	for _, stop := range []string{"park", "ball.", "\n"} {
		req := Request{Prompt: "Once upon a time, there was a little girl named Lily. She loved to play outside in the", MaxTokens: 100, Stop: []string{stop}}
		want, err := plain.Generate(context.Background(), req, func(Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		for _, source := range []string{SpeculateNGram, SpeculateDraft} {
			req.Speculate = source
			got, err := spec.Generate(context.Background(), req, func(Token) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != want.Text || got.FinishReason != want.FinishReason {
				t.Errorf("stop %q, %s: %q (%s), without speculation %q (%s)", stop, source, got.Text, got.FinishReason, want.Text, want.FinishReason)
			}
			if want.FinishReason != FinishStop {
				t.Errorf("stop %q: the plain answer ended by %s: the case tests nothing", stop, want.FinishReason)
			}
			if got.Accepted > got.Drafted {
				t.Errorf("stop %q, %s: %d of %d guesses counted right", stop, source, got.Accepted, got.Drafted)
			}
		}
	}
}

// openPair opens target twice, 2 threads, 512 positions, no prompt
// cache: plain, and spec with draft as its draft model.
func openPair(t *testing.T, target, draft string) (plain, spec *Engine) {
	t.Helper()
	open := func(o Options) *Engine {
		o.Threads, o.Context, o.PromptCache = 2, 512, -1
		e, err := Open(target, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	return open(Options{}), open(Options{Draft: draft, GuessEveryStep: true})
}

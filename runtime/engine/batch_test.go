package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/model"
	"strata/runtime/sample"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// smallLlama is a 2-layer llama small enough for a unit test, in whole
// 256-element blocks for the K-quants.
var smallLlama = model.Shape{Name: "llama-small", Arch: "llama", Layers: 2, Embd: 256, FFN: 512, Heads: 4, KVHeads: 2,
	Vocab: 512, Context: 512, RopeBase: 10000}

// Eight generations at once, through the batcher, give each the tokens
// it gives alone (greedy and seeded sampling, prompts of different
// lengths, float and quantized weights), and the batcher did run them in
// company.
func TestConcurrentGenerationsAsAlone(t *testing.T) {
	paths := map[string]string{"stories260K": testdata.Path(t, "gguf/stories260K.gguf")}
	for _, typ := range []tensor.Type{tensor.Q8_0, tensor.Q4_K} {
		p := filepath.Join(t.TempDir(), fmt.Sprintf("small-%v.gguf", typ))
		if err := synth.WriteFile(p, smallLlama, synth.Options{Type: typ, Seed: 3}); err != nil {
			t.Fatal(err)
		}
		paths[typ.String()] = p
	}
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			e, err := Open(path, Options{Threads: 2, Context: 256, Batch: 16, PromptCache: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var reqs []Request
			for i := range 8 {
				prompt := []int{1}
				for j := range 3 + 11*i%29 {
					prompt = append(prompt, 2+(i*37+j*11)%(e.Model.Vocab-2))
				}
				r := Request{Tokens: prompt, MaxTokens: 24}
				if i%3 == 2 {
					r.Sampling = sample.Params{Temperature: 0.9, TopK: 20, Seed: uint64(i)}
				}
				reqs = append(reqs, r)
			}
			alone := make([]Result, len(reqs))
			for i, r := range reqs {
				if alone[i], err = e.Generate(context.Background(), r, func(Token) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			steps0, rows0, mixed0 := e.batcher.stats()
			together := make([]Result, len(reqs))
			errs := make([]error, len(reqs))
			var wg sync.WaitGroup
			for i, r := range reqs {
				wg.Go(func() {
					together[i], errs[i] = e.Generate(context.Background(), r, func(Token) error { return nil })
				})
			}
			wg.Wait()
			for i := range reqs {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if fmt.Sprint(together[i].Tokens) != fmt.Sprint(alone[i].Tokens) {
					t.Errorf("generation %d in company:\n got %v\nalone %v", i, together[i].Tokens, alone[i].Tokens)
				}
			}
			steps, rows, mixed := e.batcher.stats()
			steps, rows, mixed = steps-steps0, rows-rows0, mixed-mixed0
			t.Logf("%d steps carried %d rows (%.2f per step); %d mixed prompt chunks with others' work", steps, rows, float64(rows)/float64(steps), mixed)
			if rows <= steps {
				t.Errorf("no step ran more than one generation's rows: %d steps, %d rows", steps, rows)
			}

		})
	}
}

// A closed engine refuses generations with an error.
func TestClosedEngineRefuses(t *testing.T) {
	e, err := Open(testdata.Path(t, "gguf/stories260K.gguf"), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.batcher.close()
	if _, err := e.Generate(context.Background(), Request{Prompt: "Lily", MaxTokens: 3}, func(Token) error { return nil }); err == nil {
		t.Error("a closed engine generated")
	}
	e.pool.Close()
	e.File.Close()
}

// A prompt chunk shares a step with another generation's decoding where
// the rows fit the model's invariance bound (here a Q4_K model: any
// number), and the logits of both are those they get in steps of their
// own.
func TestPromptChunkSharesAStep(t *testing.T) {
	p := filepath.Join(t.TempDir(), "q4k.gguf")
	if err := synth.WriteFile(p, smallLlama, synth.Options{Type: tensor.Q4_K, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	e, err := Open(p, Options{Threads: 2, Context: 64, Batch: 16, PromptCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m := e.Model
	newWork := func(tokens []int, at int) *work {
		c := m.NewCache(64)
		c.Len = at
		return &work{cache: c, tokens: tokens, logits: make([]float32, m.Vocab), done: make(chan error, 1)}
	}
	// Caches with something in them: a few tokens each, alone.
	prefix := []int{1, 7, 9, 11}
	warm := func() (*work, *work) {
		a, b := newWork(prefix, 0), newWork(prefix[:2], 0)
		for _, w := range []*work{a, b} {
			if err := e.batcher.do(w); err != nil {
				t.Fatal(err)
			}
		}
		return a, b
	}
	// Alone: a chunk of 5 on a, one token on b.
	a, b := warm()
	a.tokens, b.tokens = []int{20, 21, 22, 23, 24}, []int{30}
	for _, w := range []*work{a, b} {
		if err := e.batcher.do(w); err != nil {
			t.Fatal(err)
		}
	}
	wantA, wantB := slices.Clone(a.logits), slices.Clone(b.logits)
	// Together: both pending before the batcher looks.
	a, b = warm()
	a.tokens, b.tokens = []int{20, 21, 22, 23, 24}, []int{30}
	_, _, mixed0 := e.batcher.stats()
	e.batcher.mu.Lock()
	e.batcher.pending = append(e.batcher.pending, a, b)
	e.batcher.mu.Unlock()
	e.batcher.wake <- struct{}{}
	for _, w := range []*work{a, b} {
		if err := <-w.done; err != nil {
			t.Fatal(err)
		}
	}
	if _, _, mixed := e.batcher.stats(); mixed != mixed0+1 {
		t.Fatalf("the chunk and the token ran in %d mixed steps, want 1", mixed-mixed0)
	}
	if !slices.Equal(a.logits, wantA) || !slices.Equal(b.logits, wantB) {
		t.Error("logits in company differ from alone")
	}
}

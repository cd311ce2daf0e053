package engine

import (
	"context"
	"fmt"
	"path/filepath"
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
			steps0, rows0 := e.batcher.stats()
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
			steps, rows := e.batcher.stats()
			steps, rows = steps-steps0, rows-rows0
			t.Logf("%d steps carried %d rows (%.2f per step)", steps, rows, float64(rows)/float64(steps))
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

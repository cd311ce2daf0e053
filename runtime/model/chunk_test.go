package model_test

import (
	"math"
	"path/filepath"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// q4kTiny is a llama shape whose every matrix can be a K-quant (widths
// that are whole 256-blocks).
var q4kTiny = model.Shape{Name: "q4k-tiny", Arch: "llama", Layers: 2, Embd: 256, FFN: 512, Heads: 4, KVHeads: 2,
	Vocab: 512, Context: 1024, RopeBase: 10000}

// A prompt processed in chunks of 1, 7, 64 or 512 tokens leaves the same
// cache and gives the same logits, bit for bit, when every matrix is of a
// type summed row-sequentially on every kernel set (Q4_K, Q5_K, Q6_K): so a prompt
// resumed from the prompt cache, or prefilled beside other sessions'
// steps, answers as if it ran alone in one piece. Checked with every
// kernel set this CPU has (all must give the same bits), on two threads.
func TestPrefillChunkingInvariant(t *testing.T) {
	for _, typ := range []tensor.Type{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		t.Run(typ.String(), func(t *testing.T) { checkChunking(t, typ) })
	}
}

func checkChunking(t *testing.T, typ tensor.Type) {
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.WriteFile(p, q4kTiny, synth.Options{Type: typ, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f, 0, q4kTiny.Layers)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.InvariantRows(); got != math.MaxInt {
		t.Fatalf("InvariantRows of an all-%v model: %d, want no bound", typ, got)
	}
	model.CheckCompany(t, m) // all five sequences' steps in one batch
	const promptLen, after = 530, 3
	tokens := make([]int, promptLen+after)
	for i := range tokens {
		tokens[i] = 1 + (i*37+11)%(q4kTiny.Vocab-1)
	}
	// run prefills the prompt in chunks of c, then decodes after tokens
	// one at a time, and returns the logits after the prompt and after
	// each decoded token.
	run := func(pool *tensor.Pool, c int) [][]float32 {
		st := m.NewState(pool, 512, 1024)
		cache := m.NewCache(1024)
		var out [][]float32
		for i := 0; i < promptLen; i += c {
			n := min(c, promptLen-i)
			if err := st.Embed(tokens[i : i+n]); err != nil {
				t.Fatal(err)
			}
			if err := st.Forward(cache, n); err != nil {
				t.Fatal(err)
			}
			if i+n == promptLen {
				l, err := st.LogitsOf(n - 1)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, append([]float32(nil), l...))
			}
		}
		for k := range after {
			if err := st.Embed(tokens[promptLen+k : promptLen+k+1]); err != nil {
				t.Fatal(err)
			}
			if err := st.Forward(cache, 1); err != nil {
				t.Fatal(err)
			}
			l, err := st.LogitsOf(0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, append([]float32(nil), l...))
		}
		return out
	}
	orig := tensor.Kernels()
	defer func() {
		if err := tensor.SetKernels(orig); err != nil {
			t.Fatal(err)
		}
	}()
	var first [][]float32 // the first kernel set's answer: every set must give it
	for _, set := range tensor.KernelSets() {
		if err := tensor.SetKernels(set); err != nil {
			t.Fatal(err)
		}
		{
			const threads = 2 // a pool's split of the rows is the tensor tests' (TestMatMulActBatchInvariant)
			pool := tensor.NewPool(threads)
			for _, c := range []int{512, 64, 7, 1} {
				got := run(pool, c)
				if first == nil {
					first = got
					continue
				}
				for k := range got {
					for i := range got[k] {
						if math.Float32bits(got[k][i]) != math.Float32bits(first[k][i]) {
							pool.Close()
							t.Fatalf("kernels %s, %d threads, chunks of %d: logits %d (after %d decoded tokens), entry %d: %v, want %v",
								set, threads, c, k, k, i, got[k][i], first[k][i])
						}
					}
				}
			}
			pool.Close()
		}
	}
}

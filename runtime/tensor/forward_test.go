package tensor_test

import (
	"math"
	"path/filepath"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// fidelityShape is tinyllama's architecture, small: rows of whole 256-blocks
// for the K-quants, grouped-query attention, two layers.
var fidelityShape = model.Shape{Name: "fidelity", Arch: "llama", Layers: 2, Embd: 256, FFN: 768, Heads: 4, KVHeads: 2, Vocab: 1000, Context: 256, RopeBase: 10000}

// modelLogits runs a synthetic model over ids teacher-forced, the first
// prefill of them as one batch (the batch kernels) and the rest one token at
// a time (the one-token kernels), and returns the logits of every position,
// [len(ids)][vocab].
func modelLogits(t *testing.T, m *model.Model, pool *tensor.Pool, ids []int, prefill int) [][]float32 {
	t.Helper()
	s := m.NewState(pool, prefill, len(ids))
	c := m.NewCache(len(ids))
	var out [][]float32
	logits := func(i int) {
		l, err := s.LogitsOf(i)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
	}
	if err := s.Embed(ids[:prefill]); err != nil {
		t.Fatal(err)
	}
	if err := s.Forward(c, prefill); err != nil {
		t.Fatal(err)
	}
	for i := range prefill {
		logits(i)
	}
	for _, id := range ids[prefill:] {
		if err := s.Embed([]int{id}); err != nil {
			t.Fatal(err)
		}
		if err := s.Forward(c, 1); err != nil {
			t.Fatal(err)
		}
		logits(0)
	}
	return out
}

// A whole forward pass with quantized weights gives the same logits with
// every kernel set: the integer kernels are exact and every float step
// between them (attention dots, Axpy, SwiGLU, the activation quantizer)
// rounds the same way. A last-bit difference anywhere would move some
// activation across a quantization step, which shows in the logits at
// about 1e-4..1e-2 of the largest one, far above the 1e-5 allowed here.
func TestForwardSameAcrossKernels(t *testing.T) {
	ids := make([]int, 40)
	for i := range ids {
		ids[i] = 1 + (i*389)%999
	}
	pool := tensor.NewPool(2)
	defer pool.Close()
	for _, typ := range []tensor.Type{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		t.Run(typ.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := synth.WriteFile(path, fidelityShape, synth.Options{Type: typ, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := model.Load(f, 0, fidelityShape.Layers)
			if err != nil {
				t.Fatal(err)
			}
			var want [][]float32
			tensor.EachImpl(t, func(t *testing.T) {
				got := modelLogits(t, m, pool, ids, 32)
				if want == nil {
					want = got // the generic kernels run first
					return
				}
				var maxDiff, maxLogit float64
				for p := range got {
					for i := range got[p] {
						maxDiff = max(maxDiff, math.Abs(float64(got[p][i]-want[p][i])))
						maxLogit = max(maxLogit, math.Abs(float64(want[p][i])))
					}
				}
				rel := maxDiff / maxLogit
				if rel > 1e-5 {
					t.Fatalf("%s logits differ from the generic kernels' by %.3g of the largest logit (%.3g)", tensor.Kernels(), rel, maxLogit)
				}
				t.Logf("%s vs generic: max |difference| %.3g of the largest logit", tensor.Kernels(), rel)
			})
		})
	}
}

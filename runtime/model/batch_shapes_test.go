package model_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// TestBatchInvariance on every architecture's small synthetic shape
// (attention with biases or per-head norms, Llama 3 rope factors, mixture
// of experts, multi-head latent attention).
func TestBatchInvarianceShapes(t *testing.T) {
	for _, name := range []string{"qwen2-tiny", "qwen3-tiny", "llama3-tiny", "qwen3moe-tiny", "deepseek2-tiny"} {
		for _, typ := range []tensor.Type{tensor.F32, tensor.Q8_0} {
			t.Run(fmt.Sprintf("%s/%v", name, typ), func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "m.gguf")
				if err := synth.WriteFile(p, model.Shapes[name], synth.Options{Type: typ, Seed: 5}); err != nil {
					t.Fatal(err)
				}
				f, err := gguf.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				m, err := model.Load(f, 0, model.Shapes[name].Layers)
				if err != nil {
					t.Fatal(err)
				}
				model.CheckCompany(t, m)
			})
		}
	}
}

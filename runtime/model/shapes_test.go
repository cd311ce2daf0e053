package model

import (
	"testing"

	"strata/runtime/tensor"
)

// Parameter counts of the named shapes match the published model sizes.
func TestShapeParameterCounts(t *testing.T) {
	for name, want := range map[string][2]float64{ // billions of parameters, low..high
		"tinyllama-1.1b":  {1.09, 1.11},
		"llama-3.2-1b":    {1.23, 1.24},
		"llama-3.1-8b":    {8.0, 8.05},
		"qwen3-0.6b":      {0.59, 0.61},
		"qwen3-30b-a3b":   {30.4, 30.6},
		"qwen3-235b-a22b": {234, 236},
		"kimi-k2":         {1020, 1040},
	} {
		s, err := LookupShape(name)
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, ts := range s.Tensors(tensor.F32) {
			n += ts.Bytes() / 4
		}
		b := float64(n) / 1e9
		if b < want[0] || b > want[1] {
			t.Errorf("%s: %.3fB parameters, want %.2f..%.2f", name, b, want[0], want[1])
		}
	}
	if _, err := LookupShape("gpt-5"); err == nil {
		t.Error("unknown shape accepted")
	}
}

func TestShapeProfile(t *testing.T) {
	s := Shapes["tinyllama-1.1b"]
	p := s.Profile(tensor.Q8_0)
	if p.Layers != 22 || p.LayerBytes[0] != p.LayerBytes[21] || p.KVBytesPerToken != 22*4*64*2*4 {
		t.Errorf("profile %+v", p)
	}
	// Q8_0 stores 34 bytes per 32 weights.
	attnQ := uint64(2048*2048) / 32 * 34
	if p.LayerBytes[0] < attnQ {
		t.Errorf("layer bytes %d", p.LayerBytes[0])
	}
}

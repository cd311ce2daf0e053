package model

import (
	"testing"

	"strata/runtime/tensor"
)

// Parameter counts of the named shapes match the published model sizes.
func TestShapeParameterCounts(t *testing.T) {
	for name, want := range map[string][2]float64{ // billions of parameters, low..high
		"tinyllama-1.1b":   {1.09, 1.11},
		"llama-3.2-1b":     {1.23, 1.24},
		"llama-3.1-8b":     {8.0, 8.05},
		"qwen3-0.6b":       {0.59, 0.61},
		"qwen3-30b-a3b":    {30.4, 30.6},
		"qwen3-235b-a22b":  {234, 236},
		"kimi-k2":          {1020, 1040},
		"deepseek-v2-lite": {15.6, 15.8},
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
	if p.Layers != 22 || p.LayerBytes[0] != p.LayerBytes[21] || p.KVBytesPerToken != 22*4*64*2*2 {
		t.Errorf("profile %+v", p)
	}
	// Q8_0 stores 34 bytes per 32 weights.
	attnQ := uint64(2048*2048) / 32 * 34
	if p.LayerBytes[0] < attnQ {
		t.Errorf("layer bytes %d", p.LayerBytes[0])
	}
}

// deepseek2 shapes list the tensors current converters write (the
// attention's up-projection split per head into attn_k_b and attn_v_b),
// or the older attn_kv_b when asked.
func TestDeepseek2ShapeTensors(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		s := Shapes["kimi-k2"]
		s.LegacyKVB = legacy
		has := map[string][]uint64{}
		for _, ts := range s.Tensors(tensor.Q4_K) {
			has[ts.Name] = ts.Dims
		}
		kb, okK := has["blk.0.attn_k_b.weight"]
		_, okKV := has["blk.0.attn_kv_b.weight"]
		if okK == legacy || okKV != legacy {
			t.Errorf("legacy %v: attn_k_b %v, attn_kv_b %v", legacy, okK, okKV)
		}
		if !legacy && (len(kb) != 3 || kb[0] != 128 || kb[1] != 512 || kb[2] != 64) {
			t.Errorf("attn_k_b dims %v, want [128 512 64]", kb)
		}
		if _, ok := has["blk.1.exp_probs_b.bias"]; !ok {
			t.Error("kimi-k2 has no exp_probs_b")
		}
		if _, ok := has["blk.0.attn_q_a.weight"]; !ok {
			t.Error("kimi-k2 has no q LoRA")
		}
	}
	lite := Shapes["deepseek-v2-lite"]
	for _, ts := range lite.Tensors(tensor.F16) {
		if ts.Name == "blk.0.attn_q_a.weight" || ts.Name == "blk.1.exp_probs_b.bias" {
			t.Errorf("deepseek-v2-lite has %s", ts.Name)
		}
	}
}

func TestSessionContext(t *testing.T) {
	for _, c := range []struct{ model, asked, want int }{
		{2048, 0, 2048},                     // a small model: all of it
		{131072, 0, DefaultContext},         // a long one: the default
		{131072, 8192, 8192},                // asked for more than the default
		{2048, 8192, 2048},                  // never past the model's
		{DefaultContext, 0, DefaultContext}, // exactly the default
	} {
		if got := SessionContext(c.model, c.asked); got != c.want {
			t.Errorf("SessionContext(%d, %d) = %d, want %d", c.model, c.asked, got, c.want)
		}
	}
}

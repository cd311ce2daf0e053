package model

import (
	"fmt"
	"sort"
	"strings"

	"strata/runtime/tensor"
)

// Shape describes a real model's architecture well enough to list every
// tensor it has: for `strata synth` (random-weight files of real shapes)
// and for placement on models nobody has downloaded.
type Shape struct {
	Name      string
	Arch      string // llama, qwen3, qwen3moe, deepseek2
	Layers    int
	Embd      int
	FFN       int // dense feed-forward width
	Heads     int
	KVHeads   int
	HeadDim   int // 0 = Embd/Heads
	Vocab     int
	Context   int
	RopeBase  float32
	TiedEmbed bool
	QKNorm    bool
	QKVBias   bool // attn_{q,k,v}.bias (qwen2)
	// RopeFreqs adds Llama 3.1's rope_freqs.weight: per-pair frequency
	// divisors for long context (factor 8, original context 8192).
	RopeFreqs bool
	// Peaked marks a test shape: its synthetic weights make the top logit
	// stand out (see synth), so an oracle comparison's argmax is not a
	// coin toss between near-equal logits.
	Peaked bool

	// Mixture of experts (qwen3moe, deepseek2).
	Experts, ExpertsUsed, ExpertFFN int
	SharedExperts                   int // deepseek2 shared experts
	DenseLayers                     int // leading layers with a dense FFN (deepseek2)

	// DeepSeek-V3 routing (deepseek2): sigmoid router scores with a
	// selection bias (exp_probs_b) instead of a softmax, experts chosen
	// within the ExpertGroupsUsed best of ExpertGroups groups, and the
	// chosen weights renormalised and scaled.
	SigmoidGating                  bool
	ExpertGroups, ExpertGroupsUsed int
	ExpertWeightsNorm              bool
	ExpertWeightsScale             float32

	// Multi-head latent attention (deepseek2). QLoraRank 0 means a plain
	// attn_q (DeepSeek-V2-Lite). LegacyKVB writes the older converters'
	// attn_kv_b instead of attn_k_b/attn_v_b.
	QLoraRank, KVLoraRank, RopeHeadDim, NopeHeadDim, VHeadDim int
	LegacyKVB                                                 bool

	// YaRN rope scaling (deepseek2): factor over the original context,
	// and mscale_all_dim (written as yarn_log_multiplier = 0.1*it).
	RopeScaling   float32
	RopeOrigCtx   int
	YarnMscaleAll float32
}

// Shapes are the real model shapes strata knows by name.
var Shapes = map[string]Shape{
	"tinyllama-1.1b": {Name: "tinyllama-1.1b", Arch: "llama", Layers: 22, Embd: 2048, FFN: 5632, Heads: 32, KVHeads: 4, Vocab: 32000, Context: 2048, RopeBase: 10000},
	"llama-3.2-1b":   {Name: "llama-3.2-1b", Arch: "llama", Layers: 16, Embd: 2048, FFN: 8192, Heads: 32, KVHeads: 8, Vocab: 128256, Context: 131072, RopeBase: 500000, TiedEmbed: true},
	"llama-3.1-8b":   {Name: "llama-3.1-8b", Arch: "llama", Layers: 32, Embd: 4096, FFN: 14336, Heads: 32, KVHeads: 8, Vocab: 128256, Context: 131072, RopeBase: 500000},
	"qwen3-0.6b":     {Name: "qwen3-0.6b", Arch: "qwen3", Layers: 28, Embd: 1024, FFN: 3072, Heads: 16, KVHeads: 8, HeadDim: 128, Vocab: 151936, Context: 40960, RopeBase: 1000000, TiedEmbed: true, QKNorm: true},
	"qwen3-30b-a3b": {Name: "qwen3-30b-a3b", Arch: "qwen3moe", Layers: 48, Embd: 2048, FFN: 6144, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936, Context: 40960, RopeBase: 1000000, QKNorm: true,
		Experts: 128, ExpertsUsed: 8, ExpertFFN: 768},
	"qwen3-235b-a22b": {Name: "qwen3-235b-a22b", Arch: "qwen3moe", Layers: 94, Embd: 4096, Heads: 64, KVHeads: 4, HeadDim: 128, Vocab: 151936, Context: 40960, RopeBase: 1000000, QKNorm: true,
		Experts: 128, ExpertsUsed: 8, ExpertFFN: 1536},
	"kimi-k2": {Name: "kimi-k2", Arch: "deepseek2", Layers: 61, Embd: 7168, FFN: 18432, Heads: 64, KVHeads: 64, Vocab: 163840, Context: 131072, RopeBase: 50000,
		Experts: 384, ExpertsUsed: 8, ExpertFFN: 2048, SharedExperts: 1, DenseLayers: 1,
		SigmoidGating: true, ExpertGroups: 1, ExpertGroupsUsed: 1, ExpertWeightsNorm: true, ExpertWeightsScale: 2.827,
		QLoraRank: 1536, KVLoraRank: 512, RopeHeadDim: 64, NopeHeadDim: 128, VHeadDim: 128,
		RopeScaling: 32, RopeOrigCtx: 4096, YarnMscaleAll: 1},
	"deepseek-v2-lite": {Name: "deepseek-v2-lite", Arch: "deepseek2", Layers: 27, Embd: 2048, FFN: 10944, Heads: 16, KVHeads: 16, Vocab: 102400, Context: 163840, RopeBase: 10000,
		Experts: 64, ExpertsUsed: 6, ExpertFFN: 1408, SharedExperts: 2, DenseLayers: 1, ExpertWeightsScale: 1,
		KVLoraRank: 512, RopeHeadDim: 64, NopeHeadDim: 128, VHeadDim: 128,
		RopeScaling: 40, RopeOrigCtx: 4096, YarnMscaleAll: 0.707},
	// deepseek2-tiny keeps every deepseek2 feature at test size: q and kv
	// LoRA, YaRN, one leading dense layer, a shared expert, sigmoid routing
	// with a selection bias in 2 groups of 4 experts (top-2).
	"deepseek2-tiny": {Name: "deepseek2-tiny", Arch: "deepseek2", Layers: 3, Embd: 128, FFN: 256, Heads: 4, KVHeads: 4, Vocab: 1024, Context: 512, RopeBase: 10000,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, SharedExperts: 1, DenseLayers: 1,
		SigmoidGating: true, ExpertGroups: 2, ExpertGroupsUsed: 1, ExpertWeightsNorm: true, ExpertWeightsScale: 2.5,
		QLoraRank: 64, KVLoraRank: 64, RopeHeadDim: 32, NopeHeadDim: 32, VHeadDim: 32,
		RopeScaling: 4, RopeOrigCtx: 64, YarnMscaleAll: 1, Peaked: true},
}

// Small shapes of each architecture for tests against llama.cpp: every
// feature of the architecture, a vocabulary over 1000, weights that make
// logits peaked, files of a few hundred KB.
func init() {
	for _, s := range []Shape{
		{Name: "qwen2-tiny", Arch: "qwen2", Layers: 2, Embd: 128, FFN: 256, Heads: 4, KVHeads: 2, Vocab: 1024, Context: 4096, RopeBase: 1000000, QKVBias: true},
		{Name: "qwen3-tiny", Arch: "qwen3", Layers: 2, Embd: 128, FFN: 256, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 1024, Context: 4096, RopeBase: 1000000, QKNorm: true},
		{Name: "qwen3moe-tiny", Arch: "qwen3moe", Layers: 2, Embd: 128, FFN: 384, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 1024, Context: 4096, RopeBase: 1000000, QKNorm: true,
			Experts: 8, ExpertsUsed: 2, ExpertFFN: 64},
		{Name: "llama3-tiny", Arch: "llama", Layers: 2, Embd: 128, FFN: 256, Heads: 4, KVHeads: 2, Vocab: 1024, Context: 131072, RopeBase: 500000, RopeFreqs: true},
	} {
		s.Peaked = true
		Shapes[s.Name] = s
	}
}

// ShapeNames lists the known shapes, sorted.
func ShapeNames() []string {
	names := make([]string, 0, len(Shapes))
	for n := range Shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupShape returns the named shape or an error listing the known ones.
func LookupShape(name string) (Shape, error) {
	s, ok := Shapes[name]
	if !ok {
		return s, fmt.Errorf("model: unknown shape %q (known: %s)", name, strings.Join(ShapeNames(), ", "))
	}
	return s, nil
}

// TensorSpec is one tensor of a shape: GGUF name, ggml dims and type.
type TensorSpec struct {
	Name string
	Dims []uint64
	Type tensor.Type
}

// Bytes is the tensor's size in its type.
func (t TensorSpec) Bytes() uint64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	b, _ := t.Type.RowBytes(n)
	return uint64(b)
}

func (s Shape) headDim() int {
	if s.HeadDim > 0 {
		return s.HeadDim
	}
	return s.Embd / s.Heads
}

// Tensors lists the shape's tensors in GGUF order, matrices in type wt
// (norms, biases and the expert router stay F32, as llama.cpp's quantizer
// leaves them). Matrices whose rows are not a whole number of wt blocks
// fall back to F16, also as llama.cpp does.
func (s Shape) Tensors(wt tensor.Type) []TensorSpec {
	var ts []TensorSpec
	vec := func(name string, n int) { ts = append(ts, TensorSpec{name, []uint64{uint64(n)}, tensor.F32}) }
	mat := func(name string, dims ...int) {
		t := wt
		if dims[0]%wt.BlockSize() != 0 {
			t = tensor.F16
		}
		d := make([]uint64, len(dims))
		for i, x := range dims {
			d[i] = uint64(x)
		}
		ts = append(ts, TensorSpec{name, d, t})
	}
	e, hd := s.Embd, s.headDim()
	mat("token_embd.weight", e, s.Vocab)
	if s.RopeFreqs {
		vec("rope_freqs.weight", hd/2)
	}
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		vec(p+"attn_norm.weight", e)
		if s.Arch == "deepseek2" {
			qk := s.NopeHeadDim + s.RopeHeadDim
			if s.QLoraRank > 0 {
				mat(p+"attn_q_a.weight", e, s.QLoraRank)
				vec(p+"attn_q_a_norm.weight", s.QLoraRank)
				mat(p+"attn_q_b.weight", s.QLoraRank, s.Heads*qk)
			} else {
				mat(p+"attn_q.weight", e, s.Heads*qk)
			}
			mat(p+"attn_kv_a_mqa.weight", e, s.KVLoraRank+s.RopeHeadDim)
			vec(p+"attn_kv_a_norm.weight", s.KVLoraRank)
			if s.LegacyKVB {
				mat(p+"attn_kv_b.weight", s.KVLoraRank, s.Heads*(s.NopeHeadDim+s.VHeadDim))
			} else {
				// What current converters write: kv_b split per head into
				// W_UK^T ([nope, kv_lora] per head) and W_UV.
				mat(p+"attn_k_b.weight", s.NopeHeadDim, s.KVLoraRank, s.Heads)
				mat(p+"attn_v_b.weight", s.KVLoraRank, s.VHeadDim, s.Heads)
			}
			mat(p+"attn_output.weight", s.Heads*s.VHeadDim, e)
		} else {
			mat(p+"attn_q.weight", e, s.Heads*hd)
			mat(p+"attn_k.weight", e, s.KVHeads*hd)
			mat(p+"attn_v.weight", e, s.KVHeads*hd)
			if s.QKVBias {
				vec(p+"attn_q.bias", s.Heads*hd)
				vec(p+"attn_k.bias", s.KVHeads*hd)
				vec(p+"attn_v.bias", s.KVHeads*hd)
			}
			if s.QKNorm {
				vec(p+"attn_q_norm.weight", hd)
				vec(p+"attn_k_norm.weight", hd)
			}
			mat(p+"attn_output.weight", s.Heads*hd, e)
		}
		vec(p+"ffn_norm.weight", e)
		if s.Experts == 0 || i < s.DenseLayers {
			mat(p+"ffn_gate.weight", e, s.FFN)
			mat(p+"ffn_up.weight", e, s.FFN)
			mat(p+"ffn_down.weight", s.FFN, e)
			continue
		}
		vec(p+"ffn_gate_inp.weight", e*s.Experts) // router; F32 [e, experts] counted as one vector of bytes
		ts[len(ts)-1].Dims = []uint64{uint64(e), uint64(s.Experts)}
		mat(p+"ffn_gate_exps.weight", e, s.ExpertFFN, s.Experts)
		mat(p+"ffn_up_exps.weight", e, s.ExpertFFN, s.Experts)
		mat(p+"ffn_down_exps.weight", s.ExpertFFN, e, s.Experts)
		if s.SharedExperts > 0 {
			sh := s.ExpertFFN * s.SharedExperts
			mat(p+"ffn_gate_shexp.weight", e, sh)
			mat(p+"ffn_up_shexp.weight", e, sh)
			mat(p+"ffn_down_shexp.weight", sh, e)
		}
		if s.SigmoidGating {
			vec(p+"exp_probs_b.bias", s.Experts)
		}
	}
	vec("output_norm.weight", e)
	if !s.TiedEmbed {
		mat("output.weight", e, s.Vocab)
	}
	return ts
}

// KVValuesPerToken is the values the KV cache holds per token across all
// layers (deepseek2 caches the compressed latent and the rope key, as
// llama.cpp does).
func (s Shape) KVValuesPerToken() uint64 {
	if s.Arch == "deepseek2" {
		return uint64(s.Layers) * uint64(s.KVLoraRank+s.RopeHeadDim)
	}
	return uint64(s.Layers) * uint64(s.KVHeads) * uint64(s.headDim()) * 2
}

// KVBytesPerToken is the default (f16) KV cache of one token across all
// layers.
func (s Shape) KVBytesPerToken() uint64 { return KVF16.bytesFor(s.KVValuesPerToken()) }

// ExpertFFNUnits is how many tensor-parallel units (TPUnits.FFN columns)
// each expert's columns split into when the shape is written in weight
// type wt: its expert FFN width over the coarsest block of the FFN
// down-projections as Tensors types them (TPUnitsOf's rule); 0 for a
// dense shape or when the width is not whole blocks.
func (s Shape) ExpertFFNUnits(wt tensor.Type) int {
	if s.Experts == 0 {
		return 0
	}
	block := 1
	for _, t := range s.Tensors(wt) {
		if strings.Contains(t.Name, ".ffn_down") {
			block = max(block, t.Type.BlockSize())
		}
	}
	if s.ExpertFFN%block != 0 {
		return 0
	}
	return s.ExpertFFN / block
}

// Profile is the placement profile of the shape in weight type wt.
func (s Shape) Profile(wt tensor.Type) Profile {
	p := Profile{Arch: s.Arch, Layers: s.Layers, LayerBytes: make([]uint64, s.Layers), TiedOutput: s.TiedEmbed,
		KVValuesPerToken: s.KVValuesPerToken(), KVBytesPerToken: s.KVBytesPerToken(),
		Embd: s.Embd, KVHeads: s.KVHeads, Vocab: s.Vocab}
	if s.Arch == "deepseek2" {
		p.KVHeads = s.Heads
	}
	d := newDecodeCounter(&p, uint64(s.ExpertsUsed), uint64(s.Experts))
	for _, t := range s.Tensors(wt) {
		var layer int
		if _, err := fmt.Sscanf(t.Name, "blk.%d.", &layer); err == nil {
			p.LayerBytes[layer] += t.Bytes()
			d.add(layer, t.Name, t.Bytes())
			continue
		}
		switch t.Name {
		case "token_embd.weight":
			p.EmbedBytes += t.Bytes()
		case "rope_freqs.weight":
			p.OtherBytes += t.Bytes()
		default:
			p.HeadBytes += t.Bytes()
		}
	}
	return p
}

package model

import (
	"fmt"

	"strata/runtime/gguf"
)

// Gating is how a mixture-of-experts router turns its logits into expert
// scores (llama.cpp's expert_gating_func values).
type Gating int

const (
	GatingSoftmax Gating = 1 // softmax over all experts (qwen3moe, DeepSeek-V2)
	GatingSigmoid Gating = 2 // sigmoid per expert (DeepSeek-V3, Kimi K2)
)

// Config holds a model's hyper-parameters, read from GGUF metadata keyed
// by the architecture prefix (llama.block_count, ...).
// DefaultContext is the KV cache positions a session gets when nobody
// says how many: enough for a conversation, small enough that a node can
// hold several sessions of a large model. Every default context in
// strata (engine, placement, the cluster, the API, the flags) is this one.
const DefaultContext = 4096

// SessionContext is the context a session runs with: asked when asked
// is positive (at most the model's), else the model's at most
// DefaultContext.
func SessionContext(modelContext, asked int) int {
	if asked > 0 {
		return min(asked, modelContext)
	}
	return min(modelContext, DefaultContext)
}

type Config struct {
	Arch      string
	Embd      int // hidden size (embedding_length)
	Layers    int // block_count
	FFN       int // feed_forward_length (dense layers; 0 when every layer is MoE)
	Heads     int // attention.head_count
	KVHeads   int // attention.head_count_kv (grouped-query attention when < Heads)
	HeadDim   int // attention.key_length, default Embd/Heads
	RopeDim   int // rope.dimension_count, default HeadDim
	Vocab     int // rows of token_embd
	Context   int // context_length the model was trained with
	RMSEps    float32
	RopeBase  float32 // rope.freq_base, default 10000
	RopeScale float32 // 1/rope.scaling.factor for linear scaling, default 1
	// RopeNeox selects NeoX-style rotation (pairs i, i+d/2) used by qwen2/3;
	// llama files are converted for adjacent pairs (ggml's "normal" mode).
	RopeNeox bool
	// QKNorm: per-head RMSNorm of q and k before RoPE (qwen3, qwen3moe).
	QKNorm bool

	// Mixture of experts; Experts is 0 for dense models. A MoE layer routes
	// each token to ExpertsUsed of Experts SwiGLU experts of width
	// ExpertFFN and adds their outputs weighted by the router's scores,
	// plus SharedExperts always-on experts (stored as one SwiGLU of width
	// SharedExperts*ExpertFFN).
	Experts       int // expert_count
	ExpertsUsed   int // expert_used_count
	ExpertFFN     int // expert_feed_forward_length
	SharedExperts int // expert_shared_count
	DenseLayers   int // leading_dense_block_count: layers [0, DenseLayers) have a dense FFN
	Gating        Gating
	// ExpertGroups > 1 restricts each token's experts to the
	// ExpertGroupsUsed groups (of Experts/ExpertGroups consecutive experts)
	// whose two best selection scores sum highest (DeepSeek-V3).
	ExpertGroups, ExpertGroupsUsed int
	ExpertWeightsNorm              bool    // divide the chosen experts' weights by their sum
	ExpertWeightsScale             float32 // multiply them by this (0 or 1: unscaled)

	// MLA is set for multi-head latent attention (deepseek2); then HeadDim
	// is the per-head query/key width and RopeDim its rotated part.
	MLA MLAConfig
}

// KVDim is the width of one token's K (or V) row in a layer's cache.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim }

// QDim is the width of one token's concatenated query heads.
func (c Config) QDim() int { return c.Heads * c.HeadDim }

// IsMoE reports whether layer l has a mixture-of-experts FFN.
func (c Config) IsMoE(l int) bool { return c.Experts > 0 && l >= c.DenseLayers }

// supportedArch lists the architectures this forward pass implements.
var supportedArch = map[string]bool{"llama": true, "qwen2": true, "qwen3": true, "qwen3moe": true, "deepseek2": true}

// ConfigOf reads and validates a Config from metadata.
func ConfigOf(md *gguf.Metadata) (Config, error) {
	c := Config{Arch: md.Architecture()}
	if !supportedArch[c.Arch] {
		return c, fmt.Errorf("model: architecture %q is not supported (supported: llama, qwen2, qwen3, qwen3moe, deepseek2)", c.Arch)
	}
	geti := func(key string, def uint64) int {
		v := md.ArchUint(key, def)
		if v > 1<<30 {
			return -1
		}
		return int(v)
	}
	c.Embd = geti("embedding_length", 0)
	c.Layers = geti("block_count", 0)
	c.FFN = geti("feed_forward_length", 0)
	c.Heads = geti("attention.head_count", 0)
	c.KVHeads = geti("attention.head_count_kv", uint64(max(c.Heads, 0)))
	c.Context = geti("context_length", 2048)
	if err := c.readMoE(md, geti); err != nil {
		return c, err
	}
	required := []struct {
		name string
		v    int
	}{{"embedding_length", c.Embd}, {"block_count", c.Layers}, {"attention.head_count", c.Heads}, {"attention.head_count_kv", c.KVHeads}, {"context_length", c.Context}}
	if c.DenseLayers > 0 || c.Experts == 0 {
		required = append(required, struct {
			name string
			v    int
		}{"feed_forward_length", c.FFN})
	}
	for _, f := range required {
		if f.v <= 0 {
			return c, fmt.Errorf("model: %s.%s is missing or out of range", c.Arch, f.name)
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return c, fmt.Errorf("model: %d attention heads do not divide into %d KV heads", c.Heads, c.KVHeads)
	}
	if c.Arch == "deepseek2" {
		return c, c.readMLA(md, geti)
	}
	c.HeadDim = geti("attention.key_length", uint64(c.Embd/c.Heads))
	if v := geti("attention.value_length", uint64(c.HeadDim)); v != c.HeadDim {
		return c, fmt.Errorf("model: key_length %d != value_length %d is not supported", c.HeadDim, v)
	}
	c.RopeDim = geti("rope.dimension_count", uint64(max(c.HeadDim, 0)))
	if c.HeadDim <= 0 || c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return c, fmt.Errorf("model: head dim %d / rope dim %d are not valid", c.HeadDim, c.RopeDim)
	}
	c.RMSEps = float32(md.ArchFloat("attention.layer_norm_rms_epsilon", 1e-5))
	c.RopeBase = float32(md.ArchFloat("rope.freq_base", 10000))
	c.RopeScale = 1
	if typ := md.ArchString("rope.scaling.type", "none"); typ == "linear" {
		if f := md.ArchFloat("rope.scaling.factor", 1); f > 0 {
			c.RopeScale = float32(1 / f)
		}
	} else if typ != "none" && typ != "" {
		return c, fmt.Errorf("model: rope scaling %q is not supported (none, linear)", typ)
	}
	c.RopeNeox = c.Arch == "qwen2" || c.Arch == "qwen3" || c.Arch == "qwen3moe"
	c.QKNorm = c.Arch == "qwen3" || c.Arch == "qwen3moe"
	return c, nil
}

// readMoE reads the mixture-of-experts keys, with each architecture's
// fixed choices where llama.cpp hard-codes them rather than reading them.
func (c *Config) readMoE(md *gguf.Metadata, geti func(string, uint64) int) error {
	c.Experts = geti("expert_count", 0)
	if c.Experts == 0 {
		if c.Arch == "qwen3moe" {
			return fmt.Errorf("model: %s.expert_count is missing", c.Arch)
		}
		return nil
	}
	c.ExpertsUsed = geti("expert_used_count", 0)
	c.ExpertFFN = geti("expert_feed_forward_length", 0)
	c.SharedExperts = geti("expert_shared_count", 0)
	c.DenseLayers = geti("leading_dense_block_count", 0)
	c.ExpertGroups = geti("expert_group_count", 0)
	c.ExpertGroupsUsed = geti("expert_group_used_count", 0)
	c.ExpertWeightsScale = float32(md.ArchFloat("expert_weights_scale", 0))
	c.Gating = Gating(geti("expert_gating_func", uint64(GatingSoftmax)))
	if v, ok := md.Bool(md.ArchKey("expert_weights_norm")); ok {
		c.ExpertWeightsNorm = v
	}
	if c.Arch == "qwen3moe" {
		// llama.cpp's qwen3moe graph always renormalises the top-k weights
		// (norm_topk_prob) with softmax gating, whatever the file says.
		c.ExpertWeightsNorm, c.Gating = true, GatingSoftmax
		if c.ExpertFFN == 0 && c.FFN > 0 && c.ExpertsUsed > 0 {
			c.ExpertFFN = c.FFN / c.ExpertsUsed
		}
	}
	switch {
	case c.Experts < 0 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts:
		return fmt.Errorf("model: %d of %d experts per token is not valid", c.ExpertsUsed, c.Experts)
	case c.ExpertFFN <= 0:
		return fmt.Errorf("model: %s.expert_feed_forward_length is missing or out of range", c.Arch)
	case c.SharedExperts < 0 || c.DenseLayers < 0:
		return fmt.Errorf("model: %d shared experts, %d leading dense layers are not valid", c.SharedExperts, c.DenseLayers)
	case c.Gating != GatingSoftmax && c.Gating != GatingSigmoid:
		return fmt.Errorf("model: expert gating function %d is not supported (1 softmax, 2 sigmoid)", c.Gating)
	case c.ExpertGroups > 1 && (c.Experts%c.ExpertGroups != 0 || c.ExpertGroupsUsed <= 0 || c.ExpertGroupsUsed > c.ExpertGroups ||
		c.Experts/c.ExpertGroups < 2 || c.ExpertsUsed > c.ExpertGroupsUsed*(c.Experts/c.ExpertGroups)):
		return fmt.Errorf("model: %d experts in %d groups, %d groups used, %d experts used is not valid", c.Experts, c.ExpertGroups, c.ExpertGroupsUsed, c.ExpertsUsed)
	}
	return nil
}

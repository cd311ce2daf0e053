package model

import (
	"fmt"

	"strata/runtime/gguf"
)

// Config holds a llama-family model's hyper-parameters, read from GGUF
// metadata keyed by the architecture prefix (llama.block_count, ...).
type Config struct {
	Arch      string
	Embd      int // hidden size (embedding_length)
	Layers    int // block_count
	FFN       int // feed_forward_length
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
	// QKNorm: per-head RMSNorm of q and k before RoPE (qwen3).
	QKNorm bool
	// MLA is set for multi-head latent attention (deepseek2); then HeadDim
	// is the per-head query/key width and RopeDim its rotated part.
	MLA MLAConfig
}

// KVDim is the width of one token's K (or V) row in a layer's cache.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim }

// QDim is the width of one token's concatenated query heads.
func (c Config) QDim() int { return c.Heads * c.HeadDim }

// supportedArch lists the architectures this forward pass implements.
var supportedArch = map[string]bool{"llama": true, "qwen2": true, "qwen3": true, "deepseek2": true}

// ConfigOf reads and validates a Config from metadata.
func ConfigOf(md *gguf.Metadata) (Config, error) {
	c := Config{Arch: md.Architecture()}
	if !supportedArch[c.Arch] {
		return c, fmt.Errorf("model: architecture %q is not supported (supported: llama, qwen2, qwen3, deepseek2)", c.Arch)
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
	for _, f := range []struct {
		name string
		v    int
	}{{"embedding_length", c.Embd}, {"block_count", c.Layers}, {"feed_forward_length", c.FFN}, {"attention.head_count", c.Heads}, {"attention.head_count_kv", c.KVHeads}, {"context_length", c.Context}} {
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
	c.RopeNeox = c.Arch == "qwen2" || c.Arch == "qwen3"
	c.QKNorm = c.Arch == "qwen3"
	return c, nil
}

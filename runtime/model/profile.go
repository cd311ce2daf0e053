package model

import (
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strconv"

	"strata/runtime/gguf"
)

// Profile is what placement needs to know about a model without loading
// its weights: bytes per layer, per token of KV cache, and the pieces that
// live only on the first stage (embedding) or last (final norm + head).
type Profile struct {
	Arch       string
	Layers     int
	LayerBytes []uint64 // weight bytes of blk.N.*, index N
	EmbedBytes uint64   // token_embd.weight (first stage)
	HeadBytes  uint64   // output_norm + output.weight (last stage; 0 extra when tied)
	OtherBytes uint64   // tensors that belong to no layer and are not embedding/head
	// KVValuesPerToken is the values the KV cache holds per token across
	// all layers (for deepseek2, the MLA latent and rope key), and
	// KVBytesPerToken their size in the default cache type (f16); see
	// KVBytesPerTokenOf for the others.
	KVValuesPerToken uint64
	KVBytesPerToken  uint64
	TiedOutput       bool

	// What a decode cost model needs beyond placement (see decode.go).
	// KVHeads is the heads tensor parallelism splits whole: KV heads, or
	// every head with multi-head latent attention.
	Embd, KVHeads, Vocab int
	// ActiveLayerBytes is the weight bytes of each layer that one decoded
	// token reads: a mixture-of-experts layer reads ExpertsUsed of its
	// Experts (on average); AttnLayerBytes is the part of it in attention
	// weights (attn_*), which tensor parallelism splits by KV heads.
	ActiveLayerBytes, AttnLayerBytes []uint64
	// ExpertLayerBytes is the weight bytes of each layer's routed experts
	// (ffn_*_exps, all Experts of them; 0 in dense layers), of which a
	// token reads ExpertsUsed: what tensor parallelism splits by columns
	// of every expert, or by whole experts (see ExpertsReadPerToken).
	ExpertLayerBytes     []uint64
	Experts, ExpertsUsed int
}

// KVBytesPerTokenOf is the KV cache of one token across all layers in a
// cache of type t.
func (p Profile) KVBytesPerTokenOf(t KVType) uint64 { return t.bytesFor(p.KVValuesPerToken) }

// Bytes is the size of n cached values (n a multiple of 32, as a model's
// values per token are) in a cache of type t.
func (t KVType) Bytes(n uint64) uint64 { return t.bytesFor(n) }

// TotalBytes is the weight bytes of the whole model.
func (p Profile) TotalBytes() uint64 {
	n := p.EmbedBytes + p.HeadBytes + p.OtherBytes
	for _, b := range p.LayerBytes {
		n += b
	}
	return n
}

var layerTensor = regexp.MustCompile(`^blk\.(\d+)\.`)

// ProfileOf reads a Profile from a GGUF file's tensor table and metadata.
func ProfileOf(f *gguf.File) (Profile, error) {
	md := f.Metadata()
	p := Profile{Arch: md.Architecture()}
	layers := md.ArchUint("block_count", 0)
	if layers == 0 || layers > 1<<16 {
		return p, fmt.Errorf("model: %s.block_count is %d", p.Arch, layers)
	}
	p.Layers = int(layers)
	p.LayerBytes = make([]uint64, p.Layers)
	d := newDecodeCounter(&p, md.ArchUint("expert_used_count", 0), md.ArchUint("expert_count", 0))
	_, hasOutput := f.Tensor("output.weight")
	p.TiedOutput = !hasOutput
	for _, t := range f.Tensors() {
		if m := layerTensor.FindStringSubmatch(t.Name); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil || n >= p.Layers {
				return p, fmt.Errorf("model: tensor %s names layer %s, but the model has %d", t.Name, m[1], p.Layers)
			}
			p.LayerBytes[n] += t.Size
			d.add(n, t.Name, t.Size)
			continue
		}
		switch t.Name {
		case "token_embd.weight":
			p.EmbedBytes += t.Size
			if len(t.Dims) == 2 && t.Dims[1] <= 1<<30 {
				p.Vocab = int(t.Dims[1])
			}
		case "output_norm.weight", "output.weight":
			p.HeadBytes += t.Size
		default:
			p.OtherBytes += t.Size
		}
	}
	kvh := md.ArchUint("attention.head_count_kv", md.ArchUint("attention.head_count", 0))
	if p.Arch == "deepseek2" { // latent attention: every head has its own keys from the shared latent
		kvh = md.ArchUint("attention.head_count", 0)
	}
	if embd := md.ArchUint("embedding_length", 0); embd <= 1<<30 && kvh <= 1<<30 {
		p.Embd, p.KVHeads = int(embd), int(kvh)
	}
	if kvl := md.ArchUint("attention.kv_lora_rank", 0); p.Arch == "deepseek2" && kvl > 0 {
		// Multi-head latent attention caches one latent and one rope key
		// per position, whatever key_length and head_count_kv say.
		kv, ok := mulSizes(layers, addSize(kvl, md.ArchUint("rope.dimension_count", 0)), 4)
		if !ok {
			return p, fmt.Errorf("model: the KV cache of one token (%d layers, kv_lora_rank %d) does not fit in 64 bits", layers, kvl)
		}
		p.setKV(kv / 4)
		return p, nil
	}
	heads := md.ArchUint("attention.head_count", 0)
	kvHeads := md.ArchUint("attention.head_count_kv", heads)
	embd := md.ArchUint("embedding_length", 0)
	if kvRank := md.ArchUint("attention.kv_lora_rank", 0); p.Arch == "deepseek2" && kvRank > 0 {
		// Multi-head latent attention caches the compressed latent and the
		// shared rope key, not per-head K and V.
		kv, ok := mulSizes(layers, addSize(kvRank, md.ArchUint("rope.dimension_count", 0)), 4)
		if !ok {
			return p, fmt.Errorf("model: the KV cache of one token (%d layers, kv_lora_rank %d) does not fit in 64 bits", layers, kvRank)
		}
		p.setKV(kv / 4)
	} else if heads > 0 {
		headDim := md.ArchUint("attention.key_length", embd/heads)
		valDim := md.ArchUint("attention.value_length", embd/heads)
		kv, ok := mulSizes(layers, kvHeads, addSize(headDim, valDim), 4)
		if !ok {
			return p, fmt.Errorf("model: the KV cache of one token (%d layers, %d KV heads of %d+%d) does not fit in 64 bits", layers, kvHeads, headDim, valDim)
		}
		p.setKV(kv / 4)
	}
	return p, nil
}

// setKV sets the cache's values per token and their size in f16. (The
// sizes were checked to fit in 63 bits as f32.)
func (p *Profile) setKV(values uint64) {
	p.KVValuesPerToken = values
	p.KVBytesPerToken = KVF16.bytesFor(values)
}

// mulSizes multiplies sizes read from a file; ok is false when the
// product does not fit in 63 bits (the largest size anything downstream
// can hold as an int64), so a crafted shape cannot wrap to a small number.
func mulSizes(xs ...uint64) (uint64, bool) {
	p := uint64(1)
	for _, x := range xs {
		hi, lo := bits.Mul64(p, x)
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		p = lo
	}
	return p, true
}

// addSize adds two sizes from a file, saturating (mulSizes then refuses).
func addSize(a, b uint64) uint64 {
	if s, c := bits.Add64(a, b, 0); c == 0 {
		return s
	}
	return math.MaxUint64
}

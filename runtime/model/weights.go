package model

import (
	"fmt"

	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// Layer holds one transformer block's weights: an attention part and a
// feed-forward part, dense (Dense) or a mixture of experts (MoE != nil).
// Matrices borrow the mapped file; norm vectors are converted to f32 at load.
type Layer struct {
	Attention
	FFNNorm []float32 // [Embd]
	Dense             // the FFN of a dense layer; zero when MoE is set
	MoE     *MoE
}

// attentionBytes and denseBytes are the bytes of the grouped-query
// attention's matrices and of a dense feed-forward network, which one
// pass over them reads.
func (b *Layer) attentionBytes() int64 {
	return int64(len(b.Q.Data) + len(b.K.Data) + len(b.V.Data) + len(b.O.Data))
}

func (b *Layer) denseBytes() int64 {
	return int64(len(b.Gate.Data) + len(b.Up.Data) + len(b.Down.Data))
}

// routedBytes is, for a mixture-of-experts layer an accelerator ran
// whole (its routing too), the bytes of its router, shared expert and
// the experts of n tokens that used experts each: exact for one token
// (its experts are distinct), at most that for more (which experts they
// share stays on the device).
func (b *Layer) routedBytes(n, used int) int64 {
	w := b.MoE
	if w == nil || len(w.Experts) == 0 {
		return 0
	}
	e := &w.Experts[0]
	per := int64(len(e.Gate.Data) + len(e.Up.Data) + len(e.Down.Data))
	return int64(len(w.Router.Data)+len(w.Shared.Gate.Data)+len(w.Shared.Up.Data)+len(w.Shared.Down.Data)) +
		per*int64(min(n*used, len(w.Experts)))
}

// Attention holds a block's self-attention weights: grouped-query (Q, K,
// V) or multi-head latent attention (MLA).
type Attention struct {
	AttnNorm   []float32     // [Embd]
	Q          tensor.Matrix // [QDim rows × Embd]
	K, V       tensor.Matrix // [KVDim × Embd]
	Bq, Bk, Bv []float32     // optional biases (qwen2): [QDim], [KVDim], [KVDim]
	QNorm      []float32     // optional per-head norm (qwen3): [HeadDim]
	KNorm      []float32     // [HeadDim]
	O          tensor.Matrix // [Embd × QDim]
	// MLA replaces Q, K and V in multi-head latent attention (deepseek2);
	// O is then [Embd × Heads*VDim].
	MLA *MLA
}

// Dense is a SwiGLU feed-forward network: Down(SiLU(Gate x) * Up x).
type Dense struct {
	Gate, Up tensor.Matrix // [width × Embd]
	Down     tensor.Matrix // [Embd × width]
}

// MoE is a mixture-of-experts feed-forward network: a router picks
// ExpertsUsed experts per token (see Config), and the shared experts, if
// any, see every token.
type MoE struct {
	Router tensor.Matrix // ffn_gate_inp: [Experts × Embd], F32
	// Bias (exp_probs_b) is added to the expert scores to choose the
	// experts only; their weights come from the unbiased scores. Optional.
	Bias []float32 // [Experts]
	// Experts[e] views expert e's slices of the 3-D tensors ffn_{gate,up,down}_exps
	// (no copy: an expert is a contiguous run of rows).
	Experts []Dense // [ExpertFFN × Embd] gate and up, [Embd × ExpertFFN] down
	Shared  Dense   // ffn_*_shexp, width SharedExperts*ExpertFFN; zero when none
}

// Model is a decoder-only transformer (llama, qwen2, qwen3, qwen3moe), or
// the shard of one that holds layers [First, End). The first shard also
// holds the token embedding; the last holds the final norm and the
// output head.
type Model struct {
	Config
	First, End int
	Embed      tensor.Matrix // [Vocab × Embd], first shard (and last, when the output is tied)
	Blocks     []Layer       // Blocks[i] is layer First+i
	OutNorm    []float32     // [Embd], last shard
	Output     tensor.Matrix // [Vocab × Embd], last shard
	// RopeFactors (rope_freqs.weight, Llama 3.1+) divide each rotated
	// pair's frequency, as llama.cpp's freq_factors; nil means all 1.
	RopeFactors []float32 // [RopeDim/2]
	// MappedBytes is the bytes of the distinct tensors Load read for this
	// shard: what it maps of the file.
	MappedBytes uint64

	kvType KVType // of the caches NewCache makes (SetKVType)
	// shared is the width of the shared experts when it is not
	// SharedExperts*ExpertFFN (a tensor-parallel member's columns of
	// them); sharedSet says it is.
	shared    int
	sharedSet bool
}

// sharedWidth is the width of the shared experts' FFN (0: none).
func (m *Model) sharedWidth() int {
	if m.sharedSet {
		return m.shared
	}
	return m.SharedExperts * m.ExpertFFN
}

// IsFirst reports whether the shard starts at layer 0 (takes token ids).
func (m *Model) IsFirst() bool { return m.First == 0 }

// IsLast reports whether the shard ends at the last layer (produces logits).
func (m *Model) IsLast() bool { return m.End == m.Config.Layers }

// Load builds the shard [first, end) of the model in f. Only that shard's
// tensors are touched, so pages of other layers are never read. f must
// stay open while the Model is used.
func Load(f *gguf.File, first, end int) (*Model, error) {
	cfg, err := ConfigOf(f.Metadata())
	if err != nil {
		return nil, err
	}
	if first < 0 || end > cfg.Layers || first >= end {
		return nil, fmt.Errorf("model: layer range [%d,%d) is not inside [0,%d)", first, end, cfg.Layers)
	}
	l := loader{f: f, c: cfg}
	m := &Model{Config: cfg, First: first, End: end}
	if emb, ok := f.Tensor("token_embd.weight"); ok && len(emb.Dims) == 2 {
		m.Vocab = int(emb.Dims[1])
	} else {
		return nil, fmt.Errorf("model: token_embd.weight is missing or not 2-D")
	}
	if first == 0 {
		m.Embed = l.matrix("token_embd.weight", m.Vocab, cfg.Embd)
	}
	for i := first; i < end; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ly := Layer{
			Attention: Attention{AttnNorm: l.vector(p+"attn_norm.weight", cfg.Embd)},
			FFNNorm:   l.vector(p+"ffn_norm.weight", cfg.Embd),
		}
		if cfg.isMLA() {
			ly.MLA = l.mla(p, f, Range{0, cfg.Heads})
			ly.O = l.matrix(p+"attn_output.weight", cfg.Embd, cfg.Heads*cfg.MLA.VDim)
		} else {
			ly.Q = l.matrix(p+"attn_q.weight", cfg.QDim(), cfg.Embd)
			ly.K = l.matrix(p+"attn_k.weight", cfg.KVDim(), cfg.Embd)
			ly.V = l.matrix(p+"attn_v.weight", cfg.KVDim(), cfg.Embd)
			ly.O = l.matrix(p+"attn_output.weight", cfg.Embd, cfg.QDim())
		}
		if _, ok := f.Tensor(p + "attn_q.bias"); ok {
			ly.Bq = l.vector(p+"attn_q.bias", cfg.QDim())
			ly.Bk = l.vector(p+"attn_k.bias", cfg.KVDim())
			ly.Bv = l.vector(p+"attn_v.bias", cfg.KVDim())
		}
		if cfg.QKNorm {
			ly.QNorm = l.vector(p+"attn_q_norm.weight", cfg.HeadDim)
			ly.KNorm = l.vector(p+"attn_k_norm.weight", cfg.HeadDim)
		}
		if cfg.IsMoE(i) {
			ly.MoE = l.moe(p)
		} else {
			ly.Dense = l.dense(p, "", cfg.FFN)
		}
		m.Blocks = append(m.Blocks, ly)
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		m.RopeFactors = l.vector("rope_freqs.weight", cfg.RopeDim/2)
	}
	if end == cfg.Layers {
		m.OutNorm = l.vector("output_norm.weight", cfg.Embd)
		if _, ok := f.Tensor("output.weight"); ok {
			m.Output = l.matrix("output.weight", m.Vocab, cfg.Embd)
		} else {
			m.Output = l.matrix("token_embd.weight", m.Vocab, cfg.Embd) // tied
		}
	}
	if l.err != nil {
		return nil, l.err
	}
	m.MappedBytes = l.mapped
	return m, nil
}

// loader fetches tensors by name and checks their shapes, keeping the
// first error so Load reads as a list of weights.
type loader struct {
	f      *gguf.File
	c      Config
	err    error
	seen   map[string]bool
	mapped uint64 // bytes of the distinct tensors fetched
}

func (l *loader) tensor(name string, dims ...int) (gguf.Tensor, []byte) {
	if l.err != nil {
		return gguf.Tensor{}, nil
	}
	t, data, err := l.f.TensorData(name)
	if err != nil {
		l.err = fmt.Errorf("model: %w", err)
		return t, nil
	}
	if !l.seen[name] {
		if l.seen == nil {
			l.seen = map[string]bool{}
		}
		l.seen[name] = true
		l.mapped += t.Size
	}
	ok := len(t.Dims) == len(dims)
	for i := 0; ok && i < len(dims); i++ {
		ok = t.Dims[i] == uint64(dims[i])
	}
	if !ok {
		l.err = fmt.Errorf("model: tensor %s has shape %v, expected %v", name, t.Dims, dims)
	}
	return t, data
}

// matrix returns a rows×cols weight (GGUF dims [cols, rows]).
func (l *loader) matrix(name string, rows, cols int) tensor.Matrix {
	t, data := l.tensor(name, cols, rows)
	if l.err != nil {
		return tensor.Matrix{}
	}
	m, err := tensor.NewMatrix(t.Type, rows, cols, data)
	if err != nil {
		l.err = fmt.Errorf("model: tensor %s: %w", name, err)
	}
	return m
}

// vector returns a 1-D weight converted to f32.
func (l *loader) vector(name string, n int) []float32 {
	t, data := l.tensor(name, n)
	if l.err != nil {
		return nil
	}
	v := make([]float32, n)
	if err := tensor.Dequantize(t.Type, data, v); err != nil {
		l.err = fmt.Errorf("model: tensor %s: %w", name, err)
	}
	return v
}

// dense returns the SwiGLU FFN blk.N.ffn_{gate,up,down}<suffix>.weight.
func (l *loader) dense(prefix, suffix string, width int) Dense {
	return Dense{
		Gate: l.matrix(prefix+"ffn_gate"+suffix+".weight", width, l.c.Embd),
		Up:   l.matrix(prefix+"ffn_up"+suffix+".weight", width, l.c.Embd),
		Down: l.matrix(prefix+"ffn_down"+suffix+".weight", l.c.Embd, width),
	}
}

// moe returns a layer's router, experts and shared experts.
func (l *loader) moe(prefix string) *MoE {
	c := l.c
	m := &MoE{
		Router:  l.matrix(prefix+"ffn_gate_inp.weight", c.Experts, c.Embd),
		Experts: make([]Dense, c.Experts),
	}
	if m.Router.Type != tensor.F32 && l.err == nil {
		// The router's scores decide which experts run; llama.cpp's
		// quantizer keeps it F32 and so do the files strata reads.
		l.err = fmt.Errorf("model: %sffn_gate_inp.weight is %s, expected F32", prefix, m.Router.Type)
	}
	gate := l.experts(prefix+"ffn_gate_exps.weight", c.ExpertFFN, c.Embd)
	up := l.experts(prefix+"ffn_up_exps.weight", c.ExpertFFN, c.Embd)
	down := l.experts(prefix+"ffn_down_exps.weight", c.Embd, c.ExpertFFN)
	if l.err == nil {
		for e := range m.Experts {
			m.Experts[e] = Dense{Gate: gate[e], Up: up[e], Down: down[e]}
		}
	}
	if _, ok := l.f.Tensor(prefix + "exp_probs_b.bias"); ok {
		m.Bias = l.vector(prefix+"exp_probs_b.bias", c.Experts)
	}
	if c.SharedExperts > 0 {
		m.Shared = l.dense(prefix, "_shexp", c.SharedExperts*c.ExpertFFN)
	}
	return m
}

// experts returns the Experts matrices of rows×cols stored in one 3-D
// tensor (GGUF dims [cols, rows, experts]), each a view of its bytes.
func (l *loader) experts(name string, rows, cols int) []tensor.Matrix {
	return l.heads(name, rows, cols, l.c.Experts)
}

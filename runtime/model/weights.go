package model

import (
	"fmt"

	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// Layer holds one transformer block's weights. Matrices borrow the mapped
// file; norm vectors are converted to f32 at load.
type Layer struct {
	AttnNorm   []float32     // [Embd]
	Q          tensor.Matrix // [QDim rows × Embd]
	K, V       tensor.Matrix // [KVDim × Embd]
	Bq, Bk, Bv []float32     // optional biases (qwen2): [QDim], [KVDim], [KVDim]
	QNorm      []float32     // optional per-head norm (qwen3): [HeadDim]
	KNorm      []float32     // [HeadDim]
	O          tensor.Matrix // [Embd × QDim]
	FFNNorm    []float32     // [Embd]
	Gate, Up   tensor.Matrix // [FFN × Embd]
	Down       tensor.Matrix // [Embd × FFN]
	// MLA replaces Q, K and V in multi-head latent attention (deepseek2);
	// O is then [Embd × Heads*VDim].
	MLA *MLA
}

// Model is a llama-family model, or the shard of one that holds layers
// [First, End). The first shard also holds the token embedding; the last
// holds the final norm and the output head.
type Model struct {
	Config
	First, End int
	Embed      tensor.Matrix // [Vocab × Embd], first shard (and last, when the output is tied)
	Blocks     []Layer       // Blocks[i] is layer First+i
	OutNorm    []float32     // [Embd], last shard
	Output     tensor.Matrix // [Vocab × Embd], last shard
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
			AttnNorm: l.vector(p+"attn_norm.weight", cfg.Embd),
			FFNNorm:  l.vector(p+"ffn_norm.weight", cfg.Embd),
			Gate:     l.matrix(p+"ffn_gate.weight", cfg.FFN, cfg.Embd),
			Up:       l.matrix(p+"ffn_up.weight", cfg.FFN, cfg.Embd),
			Down:     l.matrix(p+"ffn_down.weight", cfg.Embd, cfg.FFN),
		}
		if cfg.isMLA() {
			ly.MLA = l.mla(p, f)
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
		m.Blocks = append(m.Blocks, ly)
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
	return m, nil
}

// loader fetches tensors by name and checks their shapes, keeping the
// first error so Load reads as a list of weights.
type loader struct {
	f   *gguf.File
	c   Config
	err error
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

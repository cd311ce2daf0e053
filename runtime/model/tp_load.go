package model

import (
	"fmt"

	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// TPModel is one tensor-parallel member's slice of layers [First, End) of
// a model (see TPSlice). With hq = Slice.KVHeads.Len() × Heads/KVHeads
// query heads, kvh = Slice.KVHeads.Len() KV heads and f = Slice.FFN.Len()
// FFN columns, each Blocks[i] holds:
//
//	Q [hq*HeadDim × Embd]   K, V [kvh*HeadDim × Embd]   (views of the file's rows)
//	O [Embd × hq*HeadDim]                               (its columns, copied)
//	Gate, Up [f × Embd]                                 (views)
//	Down [Embd × f]                                     (its columns, copied)
//
// or, in a mixture-of-experts layer, the whole router and each expert's
// (and the shared experts') slice of Slice.ExpertFFN columns, the same way.
//
// Norms and the embedding are whole on every member (every member keeps
// the same hidden state); the output head is rows Slice.Vocab.
type TPModel struct {
	Config
	First, End  int
	Slice       TPSlice
	Embed       tensor.Matrix // [Vocab × Embd], first stage
	Blocks      []Layer       // Blocks[i] is the slice of layer First+i
	OutNorm     []float32     // [Embd], last stage
	Output      tensor.Matrix // [Slice.Vocab.Len() × Embd], last stage
	RopeFactors []float32     // as Model.RopeFactors

	copied int64  // bytes of the row-parallel slices copied out of the file
	mixer  *Model // mixture-of-experts layers run on its State (see LoadTP)
}

// IsFirst reports whether the slice starts at layer 0 (takes token ids).
func (m *TPModel) IsFirst() bool { return m.First == 0 }

// IsLast reports whether the slice ends at the last layer (produces logits).
func (m *TPModel) IsLast() bool { return m.End == m.Config.Layers }

// CopiedBytes is the memory the slice holds of its own: the row-parallel
// matrices' columns, which are not contiguous in the file and so are
// copied at load. The other weights are views of the mapped file, of
// which only the slice's rows are ever read.
func (m *TPModel) CopiedBytes() int64 { return m.copied }

// SliceBytes is the weight bytes of the member's slice: its rows and
// columns of every layer's matrices and its rows of the output head. The
// embedding is not counted: every member looks up the tokens it embeds
// in the mapped file (one row each), nor is a mixture-of-experts router,
// whole on every member. Across a group's members the slices add up to
// the stage's other matrices exactly.
func (m *TPModel) SliceBytes() int64 {
	n := int64(len(m.Output.Data))
	for _, b := range m.Blocks {
		for _, w := range []tensor.Matrix{b.Q, b.K, b.V, b.O, b.Gate, b.Up, b.Down} {
			n += int64(len(w.Data))
		}
		if b.MoE != nil {
			for _, e := range append(b.MoE.Experts, b.MoE.Shared) {
				n += int64(len(e.Gate.Data) + len(e.Up.Data) + len(e.Down.Data))
			}
		}
	}
	return n
}

// localHeads returns the slice's query and KV head counts.
func (m *TPModel) localHeads() (hq, kvh int) {
	kvh = m.Slice.KVHeads.Len()
	return kvh * (m.Heads / m.KVHeads), kvh
}

// LoadTP builds member s's slice of layers [first, end) of the model in f
// (see TPModel). f must stay open while the TPModel is used.
func LoadTP(f *gguf.File, first, end int, s TPSlice) (*TPModel, error) {
	cfg, err := ConfigOf(f.Metadata())
	if err != nil {
		return nil, err
	}
	if err := cfg.tpSupported(); err != nil {
		return nil, err
	}
	if first < 0 || end > cfg.Layers || first >= end {
		return nil, fmt.Errorf("model: layer range [%d,%d) is not inside [0,%d)", first, end, cfg.Layers)
	}
	if emb, ok := f.Tensor("token_embd.weight"); ok && len(emb.Dims) == 2 && emb.Dims[1] <= 1<<30 {
		cfg.Vocab = int(emb.Dims[1])
	} else {
		return nil, fmt.Errorf("model: token_embd.weight is missing or not 2-D")
	}
	inside := func(r Range, n int) bool { return 0 <= r.Lo && r.Lo <= r.Hi && r.Hi <= n }
	if !inside(s.KVHeads, cfg.KVHeads) || !inside(s.FFN, cfg.FFN) || !inside(s.ExpertFFN, cfg.ExpertFFN) || !inside(s.Vocab, cfg.Vocab) {
		return nil, fmt.Errorf("model: tensor-parallel slice (%v) is not inside %d KV heads, FFN %d, expert FFN %d, vocab %d", s, cfg.KVHeads, cfg.FFN, cfg.ExpertFFN, cfg.Vocab)
	}
	l := loader{f: f, c: cfg}
	m := &TPModel{Config: cfg, First: first, End: end, Slice: s}
	if first == 0 {
		m.Embed = l.matrix("token_embd.weight", cfg.Vocab, cfg.Embd)
	}
	hd, group := cfg.HeadDim, cfg.Heads/cfg.KVHeads
	q := Range{s.KVHeads.Lo * group * hd, s.KVHeads.Hi * group * hd} // query rows / attn_output columns
	kv := Range{s.KVHeads.Lo * hd, s.KVHeads.Hi * hd}
	for i := first; i < end; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ly := Layer{
			Attention: Attention{
				AttnNorm: l.vector(p+"attn_norm.weight", cfg.Embd),
				Q:        l.rows(p+"attn_q.weight", cfg.QDim(), cfg.Embd, q),
				K:        l.rows(p+"attn_k.weight", cfg.KVDim(), cfg.Embd, kv),
				V:        l.rows(p+"attn_v.weight", cfg.KVDim(), cfg.Embd, kv),
				O:        m.columns(&l, p+"attn_output.weight", cfg.Embd, cfg.QDim(), q),
			},
			FFNNorm: l.vector(p+"ffn_norm.weight", cfg.Embd),
		}
		if cfg.IsMoE(i) {
			ly.MoE = m.moeSlice(&l, p, s.ExpertFFN)
		} else {
			ly.Dense = Dense{
				Gate: l.rows(p+"ffn_gate.weight", cfg.FFN, cfg.Embd, s.FFN),
				Up:   l.rows(p+"ffn_up.weight", cfg.FFN, cfg.Embd, s.FFN),
				Down: m.columns(&l, p+"ffn_down.weight", cfg.Embd, cfg.FFN, s.FFN),
			}
		}
		if _, ok := f.Tensor(p + "attn_q.bias"); ok {
			ly.Bq = sub(l.vector(p+"attn_q.bias", cfg.QDim()), q)
			ly.Bk = sub(l.vector(p+"attn_k.bias", cfg.KVDim()), kv)
			ly.Bv = sub(l.vector(p+"attn_v.bias", cfg.KVDim()), kv)
		}
		if cfg.QKNorm {
			ly.QNorm = l.vector(p+"attn_q_norm.weight", cfg.HeadDim)
			ly.KNorm = l.vector(p+"attn_k_norm.weight", cfg.HeadDim)
		}
		m.Blocks = append(m.Blocks, ly)
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		m.RopeFactors = l.vector("rope_freqs.weight", cfg.RopeDim/2)
	}
	if end == cfg.Layers {
		m.OutNorm = l.vector("output_norm.weight", cfg.Embd)
		name := "output.weight"
		if _, ok := f.Tensor(name); !ok {
			name = "token_embd.weight" // tied
		}
		m.Output = l.rows(name, cfg.Vocab, cfg.Embd, s.Vocab)
	}
	if l.err != nil {
		return nil, l.err
	}
	if cfg.Experts > 0 {
		// The mixture runs on a State of a Model whose experts are this
		// member's width: routing reads the whole router, so it is the
		// same on every member, and each expert's slice adds its share.
		sc := cfg
		sc.FFN, sc.ExpertFFN = s.FFN.Len(), s.ExpertFFN.Len()
		m.mixer = &Model{Config: sc, First: first, End: first}
	}
	return m, nil
}

// moeSlice returns a mixture-of-experts layer's router (whole) and
// columns r of each expert and of the shared experts (r scaled by their
// count: any split of an FFN's columns adds up, these keep the widths
// the mixture code expects).
func (m *TPModel) moeSlice(l *loader, prefix string, r Range) *MoE {
	c := l.c
	w := &MoE{Router: l.matrix(prefix+"ffn_gate_inp.weight", c.Experts, c.Embd), Experts: make([]Dense, c.Experts)}
	if w.Router.Type != tensor.F32 && l.err == nil {
		l.err = fmt.Errorf("model: %sffn_gate_inp.weight is %s, expected F32", prefix, w.Router.Type)
	}
	gate := l.experts(prefix+"ffn_gate_exps.weight", c.ExpertFFN, c.Embd)
	up := l.experts(prefix+"ffn_up_exps.weight", c.ExpertFFN, c.Embd)
	down := l.experts(prefix+"ffn_down_exps.weight", c.Embd, c.ExpertFFN)
	for e := range w.Experts {
		if l.err != nil {
			return w
		}
		w.Experts[e] = Dense{
			Gate: gate[e].RowRange(r.Lo, r.Hi),
			Up:   up[e].RowRange(r.Lo, r.Hi),
			Down: m.columnsOf(l, prefix+"ffn_down_exps.weight", down[e], r),
		}
	}
	if _, ok := l.f.Tensor(prefix + "exp_probs_b.bias"); ok {
		w.Bias = l.vector(prefix+"exp_probs_b.bias", c.Experts)
	}
	if k := c.SharedExperts; k > 0 {
		sr := Range{r.Lo * k, r.Hi * k}
		width := k * c.ExpertFFN
		w.Shared = Dense{
			Gate: l.rows(prefix+"ffn_gate_shexp.weight", width, c.Embd, sr),
			Up:   l.rows(prefix+"ffn_up_shexp.weight", width, c.Embd, sr),
			Down: m.columns(l, prefix+"ffn_down_shexp.weight", c.Embd, width, sr),
		}
	}
	return w
}

// sub returns v[r.Lo:r.Hi] (nil when v is nil, as after a load error).
func sub(v []float32, r Range) []float32 {
	if v == nil {
		return nil
	}
	return v[r.Lo:r.Hi:r.Hi]
}

// rows returns rows r of a rows×cols weight: a view of the file, no copy.
func (l *loader) rows(name string, rows, cols int, r Range) tensor.Matrix {
	w := l.matrix(name, rows, cols)
	if l.err != nil {
		return tensor.Matrix{}
	}
	return w.RowRange(r.Lo, r.Hi)
}

// columns returns columns r of every row of a rows×cols weight, copied
// into a matrix of its own: a row-parallel slice is a run of blocks in
// each row, not one contiguous range of the file. r must fall on block
// boundaries of the weight's type (PlanTP's units guarantee it).
func (m *TPModel) columns(l *loader, name string, rows, cols int, r Range) tensor.Matrix {
	w := l.matrix(name, rows, cols)
	if l.err != nil {
		return tensor.Matrix{}
	}
	return m.columnsOf(l, name, w, r)
}

// columnsOf is columns of a matrix already loaded (one expert of name).
func (m *TPModel) columnsOf(l *loader, name string, w tensor.Matrix, r Range) tensor.Matrix {
	if l.err != nil {
		return tensor.Matrix{}
	}
	rows := w.Rows
	bs, bb := w.Type.BlockSize(), w.Type.BlockBytes()
	if r.Lo%bs != 0 || r.Hi%bs != 0 {
		l.err = fmt.Errorf("model: tensor %s: columns %v do not fall on %v block boundaries (%d)", name, r, w.Type, bs)
		return tensor.Matrix{}
	}
	lo, hi := r.Lo/bs*bb, r.Hi/bs*bb
	data := make([]byte, rows*(hi-lo))
	for i := 0; i < rows; i++ {
		copy(data[i*(hi-lo):(i+1)*(hi-lo)], w.Row(i)[lo:hi])
	}
	out, err := tensor.NewMatrix(w.Type, rows, r.Len(), data)
	if err != nil {
		l.err = fmt.Errorf("model: tensor %s: %w", name, err)
	}
	m.copied += int64(len(data))
	return out
}

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
// or, with multi-head latent attention, the latent path whole and heads
// Slice.KVHeads of q_b (or q), of the per-head up-projections and of O's
// columns; or, in a mixture-of-experts layer, the whole router and either
// each expert's slice of Slice.ExpertFFN columns or the whole experts
// Slice.Experts (Slice.ExpertParallel), and the shared experts' slice of
// columns.
//
// Norms and the embedding are whole on every member (every member keeps
// the same hidden state); the output head is rows Slice.Vocab.
//
// Those weights are the layers of a smaller model (Heads hq, KVHeads kvh,
// FFN f, ...), which the member's forward pass runs as one node runs its
// model, between the group's all-reduces.
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
	local  *Model // the member's share as a model of its own (see LoadTP)
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
// columns of every layer's matrices and its rows of the output head. Not
// counted: the embedding (every member looks up the tokens it embeds in
// the mapped file, one row each) and the weights every member holds
// whole: a mixture-of-experts router, and the latent path of multi-head
// latent attention (q_a, kv_a). Across a group's members the slices add
// up to the stage's other matrices exactly.
func (m *TPModel) SliceBytes() int64 {
	n := int64(len(m.Output.Data))
	for _, b := range m.Blocks {
		for _, w := range []tensor.Matrix{b.Q, b.K, b.V, b.O, b.Gate, b.Up, b.Down} {
			n += int64(len(w.Data))
		}
		if a := b.MLA; a != nil {
			n += int64(len(a.QB.Data) + len(a.Q.Data) + len(a.KVB.Data)) // VB are rows of KVB when there is one
			for h := range a.KB {
				n += int64(len(a.KB[h].Data) + len(a.VB[h].Data))
			}
		}
		if b.MoE != nil {
			for _, e := range append(b.MoE.Experts, b.MoE.Shared) {
				n += int64(len(e.Gate.Data) + len(e.Up.Data) + len(e.Down.Data))
			}
		}
	}
	return n
}

// localConfig is the configuration of the member's share as a model of
// its own: its query and KV heads (with latent attention, its heads), its
// FFN columns, and its experts' width (whole experts under expert
// parallelism, else its columns of each).
func localConfig(c Config, s TPSlice) Config {
	lc := c
	if c.isMLA() {
		lc.Heads, lc.KVHeads = s.KVHeads.Len(), s.KVHeads.Len()
	} else {
		lc.Heads, lc.KVHeads = s.KVHeads.Len()*(c.Heads/c.KVHeads), s.KVHeads.Len()
	}
	lc.FFN = s.FFN.Len()
	if !s.ExpertParallel {
		lc.ExpertFFN = s.ExpertFFN.Len()
	}
	return lc
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
	heads, _ := cfg.tpHeads()
	if !inside(s.KVHeads, heads) || !inside(s.FFN, cfg.FFN) || !inside(s.ExpertFFN, cfg.ExpertFFN) || !inside(s.Experts, cfg.Experts) || !inside(s.Vocab, cfg.Vocab) ||
		!s.ExpertParallel && s.Experts.Len() > 0 {
		return nil, fmt.Errorf("model: tensor-parallel slice (%v) is not inside %d heads, FFN %d, expert FFN %d, %d experts, vocab %d", s, heads, cfg.FFN, cfg.ExpertFFN, cfg.Experts, cfg.Vocab)
	}
	l := loader{f: f, c: cfg}
	m := &TPModel{Config: cfg, First: first, End: end, Slice: s}
	if first == 0 {
		m.Embed = l.matrix("token_embd.weight", cfg.Vocab, cfg.Embd)
	}
	hd, group := cfg.HeadDim, cfg.Heads/max(cfg.KVHeads, 1)
	q := Range{s.KVHeads.Lo * group * hd, s.KVHeads.Hi * group * hd} // query rows / attn_output columns
	kv := Range{s.KVHeads.Lo * hd, s.KVHeads.Hi * hd}
	for i := first; i < end; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ly := Layer{
			Attention: Attention{AttnNorm: l.vector(p+"attn_norm.weight", cfg.Embd)},
			FFNNorm:   l.vector(p+"ffn_norm.weight", cfg.Embd),
		}
		if cfg.isMLA() {
			vd := cfg.MLA.VDim
			ly.MLA = l.mla(p, f, s.KVHeads)
			ly.O = m.columns(&l, p+"attn_output.weight", cfg.Embd, cfg.Heads*vd, Range{s.KVHeads.Lo * vd, s.KVHeads.Hi * vd})
		} else {
			ly.Q = l.rows(p+"attn_q.weight", cfg.QDim(), cfg.Embd, q)
			ly.K = l.rows(p+"attn_k.weight", cfg.KVDim(), cfg.Embd, kv)
			ly.V = l.rows(p+"attn_v.weight", cfg.KVDim(), cfg.Embd, kv)
			ly.O = m.columns(&l, p+"attn_output.weight", cfg.Embd, cfg.QDim(), q)
		}
		if cfg.IsMoE(i) {
			ly.MoE = m.moeSlice(&l, p, s)
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
	// The member's share runs as a model of its own. Routing reads the
	// whole router, so it is the same on every member, and each member's
	// experts (or columns of each) add their share.
	m.local = &Model{Config: localConfig(cfg, s), First: first, End: end, Embed: m.Embed, Blocks: m.Blocks, RopeFactors: m.RopeFactors,
		shared: cfg.SharedExperts * s.ExpertFFN.Len(), sharedSet: true}
	return m, nil
}

// moeSlice returns a mixture-of-experts layer's router (whole), columns
// s.ExpertFFN of each expert or, under expert parallelism, experts
// s.Experts whole (the others zero), and columns s.ExpertFFN of the shared
// experts (scaled by their count: any split of an FFN's columns adds up,
// these keep the widths the mixture code expects).
func (m *TPModel) moeSlice(l *loader, prefix string, s TPSlice) *MoE {
	r := s.ExpertFFN
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
		switch {
		case !s.ExpertParallel:
			w.Experts[e] = Dense{
				Gate: gate[e].RowRange(r.Lo, r.Hi),
				Up:   up[e].RowRange(r.Lo, r.Hi),
				Down: m.columnsOf(l, prefix+"ffn_down_exps.weight", down[e], r),
			}
		case s.Experts.Lo <= e && e < s.Experts.Hi:
			w.Experts[e] = Dense{Gate: gate[e], Up: up[e], Down: down[e]}
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

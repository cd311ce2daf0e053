package model

import (
	"fmt"
	"math"

	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// deepseek2 (DeepSeek-V2/V3, Kimi K2) replaces grouped-query attention by
// multi-head latent attention (MLA). Each token's hidden state x is
// compressed to a latent c = RMSNorm(W_kv_a x)[:KVLoraRank] plus one
// rotary key k_pe shared by all heads; per head, keys and values are
// linear in c:
//
//	k_h = [W_UK,h c ; k_pe]      v_h = W_UV,h c
//
// so the cache holds only (c, k_pe) per position, and attention runs in
// the "absorbed" form, as llama.cpp does with attn_k_b/attn_v_b files:
//
//	score(t, p) = ([W_UK,h^T q_nope,h ; q_pe,h] · [c_p ; k_pe,p]) * KQScale
//	out_h       = W_UV,h (sum_p softmax(score)_p c_p)
//
// Files from older converters store W_UK and W_UV interleaved in one
// attn_kv_b tensor; they are computed in the same absorbed form (W_UK^T q
// as a sum of attn_kv_b's W_UK rows, dequantized once at load, W_UV as a
// run of its rows),
// so both layouts share the latent cache instead of expanding full K/V
// per position as llama.cpp does for them.

// MLAConfig holds the multi-head latent attention hyper-parameters of a
// deepseek2 model; it is zero for every other architecture.
type MLAConfig struct {
	QLoraRank  int // attention.q_lora_rank: width of the compressed query; 0 without (DeepSeek-V2-Lite)
	KVLoraRank int // attention.kv_lora_rank: width of the cached latent
	NopeDim    int // per-head query/key part without position: HeadDim - RopeDim
	VDim       int // per-head value width
	// Split is true for files with attn_k_b/attn_v_b (written by current
	// converters, with attention.key_length_mla), false for attn_kv_b.
	Split bool
	// KQScale multiplies q·k before the softmax: 1/sqrt(HeadDim), times
	// YaRN's mscale² (llama.cpp's kq_scale for deepseek2).
	KQScale float32
	Yarn    Yarn
}

// Yarn is the rotary embedding of a deepseek2 model's rope part, with
// YaRN's frequency blend and magnitude (ggml's rope_yarn): pair i turns by
//
//	θ_i = s·θe (1-r_i) + θe r_i,   θe = pos·base^(-2i/RopeDim)
//
// where s = FreqScale and r_i ramps from Ext (pairs below Lo, kept at the
// trained frequency) to 0 (above Hi, interpolated), and both rotated
// elements are multiplied by Mscale.
type Yarn struct {
	FreqScale float32 // 1/rope.scaling.factor (1 without scaling)
	Ext       float32 // ggml's ext_factor: 1 for YaRN, 0 otherwise
	Mscale    float32 // magnitude of the rotated pairs
	Lo, Hi    float32 // correction dims: the ramp's ends, in pairs
}

// isMLA reports whether the model uses multi-head latent attention.
func (c Config) isMLA() bool { return c.MLA.KVLoraRank > 0 }

// mlaCacheDim is the cache row width of an MLA layer: latent and rope key.
func (c Config) mlaCacheDim() int { return c.MLA.KVLoraRank + c.RopeDim }

// readMLA reads the deepseek2 attention and rope keys into c, following
// llama.cpp's reading of them (llama-model.cpp, llama-context.cpp).
func (c *Config) readMLA(md *gguf.Metadata, geti func(string, uint64) int) error {
	a := &c.MLA
	a.QLoraRank = geti("attention.q_lora_rank", 0)
	a.KVLoraRank = geti("attention.kv_lora_rank", 0)
	c.RopeDim = geti("rope.dimension_count", 0)
	if kmla, vmla := geti("attention.key_length_mla", 0), geti("attention.value_length_mla", 0); kmla != 0 && vmla != 0 {
		// The converter's MQA form: key_length and value_length describe
		// the cached latent; the per-head sizes are the _mla keys.
		a.Split, c.HeadDim, a.VDim = true, kmla, vmla
	} else {
		c.HeadDim = geti("attention.key_length", uint64(c.Embd/max(c.Heads, 1)))
		a.VDim = geti("attention.value_length", uint64(max(c.HeadDim, 0)))
	}
	a.NopeDim = c.HeadDim - c.RopeDim
	switch {
	case a.QLoraRank < 0 || a.KVLoraRank <= 0:
		return fmt.Errorf("model: %s q_lora_rank %d / kv_lora_rank %d are not valid", c.Arch, a.QLoraRank, a.KVLoraRank)
	case c.RopeDim <= 0 || c.RopeDim%2 != 0 || a.NopeDim <= 0 || a.VDim <= 0:
		return fmt.Errorf("model: %s head dims (key %d, rope %d, value %d) are not valid", c.Arch, c.HeadDim, c.RopeDim, a.VDim)
	}
	c.RMSEps = float32(md.ArchFloat("attention.layer_norm_rms_epsilon", 1e-5))
	c.RopeBase = float32(md.ArchFloat("rope.freq_base", 10000))
	c.RopeScale = 1
	return c.readYarn(md, geti)
}

// readYarn derives the rope part's rotation and the attention scale the
// way llama.cpp does for deepseek2: the context's yarn_attn_factor (from
// the mscale terms, then divided by the 1+0.1·ln(factor) that ggml's rope
// multiplies back in), and kq_scale = mscale²/sqrt(HeadDim) with
// mscale = attn_factor·(1+0.1·ln factor)·(1+0.1·log_mul·ln factor).
func (c *Config) readYarn(md *gguf.Metadata, geti func(string, uint64) int) error {
	typ := md.ArchString("rope.scaling.type", "linear")
	factor := float32(md.ArchFloat("rope.scaling.factor", md.ArchFloat("rope.scale_linear", 0)))
	y := Yarn{FreqScale: 1}
	switch typ {
	case "none":
	case "linear", "yarn":
		if factor < 0 || math.IsNaN(float64(factor)) {
			return fmt.Errorf("model: rope.scaling.factor %v is not valid", factor)
		}
		if factor != 0 {
			y.FreqScale = 1 / factor
		}
		if typ == "yarn" {
			y.Ext = 1
		}
	default:
		return fmt.Errorf("model: rope scaling %q is not supported for %s (none, linear, yarn)", typ, c.Arch)
	}
	// yarn_log_multiplier is written as 0.1·mscale_all_dim; llama.cpp
	// undoes the 0.1.
	logMul := float32(md.ArchFloat("rope.scaling.yarn_log_multiplier", 0)) / 0.1
	attn := float32(1)
	ln := func(v float32) float32 { return float32(math.Log(float64(v))) }
	if y.Ext != 0 {
		mscale := func(scale, m float32) float32 {
			if scale <= 1 {
				return 1
			}
			return 0.1*m*ln(scale) + 1
		}
		f := 1 / y.FreqScale
		if logMul != 0 {
			m := float32(1)
			if logMul != 1 { // DeepSeek-V2 sets mscale = mscale_all_dim
				m = logMul
			}
			attn = mscale(f, m) / mscale(f, logMul)
		} else {
			attn = mscale(f, 1)
		}
		attn *= 1 / (1 + 0.1*ln(f))
	}
	attn *= float32(md.ArchFloat("rope.scaling.attn_factor", 1))
	y.Mscale = attn
	if y.Ext != 0 {
		y.Mscale *= 1 + 0.1*ln(1/y.FreqScale)
		origCtx := geti("rope.scaling.original_context_length", uint64(max(c.Context, 0)))
		if origCtx <= 0 {
			return fmt.Errorf("model: rope.scaling.original_context_length %d is not valid", origCtx)
		}
		fast := float32(md.ArchFloat("rope.scaling.yarn_beta_fast", 32))
		slow := float32(md.ArchFloat("rope.scaling.yarn_beta_slow", 1))
		y.Lo, y.Hi = yarnCorrDims(c.RopeDim, origCtx, c.RopeBase, fast, slow)
	}
	attnOrg := attn * (1 + 0.1*ln(1/y.FreqScale))
	ms := attnOrg * (1 + 0.1*logMul*ln(1/y.FreqScale))
	c.MLA.KQScale = ms * ms / float32(math.Sqrt(float64(c.HeadDim)))
	c.MLA.Yarn = y
	return nil
}

// yarnCorrDims returns the first and last pair index of YaRN's ramp: the
// pairs that turn beta_fast and beta_slow times over the original context
// (ggml_rope_yarn_corr_dims).
func yarnCorrDims(ropeDim, origCtx int, base, fast, slow float32) (lo, hi float32) {
	dim := func(rot float32) float64 {
		return float64(ropeDim) * math.Log(float64(origCtx)/(float64(rot)*2*math.Pi)) / (2 * math.Log(float64(base)))
	}
	lo = float32(max(0, math.Floor(dim(fast))))
	hi = float32(min(float64(ropeDim-1), math.Ceil(dim(slow))))
	return lo, hi
}

// Angles writes the YaRN cos and sin (times Mscale) of position pos for the
// ropeDim/2 pairs into cs and sn. Angles are computed in float64.
func (y *Yarn) Angles(cs, sn []float32, pos int, base float32) {
	half := len(cs)
	thetaScale := math.Pow(float64(base), -2/float64(2*half))
	extrap := float64(pos)
	for i := range half {
		theta := float64(y.FreqScale) * extrap
		if y.Ext != 0 {
			r := (float64(i) - float64(y.Lo)) / math.Max(0.001, float64(y.Hi-y.Lo))
			mix := (1 - min(1, max(0, r))) * float64(y.Ext)
			theta = theta*(1-mix) + extrap*mix
		}
		s, c := math.Sincos(theta)
		cs[i], sn[i] = float32(c)*y.Mscale, float32(s)*y.Mscale
		extrap *= thetaScale
	}
}

// rotate turns the adjacent pairs (2i, 2i+1) of x by the angles (ggml's
// "normal" rope, which llama.cpp uses for deepseek2).
func rotate(x, cs, sn []float32) {
	for i := range cs {
		a, b := x[2*i], x[2*i+1]
		x[2*i] = a*cs[i] - b*sn[i]
		x[2*i+1] = a*sn[i] + b*cs[i]
	}
}

// MLA holds one layer's multi-head latent attention weights (besides
// AttnNorm and O, which every attention has). Per-head matrices view the
// file's 3-D tensors without copying.
type MLA struct {
	QA      tensor.Matrix   // attn_q_a: [QLoraRank × Embd]; zero without q LoRA
	QANorm  []float32       // attn_q_a_norm: [QLoraRank]
	QB      tensor.Matrix   // attn_q_b: [Heads*HeadDim × QLoraRank]
	Q       tensor.Matrix   // attn_q: [Heads*HeadDim × Embd], only without q LoRA
	KVA     tensor.Matrix   // attn_kv_a_mqa: [KVLoraRank+RopeDim × Embd]
	KVANorm []float32       // attn_kv_a_norm: [KVLoraRank]
	KB      []tensor.Matrix // attn_k_b per head: [KVLoraRank × NopeDim] = W_UK^T; nil for attn_kv_b files
	KVB     tensor.Matrix   // attn_kv_b: [Heads*(NopeDim+VDim) × KVLoraRank]; zero for split files
	VB      []tensor.Matrix // per head: [VDim × KVLoraRank] = W_UV (attn_v_b, or rows of attn_kv_b)
	// UK is W_UK of attn_kv_b files, dequantized once at load: head h's
	// NopeDim rows of KVLoraRank at UK[h*NopeDim*KVLoraRank:]. The
	// absorbed query is a sum of these rows weighted by q_nope; decoding
	// them again for every token cost more than reading them as f32.
	UK []float32
}

// mla loads the MLA weights of the layer with tensor prefix p for heads
// h (all of them on one node; a tensor-parallel member's share): the
// query rows and the per-head up-projections of those heads, and the
// latent path (q_a, kv_a and their norms), which every head reads, whole.
func (l *loader) mla(p string, f *gguf.File, h Range) *MLA {
	c := l.c
	a := c.MLA
	qd := c.Heads * c.HeadDim
	qr := Range{h.Lo * c.HeadDim, h.Hi * c.HeadDim} // the heads' query rows
	w := &MLA{
		KVA:     l.matrix(p+"attn_kv_a_mqa.weight", a.KVLoraRank+c.RopeDim, c.Embd),
		KVANorm: l.vector(p+"attn_kv_a_norm.weight", a.KVLoraRank),
	}
	// llama.cpp picks the plain query by the q_lora_rank key (and skips
	// that key for layer counts it knows as "lite" models); the tensor
	// that is present says the same without the guess.
	if _, plain := f.Tensor(p + "attn_q.weight"); plain {
		w.Q = l.rows(p+"attn_q.weight", qd, c.Embd, qr)
	} else if a.QLoraRank > 0 {
		w.QA = l.matrix(p+"attn_q_a.weight", a.QLoraRank, c.Embd)
		w.QANorm = l.vector(p+"attn_q_a_norm.weight", a.QLoraRank)
		w.QB = l.rows(p+"attn_q_b.weight", qd, a.QLoraRank, qr)
	} else if l.err == nil {
		l.err = fmt.Errorf("model: %sattn_q.weight is missing and q_lora_rank is 0", p)
	}
	if a.Split {
		kb := l.heads(p+"attn_k_b.weight", a.KVLoraRank, a.NopeDim, c.Heads)
		vb := l.heads(p+"attn_v_b.weight", a.VDim, a.KVLoraRank, c.Heads)
		if l.err == nil {
			w.KB, w.VB = kb[h.Lo:h.Hi:h.Hi], vb[h.Lo:h.Hi:h.Hi]
		}
		return w
	}
	per := a.NopeDim + a.VDim // attn_kv_b rows per head: its W_UK rows, then its W_UV rows
	kvb := l.rows(p+"attn_kv_b.weight", c.Heads*per, a.KVLoraRank, Range{h.Lo * per, h.Hi * per})
	if l.err != nil {
		return w
	}
	w.KVB = kvb
	w.UK = make([]float32, h.Len()*a.NopeDim*a.KVLoraRank)
	for i := range h.Len() {
		r0 := i*per + a.NopeDim
		w.VB = append(w.VB, kvb.RowRange(r0, r0+a.VDim))
		for j := range a.NopeDim {
			k := (i*a.NopeDim + j) * a.KVLoraRank
			kvb.EmbedRow(i*per+j, w.UK[k:k+a.KVLoraRank])
		}
	}
	return w
}

// heads returns the n matrices of rows×cols of a 3-D tensor (GGUF dims
// [cols, rows, n]).
func (l *loader) heads(name string, rows, cols, n int) []tensor.Matrix {
	t, data := l.tensor(name, cols, rows, n)
	if l.err != nil {
		return nil
	}
	all, err := tensor.NewMatrix(t.Type, rows*n, cols, data)
	if err != nil {
		l.err = fmt.Errorf("model: tensor %s: %w", name, err)
		return nil
	}
	out := make([]tensor.Matrix, n)
	for h := range out {
		out[h] = all.RowRange(h*rows, (h+1)*rows)
	}
	return out
}

// mlaState is the scratch of MLA attention over a batch, beside State's.
type mlaState struct {
	qa  []float32 // [Batch × QLoraRank] compressed query
	kv  []float32 // [Batch × (KVLoraRank+RopeDim)] latent and rope key, before norm and rotation
	qf  []float32 // [Batch × Heads × (KVLoraRank+RopeDim)] absorbed query, then rotated rope query
	lat []float32 // [Batch × Heads × KVLoraRank] attention output in latent space
	vo  []float32 // [Batch × Heads*VDim] attention output, the input of O
	cs  []float32 // [Batch × RopeDim/2] rope cos, sin of each token
	sn  []float32

	actQA *tensor.Activations // [Batch × QLoraRank]
	actV  *tensor.Activations // [Batch × Heads*VDim]

	// The per-head products run heads in parallel, one worker's heads
	// serially with that worker's scratch.
	workers []mlaWorker
	mw      *MLA // the layer whose heads run
	n       int  // tokens in the batch
	values  bool // false: absorb the queries; true: project the values
}

// mlaWorker is one worker's scratch for the per-head products.
type mlaWorker struct {
	gin     []float32           // [Batch × max(NopeDim, KVLoraRank)] one head's inputs, gathered
	gout    []float32           // [Batch × max(KVLoraRank, VDim)] one head's outputs
	actNope *tensor.Activations // [Batch × NopeDim] over gin
	actLat  *tensor.Activations // [Batch × KVLoraRank] over gin
}

func newMLAState(c Config, batch, workers int) *mlaState {
	a := c.MLA
	w := c.mlaCacheDim()
	ms := &mlaState{
		qa:    make([]float32, batch*a.QLoraRank),
		kv:    make([]float32, batch*w),
		qf:    make([]float32, batch*c.Heads*w),
		lat:   make([]float32, batch*c.Heads*a.KVLoraRank),
		vo:    make([]float32, batch*c.Heads*a.VDim),
		cs:    make([]float32, batch*c.RopeDim/2),
		sn:    make([]float32, batch*c.RopeDim/2),
		actQA: tensor.NewActivations(batch, a.QLoraRank),
		actV:  tensor.NewActivations(batch, c.Heads*a.VDim),
	}
	for range min(workers, c.Heads) {
		ms.workers = append(ms.workers, mlaWorker{
			gin:     make([]float32, batch*max(a.NopeDim, a.KVLoraRank)),
			gout:    make([]float32, batch*max(a.KVLoraRank, a.VDim)),
			actNope: tensor.NewActivations(batch, a.NopeDim),
			actLat:  tensor.NewActivations(batch, a.KVLoraRank),
		})
	}
	return ms
}

// attentionMLA computes the MLA attention of layer l for the n rows of
// segs into s.xb2 [n × Embd]: O(MLA(RMSNorm(x))), caching each token's
// latent and rope key in its segment's cache.
func (s *State) attentionMLA(l int, segs []Segment, n int) {
	m, w, ms := s.m, &s.m.Blocks[l], s.mla
	a := m.MLA
	embd, hd, H, kvl, rd := m.Embd, m.HeadDim, m.Heads, a.KVLoraRank, m.RopeDim
	cw := m.mlaCacheDim()
	x, xb, q := s.X[:n*embd], s.xb[:n*embd], s.q[:n*H*hd]
	for i := range n {
		tensor.RMSNorm(xb[i*embd:(i+1)*embd], x[i*embd:(i+1)*embd], w.AttnNorm, m.RMSEps)
	}
	s.actEmbd.Set(xb, n)
	if w.MLA.QA.Rows > 0 {
		qa := ms.qa[:n*a.QLoraRank]
		s.matmul(qa, w.MLA.QA, s.actEmbd)
		for i := range n {
			r := qa[i*a.QLoraRank : (i+1)*a.QLoraRank]
			tensor.RMSNorm(r, r, w.MLA.QANorm, m.RMSEps)
		}
		ms.actQA.Set(qa, n)
		s.matmul(q, w.MLA.QB, ms.actQA)
	} else {
		s.matmul(q, w.MLA.Q, s.actEmbd)
	}
	kv := ms.kv[:n*cw]
	s.matmul(kv, w.MLA.KVA, s.actEmbd)

	// Cache each token's normed latent and rotated rope key.
	half := rd / 2
	first := 0
	for _, g := range segs {
		for j := range g.N {
			i, pos := first+j, g.Cache.Len+j
			cs, sn := ms.cs[i*half:(i+1)*half], ms.sn[i*half:(i+1)*half]
			a.Yarn.Angles(cs, sn, pos, m.RopeBase)
			row := kv[i*cw : (i+1)*cw]
			tensor.RMSNorm(row[:kvl], row[:kvl], w.MLA.KVANorm, m.RMSEps)
			rotate(row[kvl:], cs, sn)
			g.Cache.put(g.Cache.k[l], 0, pos, row)
		}
		g.Cache.writes[l]++
		first += g.N
	}

	// Queries: the rope part rotated, the nope part absorbed into the
	// latent space (qf = [W_UK^T q_nope ; rot(q_pe)] per head).
	for i := range n {
		cs, sn := ms.cs[i*half:(i+1)*half], ms.sn[i*half:(i+1)*half]
		for h := range H {
			dst := ms.qf[(i*H+h)*cw+kvl : (i*H+h+1)*cw]
			copy(dst, q[i*H*hd+h*hd+a.NopeDim:i*H*hd+(h+1)*hd])
			rotate(dst, cs, sn)
		}
	}
	s.perHead(w.MLA, n, false)

	// One KV "head" (the latent) shared by every query head; each
	// segment over its own cache.
	first = 0
	for _, g := range segs {
		c := g.Cache
		s.job = attnJob{c: c, k: c.k[l], v: c.k[l], n: g.N, pos0: c.Len, groups: 1, group: H,
			q: ms.qf[first*H*cw:], qTok: H * cw, qHead: cw, out: ms.lat[first*H*kvl:], oTok: H * kvl, oHead: kvl, vw: kvl,
			scale: a.KQScale, capacity: s.capacity}
		s.runAttention()
		first += g.N
	}

	s.perHead(w.MLA, n, true)
	ms.actV.Set(ms.vo[:n*H*a.VDim], n)
	s.matmul(s.xb2[:n*embd], w.O, ms.actV)
}

// perHead runs the per-head products of n tokens, heads spread over the
// workers: with values false the queries' absorption, else the values'
// projection. Each head's product is one serial matrix product, so the
// result does not depend on the pool.
func (s *State) perHead(mw *MLA, n int, values bool) {
	ms := s.mla
	ms.mw, ms.n, ms.values = mw, n, values
	s.pool.Each(len(ms.workers), s.m.Heads, s.mlaHeadFn)
	a := s.m.MLA
	for h := range s.m.Heads {
		switch {
		case values:
			s.bytesRead += int64(len(mw.VB[h].Data))
		case mw.KB != nil:
			s.bytesRead += int64(len(mw.KB[h].Data))
		default:
			s.bytesRead += int64(a.NopeDim*a.KVLoraRank) * 4 // the f32 rows of UK
		}
	}
}

// head runs perHead's products of head h with worker w's scratch.
func (s *State) head(w, h int) {
	ms := s.mla
	if ms.values {
		s.projectValue(&ms.workers[w], h)
	} else {
		s.absorbQuery(&ms.workers[w], h)
	}
}

// projectValue writes W_UV,h lat_h of the batch's tokens into their
// head-h part of vo.
func (s *State) projectValue(wk *mlaWorker, h int) {
	m, ms := s.m, s.mla
	n, H, kvl, vd := ms.n, m.Heads, m.MLA.KVLoraRank, m.MLA.VDim
	gin, gout := wk.gin[:n*kvl], wk.gout[:n*vd]
	for i := range n {
		copy(gin[i*kvl:(i+1)*kvl], ms.lat[(i*H+h)*kvl:(i*H+h+1)*kvl])
	}
	wk.actLat.Set(gin, n)
	tensor.MatMulAct(nil, gout, ms.mw.VB[h], wk.actLat)
	for i := range n {
		copy(ms.vo[(i*H+h)*vd:(i*H+h+1)*vd], gout[i*vd:(i+1)*vd])
	}
}

// absorbQuery writes W_UK,h^T q_nope,h of the batch's tokens into the
// latent part of their head-h rows of qf.
func (s *State) absorbQuery(wk *mlaWorker, h int) {
	m, ms, mw := s.m, s.mla, s.mla.mw
	a := m.MLA
	n, hd, H, kvl, cw := ms.n, m.HeadDim, m.Heads, a.KVLoraRank, m.mlaCacheDim()
	if mw.KB != nil {
		gin, gout := wk.gin[:n*a.NopeDim], wk.gout[:n*kvl]
		for i := range n {
			copy(gin[i*a.NopeDim:(i+1)*a.NopeDim], s.q[i*H*hd+h*hd:i*H*hd+h*hd+a.NopeDim])
		}
		wk.actNope.Set(gin, n)
		tensor.MatMulAct(nil, gout, mw.KB[h], wk.actNope)
		for i := range n {
			copy(ms.qf[(i*H+h)*cw:(i*H+h)*cw+kvl], gout[i*kvl:(i+1)*kvl])
		}
		return
	}
	// attn_kv_b holds W_UK,h as NopeDim rows of KVLoraRank (UK): the
	// product with its transpose is a sum of those rows weighted by q_nope.
	for i := range n {
		clear(ms.qf[(i*H+h)*cw : (i*H+h)*cw+kvl])
	}
	uk := mw.UK[h*a.NopeDim*kvl : (h+1)*a.NopeDim*kvl]
	for j := range a.NopeDim {
		row := uk[j*kvl : (j+1)*kvl]
		for i := range n {
			tensor.Axpy(ms.qf[(i*H+h)*cw:(i*H+h)*cw+kvl], s.q[i*H*hd+h*hd+j], row)
		}
	}
}

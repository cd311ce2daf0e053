package gpu

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"unsafe"

	"strata/runtime/model"
	"strata/runtime/tensor"
)

// Whole layers on the device (model.LayerAccelerator): a dense layer with
// grouped-query attention (llama, qwen2, qwen3) runs as one submission,
// the hidden rows copied in once and out once: RMSNorm, the activations
// quantized on the device, the Q/K/V products, biases, per-head norms,
// RoPE, the new keys and values written into each sequence's KV cache,
// attention, the output product, SwiGLU and the residual adds. The KV
// cache stays where model.Cache keeps it, in host memory the device
// imports (VK_EXT_external_memory_host; once per Cache, kvimport.go), so
// the CPU's prompt cache, rollback and replay see what the device wrote.
// Latent attention (deepseek2) takes the place of the Q/K/V part
// (mla.go); a mixture-of-experts layer routes its tokens on the device
// and runs their experts in the same submission (experts.go), or, where
// the device lacks its router or part of its experts, runs its attention
// half here and its experts in a submission of their own, the State
// routing. Caches of other element types than f16 and f32 keep one
// submission per product.

// maxHeadDim is the widest head the attention kernel takes.
const maxHeadDim = 256

// wholeLayer is a block the device runs entire, or its attention half (a
// mixture-of-experts layer the State routes: gate, up, down and moe nil): its matrices held,
// its norms and biases copied (nil where the block has none). Latent
// attention (mla non-nil) has its own matrices instead of q, k and v.
type wholeLayer struct {
	q, k, v, o, gate, up, down      *Matrix
	attnNorm, ffnNorm, qNorm, kNorm *Buffer
	bq, bk, bv                      *Buffer
	mla                             *latentLayer
	moe                             *routedLayer // a mixture of experts routed on the device (experts.go); nil: its attention half only
}

// layerWork is the scratch of whole layers, grown to the largest batch
// seen and reused: the hidden rows and every intermediate, and the
// activations in both quantized forms.
type layerWork struct {
	rows                         int
	bufs                         scratch
	x, xb, q, k, v, att, hb, hb2 *Buffer
	quantBufs
	table     *Buffer   // RoPE's cosines and sines, a row per row
	positions []int     // the positions table holds
	spare     []int     // the list rope builds the next positions in
	cs, sn    []float32 // latent attention's angles of a position
}

// quantBufs hold a product's input quantized, in either form.
type quantBufs struct {
	q32, d32   *Buffer // quants32 form
	qK, dK, sK *Buffer // quantsK form
}

// wholeLayers picks the held blocks the device can run entire.
func (o *Offload) wholeLayers(m *model.Model, from, to int) error {
	c := m.Config
	if !o.d.vram && (o.d.importAlign == 0 || o.d.hostPointerProps == nil) {
		return nil // the KV cache can be neither read in place nor mirrored
	}
	gqa := c.HeadDim <= maxHeadDim && c.HeadDim%2 == 0 && c.KVHeads > 0 && c.Heads%c.KVHeads == 0
	for l := from; l < to; l++ {
		b := &m.Blocks[l]
		w := &wholeLayer{o: o.matrix(b.O)}
		if b.MoE == nil {
			w.gate, w.up, w.down = o.matrix(b.Gate), o.matrix(b.Up), o.matrix(b.Down)
		}
		if w.o == nil || b.MoE == nil && slices.Contains([]*Matrix{w.gate, w.up, w.down}, nil) {
			continue
		}
		var err error
		switch {
		case b.MLA != nil:
			if w.mla, err = o.latentLayer(c, b.MLA); err != nil {
				return err
			}
			if w.mla == nil {
				continue
			}
		case gqa:
			w.q, w.k, w.v = o.matrix(b.Q), o.matrix(b.K), o.matrix(b.V)
			if slices.Contains([]*Matrix{w.q, w.k, w.v}, nil) {
				continue
			}
		default:
			continue // a shape the kernels lack
		}
		if w.gate != nil {
			o.ffn = max(o.ffn, b.Gate.Rows)
		}
		if b.MoE != nil {
			if w.moe, err = o.routedLayer(c, b.MoE); err != nil {
				return err
			}
		}
		for _, f := range []struct {
			dst **Buffer
			v   []float32
		}{{&w.attnNorm, b.AttnNorm}, {&w.ffnNorm, b.FFNNorm}, {&w.qNorm, b.QNorm}, {&w.kNorm, b.KNorm},
			{&w.bq, b.Bq}, {&w.bk, b.Bk}, {&w.bv, b.Bv}} {
			if *f.dst, err = o.floats(f.v); err != nil {
				return err
			}
		}
		o.whole[l] = w
	}
	return nil
}

// floats copies v to the device (kept with the Offload); nil for none.
func (o *Offload) floats(v []float32) (*Buffer, error) {
	if v == nil {
		return nil, nil
	}
	b, err := o.d.NewBuffer(4 * len(v))
	if err != nil {
		return nil, err
	}
	copy(b.Float32s(), v)
	o.small = append(o.small, b)
	return b, nil
}

// matrix is the device's copy of w, nil where it holds none.
func (o *Offload) matrix(w tensor.Matrix) *Matrix {
	if len(w.Data) == 0 {
		return nil
	}
	m := o.held[&w.Data[0]]
	if m == nil || m.Rows != w.Rows || m.Cols != w.Cols || m.Type != w.Type {
		return nil
	}
	return m
}

// HoldsExperts reports whether the device holds w's routed experts
// (model.ExpertAccelerator).
func (o *Offload) HoldsExperts(w *model.MoE) bool {
	if len(w.Experts) == 0 {
		return false
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.holdsExperts(w)
}

// holdsExperts is HoldsExperts with o.mu held.
func (o *Offload) holdsExperts(w *model.MoE) bool {
	first := &w.Experts[0]
	return o.walkChunks(first.Gate.Data, len(w.Experts), nil) && o.walkChunks(first.Up.Data, len(w.Experts), nil) &&
		o.walkChunks(first.Down.Data, len(w.Experts), nil)
}

// WholeLayers is how many layers the device runs entire, and how many
// of the others their attention half of (mixture-of-experts layers the
// State routes, whose experts then run in a submission of their own).
func (o *Offload) WholeLayers() (whole, attention int) {
	for _, w := range o.whole {
		if w.gate != nil || w.moe != nil {
			whole++
		} else {
			attention++
		}
	}
	return whole, attention
}

// Layer implements model.LayerAccelerator.
func (o *Offload) Layer(l int, x []float32, segs []model.Segment) (model.Ran, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	w := o.whole[l]
	if w == nil {
		return model.RanNone, nil
	}
	n := 0
	for _, g := range segs {
		if t := g.Cache.Type(); t != model.KVF16 && t != model.KVF32 {
			return model.RanNone, nil
		}
		n += g.N
	}
	c := o.m.Config
	dispatches := 3*len(segs) + 24
	if o.d.vram {
		dispatches += 4 * len(segs) // the mirrors' loads and stores
	}
	if w.moe != nil {
		dispatches += 16 + len(w.moe.gate) + len(w.moe.up) + len(w.moe.down) // the norm, router, routing, shared expert, the experts' products (a dispatch a part) and their sum
	}
	if w.mla != nil {
		dispatches += 20 + len(w.mla.kb) + len(w.mla.vb) // latent attention's steps beyond grouped-query's (about 14, the heads' products a dispatch a part) and quantizations
	}
	if dispatches > maxDescriptorSets {
		return model.RanNone, nil // more sequences or heads than one submission holds
	}
	o.layerMu.Lock()
	defer o.layerMu.Unlock()
	if len(x) != n*c.Embd {
		return model.RanNone, fmt.Errorf("gpu: layer %d: %d values for %d rows of %d", l, len(x), n, c.Embd)
	}
	// The caches' layers, imported once and kept while each Cache lives
	// (kvimport.go). A cache the device cannot bind (over its binding
	// range, at an offset it cannot bind at) is no failure: the State
	// runs the layer, its products still here.
	var temp scratch
	defer temp.free()
	caches := o.kvBufs[:0]
	defer func() { clear(caches); o.kvBufs = caches[:0] }()
	syncs := o.syncs[:0]
	defer func() { clear(syncs); o.syncs = syncs[:0] }()
	for _, g := range segs {
		if o.d.vram { // the device's own copy, loaded where stale, its new rows copied back
			imp, err := o.kv.mirror(o.d, g.Cache, l, &temp)
			if _, rb := g.Cache.Layout(); err != nil || rb%4 != 0 {
				return model.RanNone, nil
			}
			caches = append(caches, imp.k, imp.v)
			syncs = append(syncs, kvSync{imp: imp, seg: g, load: imp.stale(g.Cache, l)})
			continue
		}
		k, v, err := o.kv.layer(o.d, g.Cache, l, &temp)
		if err != nil {
			return model.RanNone, nil
		}
		caches = append(caches, k, v)
	}
	work := &o.work
	if err := work.grow(o.d, c, o.ffn, n); err != nil {
		return model.RanNone, err
	}
	work.rope(o.m, segs, n)
	copy(work.x.Float32s(), x)
	r := recorder{quants: &work.quantBufs, table: work.table, n: n}
	if err := o.loadMirrors(&r, l, syncs); err != nil {
		return model.RanNone, err
	}
	if w.mla != nil {
		if err := o.latent.grow(o.d, c, n); err != nil {
			return model.RanNone, err
		}
		o.recordLatentAttention(&r, w, segs, caches)
	} else {
		o.recordAttention(&r, w, segs, caches)
	}
	embd := c.Embd

	// x += Down(SiLU(Gate h) * Up h), h = RMSNorm(x); or its mixture of
	// experts
	ran := model.RanAttention
	if w.moe != nil {
		if err := o.moe.growRouted(o.d, n, c, w.moe.shGate != nil); err != nil {
			return model.RanNone, err
		}
		o.recordRouted(&r, w)
		ran = model.RanLayer
	}
	if w.gate != nil {
		r.norm(work.x, w.ffnNorm, work.xb, n, embd, c.RMSEps)
		r.product(work.hb, w.gate, work.xb)
		r.product(work.hb2, w.up, work.xb)
		width := w.gate.Rows
		r.swiglu(work.hb, work.hb2, n*width)
		r.product(work.xb, w.down, work.hb)
		r.add(work.x, work.xb, n*embd, n*embd)
		ran = model.RanLayer
	}

	o.recordStores(&r, syncs)
	o.calls.Add(1)
	if err := o.d.run(r.ds...); err != nil {
		return model.RanNone, err
	}
	o.storeRows(l, syncs)
	o.layerRuns.Add(1)
	if w.moe != nil {
		o.routedRuns.Add(1)
	}
	runtime.KeepAlive(segs) // the caches (their imports live as long)
	copy(x, work.x.Float32s()[:n*embd])
	return ran, nil
}

// recordAttention records x += O · Attn(RoPE(Q, K, V of RMSNorm(x))) of
// grouped-query attention, the keys and values stored into each
// segment's cache (caches: each segment's K and V buffers).
func (o *Offload) recordAttention(r *recorder, w *wholeLayer, segs []model.Segment, caches []*Buffer) {
	c, work, n := o.m.Config, &o.work, r.n
	embd, qd, kvd := c.Embd, c.QDim(), c.KVDim()
	r.norm(work.x, w.attnNorm, work.xb, n, embd, c.RMSEps)
	r.product(work.q, w.q, work.xb)
	r.product(work.k, w.k, work.xb)
	r.product(work.v, w.v, work.xb)
	if w.bq != nil {
		r.add(work.q, w.bq, n*qd, qd)
		r.add(work.k, w.bk, n*kvd, kvd)
		r.add(work.v, w.bv, n*kvd, kvd)
	}
	if w.qNorm != nil {
		r.norm(work.q, w.qNorm, work.q, n*c.Heads, c.HeadDim, c.RMSEps)
		r.norm(work.k, w.kNorm, work.k, n*c.KVHeads, c.HeadDim, c.RMSEps)
	}
	r.rope(work.q, c.Heads, c.HeadDim, c.RopeDim, 0, c.RopeNeox)
	r.rope(work.k, c.KVHeads, c.HeadDim, c.RopeDim, 0, c.RopeNeox)
	row := 0
	for i, g := range segs {
		kc, vc := caches[2*i], caches[2*i+1]
		r.store(work.k, kc, row, g, c.KVHeads, c.HeadDim)
		r.store(work.v, vc, row, g, c.KVHeads, c.HeadDim)
		r.attend(attention{q: work.q, k: kc, v: vc, out: work.att, row0: row, seg: g, heads: c.Heads, kvHeads: c.KVHeads,
			width: c.HeadDim, vwidth: c.HeadDim, scale: float32(1 / math.Sqrt(float64(c.HeadDim)))})
		row += g.N
	}
	r.product(work.xb, w.o, work.att)
	r.add(work.x, work.xb, n*embd, n*embd)
}

// recorder collects one submission's dispatches over buffers of n rows,
// quantizing a product's input only where the last quantization in that
// form was of another buffer.
type recorder struct {
	quants    *quantBufs
	table     *Buffer // RoPE's (rope only)
	n         int
	ds        []dispatch
	in32, inK *Buffer // the buffers quants holds quantized, in each form
}

func (r *recorder) norm(x, weight, out *Buffer, rows, cols int, eps float32) {
	r.normStrided(x, weight, out, rows, cols, cols, eps)
}

// normStrided normalizes the first cols of rows stride floats apart.
func (r *recorder) normStrided(x, weight, out *Buffer, rows, cols, stride int, eps float32) {
	push := pushU32(uint32(rows), uint32(cols), math.Float32bits(eps), uint32(stride))
	r.ds = append(r.ds, dispatch{name: "rmsnorm", buffers: []*Buffer{x, weight, out}, push: push, groups: workgroups(rows, 1)})
	r.wrote(out)
}

// swiglu records gate = SiLU(gate) * up over n values.
func (r *recorder) swiglu(gate, up *Buffer, n int) {
	r.ds = append(r.ds, dispatch{name: "swiglu", buffers: []*Buffer{gate, up, gate}, push: pushU32(uint32(n)), groups: elementGroups(n)})
	r.wrote(gate)
}

// flag is a kernel's flag: 1 for true.
func flag(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func (r *recorder) add(y, x *Buffer, n, period int) {
	r.ds = append(r.ds, dispatch{name: "add", buffers: []*Buffer{y, x}, push: pushU32(uint32(n), uint32(period)), groups: elementGroups(n)})
	r.wrote(y)
}

// rope rotates, in each of the rows' heads (width floats), the ropeDim
// elements from offset by the table's angles.
func (r *recorder) rope(x *Buffer, heads, width, ropeDim, offset int, neox bool) {
	push := pushU32(uint32(r.n), uint32(heads), uint32(width), uint32(ropeDim), flag(neox), uint32(offset))
	r.ds = append(r.ds, dispatch{name: "rope", buffers: []*Buffer{x, r.table}, push: push, groups: elementGroups(r.n * heads * ropeDim / 2)})
	r.wrote(x)
}

// store writes rows row0.. of src (heads of width each) into segment
// g's cache at its positions.
func (r *recorder) store(src, cache *Buffer, row0 int, g model.Segment, heads, width int) {
	push := pushU32(uint32(row0), uint32(g.N), uint32(g.Cache.Len), uint32(heads), uint32(width), uint32(g.Cache.Capacity), f16Flag(g.Cache))
	r.ds = append(r.ds, dispatch{name: "kv_store", buffers: []*Buffer{src, cache}, push: push, groups: elementGroups(g.N * heads * width / 2)})
}

// attention is one segment's attention: its rows of q over its cache's
// keys k and values v (for latent attention the same buffer), into out.
type attention struct {
	q, k, v, out   *Buffer
	row0           int
	seg            model.Segment
	heads, kvHeads int
	width, vwidth  int // of a query head and cache row; of a value
	scale          float32
}

func (r *recorder) attend(a attention) {
	g := a.seg
	push := pushU32(uint32(a.row0), uint32(g.N), uint32(g.Cache.Len), uint32(a.heads), uint32(a.kvHeads), uint32(a.width), uint32(a.vwidth),
		uint32(g.Cache.Capacity), uint32(a.heads*a.width), uint32(a.heads*a.vwidth), f16Flag(g.Cache), math.Float32bits(a.scale))
	r.ds = append(r.ds, dispatch{name: "attention", buffers: []*Buffer{a.q, a.k, a.v, a.out}, push: push, groups: [3]uint32{uint32(a.heads), uint32(g.N), 1}})
	r.wrote(a.out)
}

// blocks records copy_blocks: for a < outer, b < inner, width floats
// from src at s0 + a*sa + b*sb to dst at d0 + a*da + b*db.
func (r *recorder) blocks(src, dst *Buffer, outer, inner, width int, s0, sa, sb, d0, da, db int) {
	push := pushU32(uint32(outer), uint32(inner), uint32(width), uint32(s0), uint32(sa), uint32(sb), uint32(d0), uint32(da), uint32(db))
	r.ds = append(r.ds, dispatch{name: "copy_blocks", buffers: []*Buffer{src, dst}, push: push, groups: elementGroups(outer * inner * width)})
	r.wrote(dst)
}

// f16Flag is the kernels' flag for c's element type: 1 for f16, 0 f32.
func f16Flag(c *model.Cache) uint32 { return flag(c.Type() == model.KVF16) }

// wrote forgets quantized forms of b, which a dispatch rewrites.
func (r *recorder) wrote(b *Buffer) {
	if r.in32 == b {
		r.in32 = nil
	}
	if r.inK == b {
		r.inK = nil
	}
}

// product records out = w · in for the batch's rows.
func (r *recorder) product(out *Buffer, w *Matrix, in *Buffer) {
	r.productRows(out, w, in, 0, r.n)
}

// productRows records rows v0 .. v0+count-1 of out = w · the same rows of
// in (all n rows of in quantized, where w's kernel takes them so, once).
func (r *recorder) productRows(out *Buffer, w *Matrix, in *Buffer, v0, count int) {
	bufs := append(r.inputs(w, in, r.n), out)
	r.ds = append(r.ds, dispatch{name: kernelOf[w.Type].name, buffers: bufs, push: pushU32(uint32(w.Rows), uint32(w.Cols), uint32(v0)), groups: workgroups(w.Rows, count)})
	r.wrote(out)
}

// productIDs records out[v] = W_ids[v] · in[v / per] for count vectors
// v (the _id kernels, shape.glsl), a dispatch for each held part of the
// 3-D tensor (each writes the vectors of its experts): rows of a part's
// rows are an expert's; in holds inVectors vectors.
func (r *recorder) productIDs(out *Buffer, w []expertChunk, rows int, in *Buffer, inVectors int, ids *Buffer, count, per int) {
	for _, c := range w {
		bufs := append(r.inputs(c.m, in, inVectors), out, ids)
		push := pushU32(uint32(rows), uint32(c.m.Cols), 0, uint32(per), uint32(c.lo), uint32(c.hi))
		r.ds = append(r.ds, dispatch{name: kernelOf[c.m.Type].name + "_id", buffers: bufs, push: push, groups: workgroups(rows, count)})
	}
	r.wrote(out)
}

// inputs are the weights' and input's buffers of a product through w
// over the first vectors of in, the input quantized first where w's
// kernel takes it so (once: unless the last quantization in that form
// was of another buffer).
func (r *recorder) inputs(w *Matrix, in *Buffer, vectors int) []*Buffer {
	k := kernelOf[w.Type]
	values := vectors * w.Cols
	q := r.quants
	var bufs []*Buffer
	switch k.input {
	case floats:
		bufs = []*Buffer{w.buf, in}
	case quants32:
		if r.in32 != in {
			r.ds = append(r.ds, dispatch{name: "quantize_q32", buffers: []*Buffer{in, q.q32, q.d32}, push: pushU32(uint32(values / 32)), groups: elementGroups(values / 32)})
			r.in32 = in
		}
		bufs = []*Buffer{w.buf, q.q32, q.d32}
	case quantsK:
		if r.inK != in {
			r.ds = append(r.ds, dispatch{name: "quantize_q8k", buffers: []*Buffer{in, q.qK, q.dK, q.sK}, push: pushU32(uint32(values / 256)), groups: elementGroups(values / 256)})
			r.inK = in
		}
		bufs = []*Buffer{w.buf, q.qK, q.dK, q.sK}
	}
	return bufs
}

// layerWorkSizes are the bytes of layerWork's buffers for n rows, in
// the order grow makes them.
func layerWorkSizes(c model.Config, ffn, n int) []int {
	widest := max(c.Embd, c.QDim(), ffn, c.MLA.QLoraRank, c.Heads*c.MLA.VDim) // the products' inputs
	return bufferSizes(4*n*c.Embd, 4*n*max(c.Embd, c.QDim()), 4*n*c.QDim(),
		4*n*c.KVDim(), 4*n*c.KVDim(), 4*n*c.QDim(),
		4*n*ffn, 4*n*ffn,
		n*widest, 4*n*widest/32,
		n*widest, 4*max(1, n*widest/256), 2*n*widest/16,
		4*n*max(2, c.RopeDim))
}

// grow makes the scratch hold n rows of c's layers.
func (w *layerWork) grow(d *Device, c model.Config, ffn, n int) error {
	if n <= w.rows {
		return nil
	}
	w.free()
	if err := w.bufs.make(d, layerWorkSizes(c, ffn, n), &w.x, &w.xb, &w.q, &w.k, &w.v, &w.att, &w.hb, &w.hb2, &w.q32, &w.d32, &w.qK, &w.dK, &w.sK, &w.table); err != nil {
		w.free()
		return err
	}
	w.rows = n
	return nil
}

// rope writes the cosines and sines of the rows' positions (each
// segment's from its cache's Len) into the table, unless it holds them.
func (w *layerWork) rope(m *model.Model, segs []model.Segment, n int) {
	pos := w.spare[:0] // two lists swapped, so that a call allocates nothing
	for _, g := range segs {
		for j := range g.N {
			pos = append(pos, g.Cache.Len+j)
		}
	}
	w.spare = pos
	if slices.Equal(pos, w.positions) {
		return
	}
	half := m.RopeDim / 2
	table := w.table.Float32s()
	cs, sn := resize(&w.cs, half), resize(&w.sn, half)
	for r, p := range pos {
		row := table[2*half*r : 2*half*(r+1)]
		if m.MLA.KVLoraRank == 0 {
			tensor.RoPETable(row, m.RopeDim, p, m.RopeBase, m.RopeScale, m.RopeFactors)
			continue
		}
		m.MLA.Yarn.Angles(cs, sn, p, m.RopeBase) // latent attention's rope part
		for i := range half {
			row[2*i], row[2*i+1] = cs[i], sn[i]
		}
	}
	w.positions, w.spare = pos, w.positions
}

func (w *layerWork) free() {
	w.bufs.free()
	*w = layerWork{}
}

// stackedTensor is a held 3-D tensor (a layer's experts' gate, up or
// down, ffn_*_exps; latent attention's attn_k_b or attn_v_b): its first
// byte's address and length, for finding the expert or head a view is.
type stackedTensor struct {
	base, size uintptr
	m          *Matrix
}

// stackedTensors views the per-expert and per-head matrices of blocks
// [from, to) of m as whole 3-D tensors (each one matrix of all experts'
// or heads' rows), where the shard holds them all and they lie one after
// the other, as a GGUF's 3-D tensors do; a tensor over limit bytes (the
// device's binding range; 0: none) in parts of as many whole experts as
// fit.
func stackedTensors(m *model.Model, from, to int, limit uint64) []tensor.Matrix {
	var out []tensor.Matrix
	add := func(views []tensor.Matrix) {
		if _, ok := stack(views); !ok {
			return
		}
		per := len(views)
		if each := uint64(len(views[0].Data)); limit > 0 && each*uint64(per) > limit {
			per = max(1, int(limit/each))
		}
		for lo := 0; lo < len(views); lo += per {
			t, _ := stack(views[lo:min(lo+per, len(views))])
			out = append(out, t)
		}
	}
	for _, b := range m.Blocks[from:to] {
		if b.MoE != nil && len(b.MoE.Experts) > 0 {
			es := b.MoE.Experts
			for _, pick := range []func(d *model.Dense) tensor.Matrix{
				func(d *model.Dense) tensor.Matrix { return d.Gate },
				func(d *model.Dense) tensor.Matrix { return d.Up },
				func(d *model.Dense) tensor.Matrix { return d.Down },
			} {
				views := make([]tensor.Matrix, len(es))
				for e := range es {
					views[e] = pick(&es[e])
				}
				add(views)
			}
		}
		if b.MLA != nil {
			add(b.MLA.KB)
			add(b.MLA.VB)
		}
	}
	return out
}

// stack is the matrix of all rows of views, where they lie one after the
// other in memory, equal in shape and type.
func stack(views []tensor.Matrix) (tensor.Matrix, bool) {
	if len(views) == 0 || len(views[0].Data) == 0 {
		return tensor.Matrix{}, false
	}
	first := views[0]
	base, size := uintptr(unsafe.Pointer(&first.Data[0])), uintptr(len(first.Data))
	for i, w := range views {
		if len(w.Data) != len(first.Data) || w.Type != first.Type || w.Cols != first.Cols ||
			uintptr(unsafe.Pointer(&w.Data[0])) != base+uintptr(i)*size {
			return tensor.Matrix{}, false
		}
	}
	all := unsafe.Slice(&first.Data[0], len(views)*len(first.Data))
	return tensor.Matrix{Type: first.Type, Rows: len(views) * first.Rows, Cols: first.Cols, Data: all}, true
}

// holdStacks records the 3-D tensors of ts (stackedTensors) that the
// device holds, in address order.
func (o *Offload) holdStacks(ts []tensor.Matrix) {
	o.stacks = o.stacks[:0]
	for _, t := range ts {
		if m := o.matrix(t); m != nil {
			o.stacks = append(o.stacks, stackedTensor{base: uintptr(unsafe.Pointer(&t.Data[0])), size: uintptr(len(t.Data)), m: m})
		}
	}
	slices.SortFunc(o.stacks, func(a, b stackedTensor) int { return cmp.Compare(a.base, b.base) })
}

// expertChunk is a held part of a 3-D tensor: experts (or heads) [lo, hi).
type expertChunk struct {
	m      *Matrix
	lo, hi int
}

// chunksAt are the held parts, in order, of the 3-D tensor of count
// matrices of len(first) bytes each that starts at first (expert 0's
// matrix); nil where the device does not hold all of it.
func (o *Offload) chunksAt(first []byte, count int) []expertChunk {
	var chunks []expertChunk
	if !o.walkChunks(first, count, &chunks) {
		return nil
	}
	return chunks
}

// walkChunks reports whether the device holds all of the 3-D tensor
// chunksAt describes, appending its parts to chunks where not nil.
func (o *Offload) walkChunks(first []byte, count int, chunks *[]expertChunk) bool {
	if len(first) == 0 {
		return false
	}
	base, each := uintptr(unsafe.Pointer(&first[0])), uintptr(len(first))
	for lo := 0; lo < count; {
		i, found := slices.BinarySearchFunc(o.stacks, base, func(e stackedTensor, p uintptr) int { return cmp.Compare(e.base, p) })
		if !found || o.stacks[i].size%each != 0 {
			return false
		}
		hi := lo + int(o.stacks[i].size/each)
		if hi > count {
			return false
		}
		if chunks != nil {
			*chunks = append(*chunks, expertChunk{m: o.stacks[i].m, lo: lo, hi: hi})
		}
		base += o.stacks[i].size
		lo = hi
	}
	return true
}

// stacked is the device's view of w, an expert's or a head's matrix
// inside a held 3-D tensor, or nil: the product then runs on the CPU (also
// where the view's offset is not one the device binds at).
func (o *Offload) stacked(w tensor.Matrix) *Matrix {
	p := uintptr(unsafe.Pointer(&w.Data[0]))
	i, _ := slices.BinarySearchFunc(o.stacks, p, func(e stackedTensor, p uintptr) int { return cmp.Compare(e.base, p+1) })
	if i == 0 {
		return nil
	}
	t := o.stacks[i-1]
	off := p - t.base
	if off+uintptr(len(w.Data)) > t.size || t.m.Type != w.Type || t.m.Cols != w.Cols {
		return nil // not inside it
	}
	rowBytes := uintptr(len(w.Data) / w.Rows)
	if off%rowBytes != 0 || (t.m.buf.off+uint64(off))%max(o.d.offsetAlign, 4) != 0 {
		return nil
	}
	return &Matrix{Type: w.Type, Rows: w.Rows, Cols: w.Cols, buf: t.m.buf.view(uint64(off), uint64(len(w.Data)))}
}

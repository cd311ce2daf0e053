package gpu

import (
	"unsafe"

	"strata/runtime/model"
)

// Latent attention (deepseek2's MLA: DeepSeek-V2/V3, Kimi K2) on the
// device, in one submission with the rest of its layer, in the absorbed
// form the CPU computes (runtime/model/deepseek2.go): the latent and rope
// key of each token normed, rotated and cached (one row per position, the
// cache's only "head"), each query head's nope part absorbed into the
// latent space by its W_UK^T, attention of every head over the shared
// latent rows, and each head's latent output projected by its W_UV. The
// heads' products run as one dispatch each (the matrix kernels' _id form
// over the held attn_k_b or attn_v_b tensor, head h's rows for its
// vectors): the rows are gathered head by head first (copy_blocks), and
// the results put back into each row's layout after.

// maxLatentWidth and maxLatentValue bound the cache row (latent and rope
// key) and the latent that the attention kernel takes.
const (
	maxLatentWidth = 1024
	maxLatentValue = 512
)

// latentLayer is a block's latent attention on the device: its held
// matrices and copied norms. kb and vb are the held attn_k_b and attn_v_b
// tensors, every head's matrix.
type latentLayer struct {
	qa, qb, q, kva  *Matrix // qa and qb with a compressed query, else q
	qaNorm, kvaNorm *Buffer
	kb, vb          []expertChunk // a head's: W_UK^T [KVLoraRank × NopeDim], W_UV [VDim × KVLoraRank]
}

// latentLayer is w on the device, or nil where the device cannot run it:
// a matrix it does not hold, a file of the older attn_kv_b layout (its
// W_UK is used transposed, which no kernel does), a shape the kernels
// lack.
func (o *Offload) latentLayer(c model.Config, w *model.MLA) (*latentLayer, error) {
	a := c.MLA
	if w.KB == nil || len(w.KB) != c.Heads || len(w.VB) != c.Heads ||
		c.RopeDim%2 != 0 || a.KVLoraRank%2 != 0 || // kv_store writes pairs
		a.KVLoraRank+c.RopeDim > maxLatentWidth || a.KVLoraRank > maxLatentValue {
		return nil, nil
	}
	lw := &latentLayer{kva: o.matrix(w.KVA)}
	if w.QA.Rows > 0 {
		lw.qa, lw.qb = o.matrix(w.QA), o.matrix(w.QB)
		if lw.qa == nil || lw.qb == nil {
			return nil, nil
		}
	} else if lw.q = o.matrix(w.Q); lw.q == nil {
		return nil, nil
	}
	if lw.kva == nil {
		return nil, nil
	}
	if lw.kb, lw.vb = o.chunksAt(w.KB[0].Data, c.Heads), o.chunksAt(w.VB[0].Data, c.Heads); lw.kb == nil || lw.vb == nil {
		return nil, nil
	}
	var err error
	if lw.qaNorm, err = o.floats(w.QANorm); err != nil {
		return nil, err
	}
	if lw.kvaNorm, err = o.floats(w.KVANorm); err != nil {
		return nil, err
	}
	return lw, nil
}

// latentWork is the scratch of latent attention, beside layerWork's (x,
// xb, q, the quantized inputs of the other products, the rope table).
type latentWork struct {
	rows                           int
	bufs                           scratch
	qa, kv, qf, lat, vo, hin, hout *Buffer
	quantBufs                              // the per-head products' inputs: Heads × rows vectors
	heads                          *Buffer // [Heads × rows] each gathered row's head, for the _id kernels
	headsOf                        int     // the rows a head the list holds now (0: none)
}

// latentWorkSizes are the bytes of latentWork's buffers for n rows, in the
// order grow makes them.
func latentWorkSizes(c model.Config, n int) []int {
	a, H := c.MLA, c.Heads
	cw := a.KVLoraRank + c.RopeDim
	in := H * n * max(a.NopeDim, a.KVLoraRank) // values of a per-head product's input
	return bufferSizes(4*n*a.QLoraRank, 4*n*cw, 4*n*H*cw, 4*n*H*a.KVLoraRank, 4*n*H*a.VDim,
		4*in, 4*H*n*max(a.KVLoraRank, a.VDim),
		in, 4*in/32, in, 4*max(1, in/256), 2*in/16, 4*H*n)
}

// grow makes the scratch hold n rows of c's layers.
func (w *latentWork) grow(d *Device, c model.Config, n int) error {
	if n <= w.rows {
		return nil
	}
	w.free()
	if err := w.bufs.make(d, latentWorkSizes(c, n), &w.qa, &w.kv, &w.qf, &w.lat, &w.vo, &w.hin, &w.hout, &w.q32, &w.d32, &w.qK, &w.dK, &w.sK, &w.heads); err != nil {
		w.free()
		return err
	}
	w.rows = n
	return nil
}

func (w *latentWork) free() {
	w.bufs.free()
	*w = latentWork{}
}

// recordLatentAttention records x += O · MLA(RMSNorm(x)) for the rows of
// segs, each token's normed latent and rotated rope key stored into its
// segment's cache (caches: each segment's cache buffer and a nil, as
// kvImports gives a cache of keys only).
func (o *Offload) recordLatentAttention(r *recorder, w *wholeLayer, segs []model.Segment, caches []*Buffer) {
	c, work, lw, mw, n := o.m.Config, &o.work, w.mla, &o.latent, r.n
	a := c.MLA
	embd, H, hd, kvl, rd, nope, vd := c.Embd, c.Heads, c.HeadDim, a.KVLoraRank, c.RopeDim, a.NopeDim, a.VDim
	cw := kvl + rd

	r.norm(work.x, w.attnNorm, work.xb, n, embd, c.RMSEps)
	if lw.qa != nil {
		r.product(mw.qa, lw.qa, work.xb)
		r.norm(mw.qa, lw.qaNorm, mw.qa, n, a.QLoraRank, c.RMSEps)
		r.product(work.q, lw.qb, mw.qa)
	} else {
		r.product(work.q, lw.q, work.xb)
	}
	// Each token's cache row: [RMSNorm(latent) ; rot(k_pe)].
	r.product(mw.kv, lw.kva, work.xb)
	r.normStrided(mw.kv, lw.kvaNorm, mw.kv, n, kvl, cw, c.RMSEps)
	r.rope(mw.kv, 1, cw, rd, kvl, false)
	row := 0
	for i, g := range segs {
		r.store(mw.kv, caches[2*i], row, g, 1, cw)
		row += g.N
	}

	// Queries: qf = [W_UK,h^T q_nope,h ; rot(q_pe,h)] per row and head.
	r.blocks(work.q, mw.hin, H, n, nope, 0, hd, H*hd, 0, n*nope, nope) // head-major
	r.perHead(mw, lw.kb, H)
	r.blocks(mw.hout, mw.qf, H, n, kvl, 0, n*kvl, kvl, 0, cw, H*cw)
	r.blocks(work.q, mw.qf, n, H, rd, nope, H*hd, hd, kvl, H*cw, cw)
	r.rope(mw.qf, H, cw, rd, kvl, false)

	// Every head over the latent rows (keys: the whole row; values: the
	// latent), each segment over its own cache.
	row = 0
	for i, g := range segs {
		r.attend(attention{q: mw.qf, k: caches[2*i], v: caches[2*i], out: mw.lat, row0: row, seg: g, heads: H, kvHeads: 1,
			width: cw, vwidth: kvl, scale: a.KQScale})
		row += g.N
	}

	// Values: vo_h = W_UV,h lat_h, then O.
	r.blocks(mw.lat, mw.hin, H, n, kvl, 0, kvl, H*kvl, 0, n*kvl, kvl)
	r.perHead(mw, lw.vb, H)
	r.blocks(mw.hout, mw.vo, H, n, vd, 0, n*vd, vd, 0, vd, H*vd)
	r.product(work.xb, w.o, mw.vo)
	r.add(work.x, work.xb, n*embd, n*embd)
}

// perHead records hout's rows of head h = W_h · hin's rows of head h, for
// the heads' rows gathered head by head in hin (r.n rows a head), hin
// quantized once for all of them: one dispatch of the _id kernel over
// ws, the heads' matrices stacked (a dispatch a held part), each vector's
// head in mw.heads.
func (r *recorder) perHead(mw *latentWork, ws []expertChunk, heads int) {
	if mw.headsOf != r.n {
		ids := unsafe.Slice((*uint32)(unsafe.Pointer(&mw.heads.Bytes()[0])), heads*r.n)
		for v := range ids {
			ids[v] = uint32(v / r.n)
		}
		mw.headsOf = r.n
	}
	hr := recorder{quants: &mw.quantBufs, n: heads * r.n}
	hr.productIDs(mw.hout, ws, ws[0].m.Rows/(ws[0].hi-ws[0].lo), mw.hin, heads*r.n, mw.heads, heads*r.n, 1)
	r.ds = append(r.ds, hr.ds...)
	r.wrote(mw.hout)
}

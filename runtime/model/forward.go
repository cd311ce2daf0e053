package model

import (
	"fmt"
	"math"

	"strata/runtime/tensor"
)

// State is the scratch memory of one forward pass of up to Batch tokens.
// It is allocated once; Forward then allocates nothing.
type State struct {
	m      *Model
	pool   *tensor.Pool
	Batch  int
	X      []float32 // [Batch × Embd] hidden states, the input and output of Forward
	xb     []float32 // [Batch × max(Embd, QDim)] normed input, attention output
	xb2    []float32 // [Batch × Embd]
	q      []float32 // [Batch × QDim]
	k, v   []float32 // [Batch × KVDim]
	hb     []float32 // [Batch × widest FFN] (dense, expert or shared)
	hb2    []float32 // [Batch × widest FFN]
	Logits []float32 // [Vocab], last shard only
	// rope holds each row's RoPE angles (tensor.RoPETable), computed once
	// a step for every layer's queries and keys. [Batch × RopeDim]
	rope []float32

	capacity int          // the longest attention span, in positions
	attn     []attnWorker // one per worker: attention splits its work over them

	// The inputs of the matrix products, quantized once per use for the
	// integer kernels (Q, K and V share one; gate and up share one).
	actEmbd *tensor.Activations // [Batch × Embd]: normed hidden states
	actQ    *tensor.Activations // [Batch × QDim]: attention output
	actFFN  *tensor.Activations // [Batch × FFN]: SwiGLU output (dense layers)

	moe *moeState // nil for dense models

	// one is Forward's batch: a single segment, without an allocation.
	one [1]Segment

	// bytesRead counts the weight bytes the matrix products and embedding
	// lookups have read since the State was made (see BytesRead).
	bytesRead int64

	// acc computes the matrix products it holds (a GPU); nil = none.
	// accErr is its first failure, after which the CPU computes them.
	acc     Accelerator
	layers  LayerAccelerator  // acc, where it runs whole layers too
	experts ExpertAccelerator // acc, where it runs routed experts too
	accErr  error

	// The attention task's parameters, set before each pool.Each so the
	// closure is built once (a fresh closure per call would allocate).
	job       attnJob
	attnFn    func(w, u int)   // unit u with worker w's scratch
	mla       *mlaState        // multi-head latent attention scratch (deepseek2)
	mlaHeadFn func(w, h int)   // head h's products with worker w's scratch
	swigluFn  func(lo, hi int) // SwiGLU over hb[lo:hi], hb2[lo:hi]
}

// NewState allocates scratch for batches of up to batch tokens with
// attention spans of up to capacity positions. pool may be nil (serial).
func (m *Model) NewState(pool *tensor.Pool, batch, capacity int) *State {
	c := m.Config
	width := max(c.FFN, c.ExpertFFN, m.sharedWidth())
	s := &State{
		m: m, pool: pool, Batch: batch, capacity: capacity,
		X:   make([]float32, batch*c.Embd),
		xb:  make([]float32, batch*max(c.Embd, c.QDim())),
		xb2: make([]float32, batch*c.Embd),
		q:   make([]float32, batch*c.QDim()),
		k:   make([]float32, batch*c.KVDim()),
		v:   make([]float32, batch*c.KVDim()),
		hb:  make([]float32, batch*width),
		hb2: make([]float32, batch*width),

		actEmbd: tensor.NewActivations(batch, c.Embd),
		actQ:    tensor.NewActivations(batch, c.QDim()),
		actFFN:  tensor.NewActivations(batch, c.FFN),
	}
	workers := 1
	if pool != nil {
		workers = pool.Threads()
	}
	if c.Experts > 0 {
		s.moe = newMoEState(c, m.sharedWidth(), batch, workers)
	}
	_, kw := m.kvShape()
	s.attn = make([]attnWorker, workers)
	for i := range s.attn {
		s.attn[i] = newAttnWorker(capacity, kw)
	}
	if m.IsLast() {
		s.Logits = make([]float32, m.Vocab)
	}
	s.swigluFn = func(lo, hi int) { tensor.SwiGLU(s.hb[lo:hi], s.hb[lo:hi], s.hb2[lo:hi]) }
	s.attnFn = func(w, u int) { s.attendUnit(&s.attn[w], u) }
	if c.isMLA() {
		s.mla = newMLAState(c, batch, workers)
		s.mlaHeadFn = s.head
	} else if c.RopeDim > 0 {
		s.rope = make([]float32, batch*c.RopeDim)
	}
	return s
}

// InvariantRows is the most rows a ForwardBatch may hold for each row's
// result to be the one it gets alone: the least tensor.InvariantVectors
// over the model's matrices (Q8_0 and Q4_0 allow 8; a float one, such
// as a mixture-of-experts router, 3 on arm64 and no bound on amd64;
// math.MaxInt, no bound, where every matrix is of a type summed in one
// order by every kernel: Q4_K, Q5_K, Q6_K, and floats on amd64).
func (m *Model) InvariantRows() int {
	ws := m.Matrices(0, len(m.Blocks), true)
	if len(ws) == 0 {
		return 1 // no matrices: nothing is known
	}
	rows := math.MaxInt
	for _, w := range ws {
		rows = min(rows, tensor.InvariantVectors(w.Type))
	}
	return rows
}

// Capacity is the longest attention span the State holds, in positions.
func (s *State) Capacity() int { return s.capacity }

// BytesRead is the number of weight bytes the State's forward passes and
// logits have read so far: every matrix product reads its whole matrix,
// and a mixture-of-experts layer only the experts its tokens are routed
// to, so the difference over one decoded token is the active bytes per
// token.
func (s *State) BytesRead() int64 { return s.bytesRead }

// matmul is tensor.MatMulAct on the State's pool, or on its accelerator
// where that holds w, counting the bytes of w.
func (s *State) matmul(out []float32, w tensor.Matrix, a *tensor.Activations) {
	s.bytesRead += int64(len(w.Data))
	if s.acc != nil {
		ok, err := s.acc.MatMul(out, w, a.Vectors(), a.N())
		if err != nil {
			s.dropAccelerator(err)
		} else if ok {
			return
		}
	}
	tensor.MatMulAct(s.pool, out, w, a)
}

// Accelerator computes matrix products on another device
// (strata/runtime/gpu's Offload).
type Accelerator interface {
	// MatMul computes out = w · x for the n vectors of x as
	// tensor.MatMulAct does, within float rounding (each output's sum in
	// an order of its own, whatever n: batch invariance holds), or says
	// false when it does not hold w. After an error the State computes
	// on the CPU.
	MatMul(out []float32, w tensor.Matrix, x []float32, n int) (bool, error)
}

// LayerAccelerator is an Accelerator that also runs whole layers, or
// their attention half: norms, products, RoPE, the keys and values
// stored into each segment's cache, attention, SwiGLU and the residual
// adds, one submission to the device instead of one per product.
type LayerAccelerator interface {
	Accelerator
	// Layer runs block l (an index into Blocks) over the n rows of x, the
	// rows of segs, as State.layer does within float rounding: x is
	// updated in place and the rows' keys and values written at
	// positions Cache.Len.. of each segment's cache (whose Len the State
	// advances). It says how much of the layer it ran: none (the State
	// runs the layer, its products through MatMul), the attention half
	// (x += Attn(RMSNorm(x)); the State runs the feed-forward half), or
	// all of it. After an error x is as it was and the State computes on
	// the CPU.
	Layer(l int, x []float32, segs []Segment) (Ran, error)
}

// Ran is how much of a layer a LayerAccelerator ran.
type Ran int

// How much of a layer ran on the accelerator.
const (
	RanNone Ran = iota
	RanAttention
	RanLayer
)

// Accelerate hands the matrix products a holds, and where it is a
// LayerAccelerator the layers it runs, to a (nil: none).
func (s *State) Accelerate(a Accelerator) {
	s.acc, s.accErr = a, nil
	s.layers, _ = a.(LayerAccelerator)
	s.experts, _ = a.(ExpertAccelerator)
}

// dropAccelerator makes the CPU take over after the accelerator failed,
// for good.
func (s *State) dropAccelerator(err error) {
	s.acc, s.layers, s.experts, s.accErr = nil, nil, nil, err
}

// ExpertAccelerator is an Accelerator that also runs a mixture-of-
// experts layer's routed experts, all of a batch's in one submission.
type ExpertAccelerator interface {
	Accelerator
	// Experts adds to out (rows of Embd) each token's routed experts'
	// outputs on its normed input (the same row of xb), weighted: token
	// i's j-th expert is experts[i*used+j], its weight weights[i*used+j];
	// as the State adds them (in ascending expert id), within float
	// rounding. It says false when it does not hold w's experts; after
	// an error out is as it was.
	Experts(w *MoE, xb, out []float32, experts []int32, weights []float32) (bool, error)
	// HoldsExperts reports whether it holds w's routed experts (where
	// not, the State keeps its own fast paths for the layer).
	HoldsExperts(w *MoE) bool
}

// expertsOnAccelerator reports whether layer w's routed experts go to
// the accelerator: then the State runs them one expert at a time (or
// hands them all to it), not in its one-token and parallel forms.
func (s *State) expertsOnAccelerator(w *MoE) bool {
	return s.experts != nil && s.experts.HoldsExperts(w)
}

// AcceleratorErr is the accelerator's failure, if one made the State go
// back to the CPU.
func (s *State) AcceleratorErr() error { return s.accErr }

// Matrices lists the matrices of blocks [from, to) (indices into Blocks),
// and with head the output head where the shard has it.
func (m *Model) Matrices(from, to int, head bool) []tensor.Matrix {
	return m.matrices(from, to, head, true)
}

// Products is Matrices without the routed experts and MLA's kv_b and
// per-head absorbed matrices, which the pool's workers multiply a token
// or an expert at a time: the matrices an Accelerator computes for the
// State.
func (m *Model) Products(from, to int, head bool) []tensor.Matrix {
	return m.matrices(from, to, head, false)
}

func (m *Model) matrices(from, to int, head, all bool) []tensor.Matrix {
	var out []tensor.Matrix
	use := func(ws ...tensor.Matrix) {
		for _, w := range ws {
			if w.Rows > 0 {
				out = append(out, w)
			}
		}
	}
	dense := func(d Dense) { use(d.Gate, d.Up, d.Down) }
	for _, b := range m.Blocks[from:to] {
		use(b.Q, b.K, b.V, b.O)
		if a := b.MLA; a != nil {
			use(a.QA, a.QB, a.Q, a.KVA)
			if all {
				use(a.KVB) // the pool's workers multiply its rows (KB, VB)
				use(a.KB...)
				use(a.VB...)
			}
		}
		dense(b.Dense)
		if e := b.MoE; e != nil {
			use(e.Router)
			dense(e.Shared)
			for _, d := range e.Experts {
				if !all {
					break
				}
				dense(d)
			}
		}
	}
	if head {
		use(m.Output)
	}
	return out
}

// Embed writes the embeddings of tokens into s.X (first shard only).
func (s *State) Embed(tokens []int) error {
	m := s.m
	if !m.IsFirst() {
		return fmt.Errorf("model: shard [%d,%d) has no embedding", m.First, m.End)
	}
	if len(tokens) > s.Batch {
		return fmt.Errorf("model: %d tokens exceed the batch of %d", len(tokens), s.Batch)
	}
	for i, t := range tokens {
		if t < 0 || t >= m.Vocab {
			return fmt.Errorf("model: token id %d outside the vocabulary of %d", t, m.Vocab)
		}
		m.Embed.EmbedRow(t, s.X[i*m.Embd:(i+1)*m.Embd])
		s.bytesRead += int64(m.Embed.RowBytes())
	}
	return nil
}

// Segment is one sequence's rows in a batched forward pass: N
// consecutive rows of State.X, the tokens at positions Cache.Len.. of its
// own KV cache.
type Segment struct {
	Cache *Cache
	N     int
}

// Forward runs the shard's layers over n hidden states in s.X (row i is
// the token at position c.Len+i) and appends their keys and values to c.
// On return s.X holds the shard's output hidden states.
func (s *State) Forward(c *Cache, n int) error {
	s.one[0] = Segment{Cache: c, N: n}
	return s.ForwardBatch(s.one[:])
}

// ForwardBatch is Forward over several sequences at once: the segments'
// rows follow each other in s.X, every matrix product reads its weights
// once for all of them, and each segment attends over its own cache.
// With at most InvariantRows rows in all, a row's result does not depend
// on the other rows: every product sums it as it would alone
// (tensor.InvariantVectors), and attention reads a row's own positions in
// blocks fixed by position. So one-token steps of that many sequences run
// together give each sequence the tokens it gets alone. (A longer batch,
// such as a prompt chunk, takes the batch kernels, which sum in another
// order for most types: a prompt's logits depend on its chunking by float
// rounding, except where every matrix is Q4_K, Q5_K or Q6_K.)
func (s *State) ForwardBatch(segs []Segment) error {
	n := 0
	for i, g := range segs {
		if g.N < 1 || g.Cache == nil {
			return fmt.Errorf("model: segment %d of %d rows", i, g.N)
		}
		if g.Cache.Len+g.N > g.Cache.Capacity || g.Cache.Len+g.N > s.capacity {
			return fmt.Errorf("model: context full: %d + %d positions exceed %d", g.Cache.Len, g.N, min(g.Cache.Capacity, s.capacity))
		}
		for _, h := range segs[:i] {
			if h.Cache == g.Cache {
				return fmt.Errorf("model: segments %d and earlier share a cache", i)
			}
		}
		n += g.N
	}
	if n < 1 || n > s.Batch {
		return fmt.Errorf("model: batch of %d tokens, the state holds 1..%d", n, s.Batch)
	}
	s.ropeAngles(segs)
	for l := range s.m.Blocks {
		ran := RanNone
		if s.layers != nil {
			var err error
			if ran, err = s.layers.Layer(l, s.X[:n*s.m.Embd], segs); err != nil {
				s.dropAccelerator(err)
				ran = RanNone
			}
		}
		switch ran {
		case RanNone:
			s.layer(l, segs, n)
		case RanAttention:
			s.bytesRead += s.m.Blocks[l].attentionBytes()
			s.feedForwardAdd(l, n)
		case RanLayer:
			b := &s.m.Blocks[l]
			s.bytesRead += b.attentionBytes() + b.denseBytes() + b.routedBytes(n, s.m.ExpertsUsed)
		}
	}
	for _, g := range segs {
		g.Cache.Len += g.N
	}
	return nil
}

// ropeAngles computes the RoPE angles of the rows of segs (s.rope) for
// every layer of the step: a row's angles depend only on its position.
func (s *State) ropeAngles(segs []Segment) {
	if s.rope == nil {
		return
	}
	m, row := s.m, 0
	for _, g := range segs {
		for j := range g.N {
			tensor.RoPETable(s.rope[row*m.RopeDim:][:m.RopeDim], m.RopeDim, g.Cache.Len+j, m.RopeBase, m.RopeScale, m.RopeFactors)
			row++
		}
	}
}

// layer is one transformer block over the n rows of segs:
// x += Attn(RMSNorm(x)); x += FFN(RMSNorm(x)).
func (s *State) layer(l int, segs []Segment, n int) {
	x := s.X[:n*s.m.Embd]
	s.attention(l, segs, n) // into s.xb2
	tensor.Add(x, s.xb2[:len(x)])
	s.feedForwardAdd(l, n)
}

// feedForwardAdd is x += FFN(RMSNorm(x)), the second half of a layer.
func (s *State) feedForwardAdd(l, n int) {
	x := s.X[:n*s.m.Embd]
	s.feedForward(l, n) // into s.xb
	tensor.Add(x, s.xb[:len(x)])
}

// feedForward computes FFN(RMSNorm(x)) of layer l for n tokens into s.xb
// [n × Embd] (the normed input in s.xb2): dense or mixture of experts.
func (s *State) feedForward(l, n int) {
	m, w := s.m, &s.m.Blocks[l]
	embd := m.Embd
	x, xb, out := s.X[:n*embd], s.xb2[:n*embd], s.xb[:n*embd]
	for i := 0; i < n; i++ {
		tensor.RMSNorm(xb[i*embd:(i+1)*embd], x[i*embd:(i+1)*embd], w.FFNNorm, m.RMSEps)
	}
	s.actEmbd.Set(xb, n)
	if w.MoE != nil {
		s.mixture(w.MoE, xb, out, n)
	} else {
		s.swiglu(&w.Dense, s.actEmbd, s.actFFN, out, n)
	}
}

// attention computes Attn(RMSNorm(x)) of layer l for the n rows of segs
// into s.xb2 [n × Embd]: project, rotate, store K/V in each segment's
// cache, attend per segment, project back.
func (s *State) attention(l int, segs []Segment, n int) {
	m, w := s.m, &s.m.Blocks[l]
	if w.MLA != nil {
		s.attentionMLA(l, segs, n)
		return
	}
	embd, qd, kvd := m.Embd, m.QDim(), m.KVDim()
	x, xb, q, k, v := s.X[:n*embd], s.xb[:n*embd], s.q[:n*qd], s.k[:n*kvd], s.v[:n*kvd]
	for i := 0; i < n; i++ {
		tensor.RMSNorm(xb[i*embd:(i+1)*embd], x[i*embd:(i+1)*embd], w.AttnNorm, m.RMSEps)
	}
	s.actEmbd.Set(xb, n)
	s.matmul(q, w.Q, s.actEmbd)
	s.matmul(k, w.K, s.actEmbd)
	s.matmul(v, w.V, s.actEmbd)
	row := 0
	for _, g := range segs {
		c := g.Cache
		for j := range g.N {
			i := row + j
			qi, ki, vi := q[i*qd:(i+1)*qd], k[i*kvd:(i+1)*kvd], v[i*kvd:(i+1)*kvd]
			if w.Bq != nil {
				tensor.Add(qi, w.Bq)
				tensor.Add(ki, w.Bk)
				tensor.Add(vi, w.Bv)
			}
			if w.QNorm != nil {
				for h := 0; h < m.Heads; h++ {
					hq := qi[h*m.HeadDim : (h+1)*m.HeadDim]
					tensor.RMSNorm(hq, hq, w.QNorm, m.RMSEps)
				}
				for h := 0; h < m.KVHeads; h++ {
					hk := ki[h*m.HeadDim : (h+1)*m.HeadDim]
					tensor.RMSNorm(hk, hk, w.KNorm, m.RMSEps)
				}
			}
			pos := c.Len + j
			angles := s.rope[i*m.RopeDim:][:m.RopeDim]
			tensor.RoPERotate(qi, m.Heads, m.HeadDim, m.RopeDim, m.RopeNeox, angles)
			tensor.RoPERotate(ki, m.KVHeads, m.HeadDim, m.RopeDim, m.RopeNeox, angles)
			for h := range m.KVHeads {
				c.put(c.k[l], h, pos, ki[h*m.HeadDim:])
				c.put(c.v[l], h, pos, vi[h*m.HeadDim:])
			}
		}
		c.writes[l]++
		s.job = attnJob{c: c, k: c.k[l], v: c.v[l], n: g.N, pos0: c.Len, groups: m.KVHeads, group: m.Heads / m.KVHeads,
			q: q[row*qd:], qTok: qd, qHead: m.HeadDim, out: s.xb[row*qd:], oTok: qd, oHead: m.HeadDim, vw: m.HeadDim,
			scale: float32(1 / math.Sqrt(float64(m.HeadDim))), capacity: s.capacity}
		s.runAttention()
		row += g.N
	}
	att := s.xb[:n*qd] // attention output, [n × QDim]
	s.actQ.Set(att, n)
	s.matmul(s.xb2[:n*embd], w.O, s.actQ)
}

// swigluSplit is the least number of SwiGLU elements worth splitting
// across the pool's workers (see attnSplitWork).
var swigluSplit = 1 << 13

// swiglu computes out = Down(SiLU(Gate x) * Up x) for the n vectors in
// in (hidden activations act, of the FFN's width), using s.hb and s.hb2.
func (s *State) swiglu(f *Dense, in, act *tensor.Activations, out []float32, n int) {
	width := f.Gate.Rows
	hb, hb2 := s.hb[:n*width], s.hb2[:n*width]
	s.matmul(hb, f.Gate, in)
	s.matmul(hb2, f.Up, in)
	if s.pool == nil || n*width < swigluSplit {
		tensor.SwiGLU(hb, hb, hb2)
	} else {
		s.pool.Run(n*width, s.swigluFn) // an exp per element: worth splitting
	}
	act.Set(hb, n)
	s.matmul(out, f.Down, act)
}

// LogitsRows computes the output logits of hidden rows i..i+n-1 of s.X
// into dst, n × Vocab values row after row (last shard only): the output
// head is read once for up to tensor.InvariantVectors rows, so each row's
// logits are bit for bit the ones LogitsOf gives it. Speculative decoding
// verifies its drafted tokens with it.
func (s *State) LogitsRows(i, n int, dst []float32) error {
	if i < 0 || n < 1 || i+n > s.Batch {
		return fmt.Errorf("model: logits of rows [%d,%d) (batch %d)", i, i+n, s.Batch)
	}
	var buf [LogitsGroup]int // a speculative check's rows: no allocation a step
	rows := buf[:0]
	for j := range n {
		rows = append(rows, i+j)
	}
	return s.LogitsAt(rows, dst)
}

// LogitsGroup is the most sampled rows a batch gathers for one LogitsAt:
// it bounds the caller's scratch (rows × vocabulary floats).
const LogitsGroup = 16

// LogitsAt is LogitsRows for any hidden rows of s.X: the rows each
// session of a batch samples from (its step's last), whose logits one
// read of the output head gives per tensor.InvariantVectors of them, as
// LogitsOf would one by one. Reading
// the head once per session cost a batch of 8 tinyllama steps 8 reads of
// its 37 MB head.
func (s *State) LogitsAt(rows []int, dst []float32) error {
	m := s.m
	if !m.IsLast() {
		return fmt.Errorf("model: shard [%d,%d) has no output head", m.First, m.End)
	}
	n := len(rows)
	if n < 1 || len(dst) < n*m.Vocab {
		return fmt.Errorf("model: logits of %d rows into %d values (vocabulary %d)", n, len(dst), m.Vocab)
	}
	for _, r := range rows {
		if r < 0 || r >= s.Batch {
			return fmt.Errorf("model: logits of row %d (batch %d)", r, s.Batch)
		}
	}
	group := min(n, tensor.InvariantVectors(m.Output.Type), s.Batch)
	for r := 0; r < n; r += group {
		g := min(group, n-r)
		xb := s.xb2[:g*m.Embd]
		for j, row := range rows[r : r+g] {
			tensor.RMSNorm(xb[j*m.Embd:(j+1)*m.Embd], s.X[row*m.Embd:(row+1)*m.Embd], m.OutNorm, m.RMSEps)
		}
		s.actEmbd.Set(xb, g)
		s.matmul(dst[r*m.Vocab:(r+g)*m.Vocab], m.Output, s.actEmbd)
	}
	return nil
}

// LogitsOf computes the output logits of hidden row i of s.X into s.Logits
// (last shard only).
func (s *State) LogitsOf(i int) ([]float32, error) {
	m := s.m
	if !m.IsLast() {
		return nil, fmt.Errorf("model: shard [%d,%d) has no output head", m.First, m.End)
	}
	xb := s.xb2[:m.Embd]
	tensor.RMSNorm(xb, s.X[i*m.Embd:(i+1)*m.Embd], m.OutNorm, m.RMSEps)
	s.actEmbd.Set(xb, 1)
	s.matmul(s.Logits, m.Output, s.actEmbd)
	return s.Logits, nil
}

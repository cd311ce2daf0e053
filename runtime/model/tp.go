package model

import (
	"context"
	"fmt"
	"math"

	"strata/runtime/tensor"
)

// AllReducer adds up a buffer across a tensor-parallel group: on return,
// every member's buf holds the element-wise sum of all members' bufs. The
// sum runs in a fixed order (member 0 + member 1 + ...), the same on every
// member, so every member gets bit-identical sums and keeps an identical
// hidden state. Every member calls AllReduce the same number of times
// with buffers of the same length.
type AllReducer interface {
	AllReduce(ctx context.Context, buf []float32) error
}

// TPCache is one sequence's KV cache for a tensor-parallel member: only
// the member's own KV heads, for the layers of its slice.
type TPCache struct {
	K, V     [][]float32 // [layer-First][pos*kvh*HeadDim + j]
	Capacity int
	Len      int // positions filled; the next token goes at Len
}

// NewCache allocates a KV cache of capacity positions for the slice.
func (m *TPModel) NewCache(capacity int) *TPCache {
	_, kvh := m.localHeads()
	c := &TPCache{Capacity: capacity, K: make([][]float32, len(m.Blocks)), V: make([][]float32, len(m.Blocks))}
	for i := range m.Blocks {
		c.K[i] = make([]float32, capacity*kvh*m.HeadDim)
		c.V[i] = make([]float32, capacity*kvh*m.HeadDim)
	}
	return c
}

// TPState is the scratch memory of one member's forward pass of up to
// Batch tokens, allocated once (as State).
type TPState struct {
	m      *TPModel
	pool   *tensor.Pool
	Batch  int
	X      []float32 // [Batch × Embd] hidden states, identical on every member
	xb     []float32 // [Batch × Embd] normed input
	part   []float32 // [Batch × Embd] this member's partial sum, then the group's
	q, att []float32 // [Batch × hq*HeadDim] queries, attention output
	k, v   []float32 // [Batch × kvh*HeadDim]
	hb     []float32 // [Batch × FFN slice]
	hb2    []float32 // [Batch × FFN slice]
	scores [][]float32
	Logits []float32 // [Vocab], gathered from every member's rows (last stage)

	actEmbd *tensor.Activations // [Batch × Embd]
	actQ    *tensor.Activations // [Batch × hq*HeadDim]
	actFFN  *tensor.Activations // [Batch × FFN slice]
	mixer   *State              // mixture-of-experts layers' scratch (m.mixer's)

	bytesRead int64

	attnLayer, attnN, attnPos int
	attnCache                 *TPCache
	attnFn                    func(lo, hi int)
	swigluFn                  func(lo, hi int)
}

// NewState allocates scratch for batches of up to batch tokens with
// attention spans of up to capacity positions. pool may be nil (serial).
func (m *TPModel) NewState(pool *tensor.Pool, batch, capacity int) *TPState {
	hq, kvh := m.localHeads()
	qd, kvd, f, embd := hq*m.HeadDim, kvh*m.HeadDim, m.Slice.FFN.Len(), m.Embd
	s := &TPState{
		m: m, pool: pool, Batch: batch,
		X:    make([]float32, batch*embd),
		xb:   make([]float32, batch*embd),
		part: make([]float32, batch*embd),
		q:    make([]float32, batch*qd),
		att:  make([]float32, batch*qd),
		k:    make([]float32, batch*kvd),
		v:    make([]float32, batch*kvd),
		hb:   make([]float32, batch*f),
		hb2:  make([]float32, batch*f),

		actEmbd: tensor.NewActivations(batch, embd),
		actQ:    tensor.NewActivations(batch, qd),
		actFFN:  tensor.NewActivations(batch, f),
	}
	workers := 1
	if pool != nil {
		workers = pool.Threads()
	}
	s.scores = make([][]float32, workers)
	for i := range s.scores {
		s.scores[i] = make([]float32, capacity)
	}
	if m.IsLast() {
		s.Logits = make([]float32, m.Vocab)
	}
	if m.mixer != nil {
		s.mixer = m.mixer.NewState(pool, batch, 1)
	}
	s.swigluFn = func(lo, hi int) { tensor.SwiGLU(s.hb[lo:hi], s.hb[lo:hi], s.hb2[lo:hi]) }
	s.attnFn = func(lo, hi int) {
		for w := lo; w < hi; w++ {
			s.attendHeads(w)
		}
	}
	return s
}

// BytesRead is the weight bytes this member's passes have read so far.
func (s *TPState) BytesRead() int64 { return s.bytesRead }

func (s *TPState) matmul(out []float32, w tensor.Matrix, a *tensor.Activations) {
	tensor.MatMulAct(s.pool, out, w, a)
	s.bytesRead += int64(len(w.Data))
}

// Embed writes the embeddings of tokens into s.X (first stage only; every
// member of the group embeds the same tokens).
func (s *TPState) Embed(tokens []int) error {
	m := s.m
	if !m.IsFirst() {
		return fmt.Errorf("model: slice of layers [%d,%d) has no embedding", m.First, m.End)
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

// Forward runs the member's slice of its layers over n hidden states in
// s.X (row i is the token at position c.Len+i), all-reducing through ar
// twice per layer; every member of the group must call it with the same
// s.X and n. On return s.X holds the stage's output hidden states, the
// same on every member.
func (s *TPState) Forward(ctx context.Context, c *TPCache, n int, ar AllReducer) error {
	if n < 1 || n > s.Batch {
		return fmt.Errorf("model: batch of %d tokens, the state holds 1..%d", n, s.Batch)
	}
	if c.Len+n > c.Capacity || c.Len+n > len(s.scores[0]) {
		return fmt.Errorf("model: context full: %d + %d positions exceed %d", c.Len, n, min(c.Capacity, len(s.scores[0])))
	}
	for l := range s.m.Blocks {
		if err := s.layer(ctx, l, c, n, ar); err != nil {
			return err
		}
	}
	c.Len += n
	return nil
}

// layer is one transformer block over n tokens, split across the group:
// x += AllReduce(this member's heads of Attn(RMSNorm(x)));
// x += AllReduce(this member's columns of FFN(RMSNorm(x))).
func (s *TPState) layer(ctx context.Context, l int, c *TPCache, n int, ar AllReducer) error {
	m, w := s.m, &s.m.Blocks[l]
	embd := m.Embd
	x, xb, part := s.X[:n*embd], s.xb[:n*embd], s.part[:n*embd]

	for i := 0; i < n; i++ {
		tensor.RMSNorm(xb[i*embd:(i+1)*embd], x[i*embd:(i+1)*embd], w.AttnNorm, m.RMSEps)
	}
	s.actEmbd.Set(xb, n)
	s.attention(l, c, n, part)
	if err := ar.AllReduce(ctx, part); err != nil {
		return err
	}
	tensor.Add(x, part)

	for i := 0; i < n; i++ {
		tensor.RMSNorm(xb[i*embd:(i+1)*embd], x[i*embd:(i+1)*embd], w.FFNNorm, m.RMSEps)
	}
	s.actEmbd.Set(xb, n)
	if w.MoE != nil {
		s.mixture(w.MoE, n, part)
	} else {
		s.ffn(&w.Dense, n, part)
	}
	if err := ar.AllReduce(ctx, part); err != nil {
		return err
	}
	tensor.Add(x, part)
	return nil
}

// attention writes this member's partial sum of layer l's attention
// output for n tokens (input s.actEmbd) into out [n × Embd]: its heads'
// queries, keys and values, the keys and values stored in c, attention
// over its heads, and its columns of attn_output.
func (s *TPState) attention(l int, c *TPCache, n int, out []float32) {
	m, w := s.m, &s.m.Blocks[l]
	hq, kvh := m.localHeads()
	if kvh == 0 { // more members than head units: this one adds nothing here
		clear(out)
		return
	}
	qd, kvd := hq*m.HeadDim, kvh*m.HeadDim
	q, k, v := s.q[:n*qd], s.k[:n*kvd], s.v[:n*kvd]
	s.matmul(q, w.Q, s.actEmbd)
	s.matmul(k, w.K, s.actEmbd)
	s.matmul(v, w.V, s.actEmbd)
	for i := 0; i < n; i++ {
		qi, ki, vi := q[i*qd:(i+1)*qd], k[i*kvd:(i+1)*kvd], v[i*kvd:(i+1)*kvd]
		if w.Bq != nil {
			tensor.Add(qi, w.Bq)
			tensor.Add(ki, w.Bk)
			tensor.Add(vi, w.Bv)
		}
		if w.QNorm != nil {
			for h := 0; h < hq; h++ {
				hqv := qi[h*m.HeadDim : (h+1)*m.HeadDim]
				tensor.RMSNorm(hqv, hqv, w.QNorm, m.RMSEps)
			}
			for h := 0; h < kvh; h++ {
				hk := ki[h*m.HeadDim : (h+1)*m.HeadDim]
				tensor.RMSNorm(hk, hk, w.KNorm, m.RMSEps)
			}
		}
		pos := c.Len + i
		// RoPE rotates every head alike, so a slice of heads rotates as
		// the same heads of the whole model.
		tensor.RoPEFactors(qi, hq, m.HeadDim, m.RopeDim, pos, m.RopeBase, m.RopeScale, m.RopeNeox, m.RopeFactors)
		tensor.RoPEFactors(ki, kvh, m.HeadDim, m.RopeDim, pos, m.RopeBase, m.RopeScale, m.RopeNeox, m.RopeFactors)
		copy(c.K[l][pos*kvd:(pos+1)*kvd], ki)
		copy(c.V[l][pos*kvd:(pos+1)*kvd], vi)
	}
	s.attnLayer, s.attnN, s.attnPos, s.attnCache = l, n, c.Len, c
	if s.pool == nil {
		s.attnFn(0, len(s.scores))
	} else {
		s.pool.Run(len(s.scores), s.attnFn)
	}
	s.actQ.Set(s.att[:n*qd], n)
	s.matmul(out, w.O, s.actQ)
}

// ffn writes this member's partial sum of the SwiGLU FFN for n tokens
// (input s.actEmbd) into out [n × Embd]: its columns of gate and up, and
// the matching columns of down.
func (s *TPState) ffn(f *Dense, n int, out []float32) {
	width := f.Gate.Rows
	if width == 0 {
		clear(out)
		return
	}
	hb, hb2 := s.hb[:n*width], s.hb2[:n*width]
	s.matmul(hb, f.Gate, s.actEmbd)
	s.matmul(hb2, f.Up, s.actEmbd)
	if s.pool == nil {
		tensor.SwiGLU(hb, hb, hb2)
	} else {
		s.pool.Run(n*width, s.swigluFn)
	}
	s.actFFN.Set(hb, n)
	s.matmul(out, f.Down, s.actFFN)
}

// mixture writes this member's partial sum of a mixture-of-experts FFN
// for n tokens (normed inputs in s.xb) into out [n × Embd]: the whole
// router picks the same experts on every member, and the member runs its
// columns of each.
func (s *TPState) mixture(w *MoE, n int, out []float32) {
	if s.m.Slice.ExpertFFN.Len() == 0 {
		clear(out)
		return
	}
	ms, xb := s.mixer, s.xb[:n*s.m.Embd]
	ms.actEmbd.Set(xb, n)
	before := ms.bytesRead
	ms.mixture(w, xb, out, n)
	s.bytesRead += ms.bytesRead - before
}

// attendHeads computes, for worker w, every (token, local head) pair t
// with t % workers == w: causal softmax attention over the cached keys of
// the member's KV heads, into s.att [n × hq*HeadDim].
func (s *TPState) attendHeads(w int) {
	m := s.m
	c, l, n, pos0 := s.attnCache, s.attnLayer, s.attnN, s.attnPos
	hq, kvh := m.localHeads()
	hd, qd, kvd := m.HeadDim, hq*m.HeadDim, kvh*m.HeadDim
	group := m.Heads / m.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	K, V := c.K[l], c.V[l]
	for t := w; t < n*hq; t += len(s.scores) {
		i, h := t/hq, t%hq
		span := pos0 + i + 1
		q := s.q[i*qd+h*hd : i*qd+(h+1)*hd]
		kvOff := (h / group) * hd
		sc := s.scores[w][:span]
		for p := 0; p < span; p++ {
			sc[p] = tensor.Dot(q, K[p*kvd+kvOff:p*kvd+kvOff+hd]) * scale
		}
		tensor.Softmax(sc)
		out := s.att[i*qd+h*hd : i*qd+(h+1)*hd]
		clear(out)
		for p, a := range sc {
			tensor.Axpy(out, a, V[p*kvd+kvOff:p*kvd+kvOff+hd])
		}
	}
}

// LogitsOf computes the logits of hidden row i of s.X into s.Logits (last
// stage only): each member computes its rows of the output head, and the
// group gathers them through ar (every other member's rows are zero in
// this member's buffer, and adding zeros is exact, so every member gets
// the logits bit for bit as one member computing all rows would).
func (s *TPState) LogitsOf(ctx context.Context, i int, ar AllReducer) ([]float32, error) {
	m := s.m
	if !m.IsLast() {
		return nil, fmt.Errorf("model: slice of layers [%d,%d) has no output head", m.First, m.End)
	}
	xb := s.xb[:m.Embd]
	tensor.RMSNorm(xb, s.X[i*m.Embd:(i+1)*m.Embd], m.OutNorm, m.RMSEps)
	clear(s.Logits)
	if r := m.Slice.Vocab; r.Len() > 0 {
		s.actEmbd.Set(xb, 1)
		s.matmul(s.Logits[r.Lo:r.Hi], m.Output, s.actEmbd)
	}
	if err := ar.AllReduce(ctx, s.Logits); err != nil {
		return nil, err
	}
	return s.Logits, nil
}

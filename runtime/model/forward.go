package model

import (
	"fmt"
	"math"

	"strata/runtime/tensor"
)

// Cache is one sequence's KV cache for the layers of a shard,
// preallocated for Capacity positions. With multi-head latent attention
// (deepseek2) K holds each position's latent and rope key
// ([pos*(KVLoraRank+RopeDim) + j]) and V is nil: keys and values are both
// computed from the latent.
type Cache struct {
	K, V     [][]float32 // [layer-First][pos*KVDim + j]
	Capacity int
	Len      int // positions filled; the next token goes at Len
}

// NewCache allocates a KV cache of capacity positions for m's layers.
func (m *Model) NewCache(capacity int) *Cache {
	c := &Cache{Capacity: capacity, K: make([][]float32, len(m.Blocks)), V: make([][]float32, len(m.Blocks))}
	for i := range m.Blocks {
		if m.isMLA() {
			c.K[i] = make([]float32, capacity*m.mlaCacheDim())
			continue
		}
		c.K[i] = make([]float32, capacity*m.KVDim())
		c.V[i] = make([]float32, capacity*m.KVDim())
	}
	return c
}

// CacheBytes is the memory NewCache(capacity) takes.
func (m *Model) CacheBytes(capacity int) uint64 {
	per := 2 * m.KVDim()
	if m.isMLA() {
		per = m.mlaCacheDim()
	}
	return uint64(capacity) * uint64(per) * 4 * uint64(len(m.Blocks))
}

// Bytes is the memory the cache holds.
func (c *Cache) Bytes() int64 {
	var n int64
	for i := range c.K {
		n += int64(len(c.K[i])+len(c.V[i])) * 4
	}
	return n
}

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
	hb     []float32 // [Batch × FFN]
	hb2    []float32 // [Batch × FFN]
	scores [][]float32
	Logits []float32 // [Vocab], last shard only

	// The inputs of the matrix products, quantized once per use for the
	// integer kernels (Q, K and V share one; gate and up share one).
	actEmbd *tensor.Activations // [Batch × Embd]: normed hidden states
	actQ    *tensor.Activations // [Batch × QDim]: attention output
	actFFN  *tensor.Activations // [Batch × FFN]: SwiGLU output

	// The attention task's parameters, set before each pool.Run so the
	// closure is built once (a fresh closure per call would allocate).
	attnLayer, attnN, attnPos int
	attnCache                 *Cache
	attnFn                    func(lo, hi int)
	mla                       *mlaState        // multi-head latent attention scratch (deepseek2)
	mlaFn                     func(lo, hi int) // attentionMLA over workers [lo, hi)
	swigluFn                  func(lo, hi int) // SwiGLU over hb[lo:hi], hb2[lo:hi]
}

// NewState allocates scratch for batches of up to batch tokens with
// attention spans of up to capacity positions. pool may be nil (serial).
func (m *Model) NewState(pool *tensor.Pool, batch, capacity int) *State {
	c := m.Config
	s := &State{
		m: m, pool: pool, Batch: batch,
		X:   make([]float32, batch*c.Embd),
		xb:  make([]float32, batch*max(c.Embd, c.QDim())),
		xb2: make([]float32, batch*c.Embd),
		q:   make([]float32, batch*c.QDim()),
		k:   make([]float32, batch*c.KVDim()),
		v:   make([]float32, batch*c.KVDim()),
		hb:  make([]float32, batch*c.FFN),
		hb2: make([]float32, batch*c.FFN),

		actEmbd: tensor.NewActivations(batch, c.Embd),
		actQ:    tensor.NewActivations(batch, c.QDim()),
		actFFN:  tensor.NewActivations(batch, c.FFN),
	}
	// One score row per worker: attention splits (token, head) pairs over workers.
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
	s.swigluFn = func(lo, hi int) { tensor.SwiGLU(s.hb[lo:hi], s.hb[lo:hi], s.hb2[lo:hi]) }
	s.attnFn = func(lo, hi int) {
		for w := lo; w < hi; w++ {
			s.attention(w)
		}
	}
	if c.isMLA() {
		s.mla = newMLAState(c, batch)
		s.mlaFn = func(lo, hi int) {
			for w := lo; w < hi; w++ {
				s.attentionMLA(w)
			}
		}
	}
	return s
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
	}
	return nil
}

// Forward runs the shard's layers over n hidden states in s.X (row i is
// the token at position c.Len+i) and appends their keys and values to c.
// On return s.X holds the shard's output hidden states.
func (s *State) Forward(c *Cache, n int) error {
	if n < 1 || n > s.Batch {
		return fmt.Errorf("model: batch of %d tokens, the state holds 1..%d", n, s.Batch)
	}
	if c.Len+n > c.Capacity || c.Len+n > len(s.scores[0]) {
		return fmt.Errorf("model: context full: %d + %d positions exceed %d", c.Len, n, min(c.Capacity, len(s.scores[0])))
	}
	for l := range s.m.Blocks {
		s.layer(l, c, n)
	}
	c.Len += n
	return nil
}

// layer is one transformer block over n tokens at positions c.Len.. :
// x += Attn(RMSNorm(x)); x += FFN(RMSNorm(x)).
func (s *State) layer(l int, c *Cache, n int) {
	m, w, p := s.m, &s.m.Blocks[l], s.pool
	embd := m.Embd
	x := s.X[:n*embd]
	if w.MLA != nil {
		s.attnMLA(l, c, n)
	} else {
		s.attnGQA(l, c, n)
	}

	// Feed-forward: SwiGLU.
	xb := s.xb2[:n*embd]
	for i := 0; i < n; i++ {
		tensor.RMSNorm(xb[i*embd:(i+1)*embd], x[i*embd:(i+1)*embd], w.FFNNorm, m.RMSEps)
	}
	hb, hb2 := s.hb[:n*m.FFN], s.hb2[:n*m.FFN]
	s.actEmbd.Set(xb, n)
	tensor.MatMulAct(p, hb, w.Gate, s.actEmbd)
	tensor.MatMulAct(p, hb2, w.Up, s.actEmbd)
	if p == nil {
		tensor.SwiGLU(hb, hb, hb2)
	} else {
		p.Run(n*m.FFN, s.swigluFn) // an exp per element: worth splitting
	}
	s.actFFN.Set(hb, n)
	tensor.MatMulAct(p, s.xb[:n*embd], w.Down, s.actFFN)
	tensor.Add(x, s.xb[:n*embd])
}

// attnGQA is the attention half of a block with grouped-query attention:
// project, rotate, store K/V, attend, project back; x += O(attention).
func (s *State) attnGQA(l int, c *Cache, n int) {
	m, w, p := s.m, &s.m.Blocks[l], s.pool
	embd, qd, kvd := m.Embd, m.QDim(), m.KVDim()
	x, xb, q, k, v := s.X[:n*embd], s.xb[:n*embd], s.q[:n*qd], s.k[:n*kvd], s.v[:n*kvd]
	for i := 0; i < n; i++ {
		tensor.RMSNorm(xb[i*embd:(i+1)*embd], x[i*embd:(i+1)*embd], w.AttnNorm, m.RMSEps)
	}
	s.actEmbd.Set(xb, n)
	tensor.MatMulAct(p, q, w.Q, s.actEmbd)
	tensor.MatMulAct(p, k, w.K, s.actEmbd)
	tensor.MatMulAct(p, v, w.V, s.actEmbd)
	for i := 0; i < n; i++ {
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
		pos := c.Len + i
		tensor.RoPE(qi, m.Heads, m.HeadDim, m.RopeDim, pos, m.RopeBase, m.RopeScale, m.RopeNeox)
		tensor.RoPE(ki, m.KVHeads, m.HeadDim, m.RopeDim, pos, m.RopeBase, m.RopeScale, m.RopeNeox)
		copy(c.K[l][pos*kvd:(pos+1)*kvd], ki)
		copy(c.V[l][pos*kvd:(pos+1)*kvd], vi)
	}
	s.attnLayer, s.attnN, s.attnPos, s.attnCache = l, n, c.Len, c
	workers := len(s.scores)
	if p == nil {
		s.attnFn(0, workers)
	} else {
		p.Run(workers, s.attnFn)
	}
	att := s.xb[:n*qd] // attention output, [n × QDim]
	s.actQ.Set(att, n)
	tensor.MatMulAct(p, s.xb2[:n*embd], w.O, s.actQ)
	tensor.Add(x, s.xb2[:n*embd])
}

// attention computes, for worker w, every (token, head) pair t with
// t % workers == w: causal softmax attention of the query over the cached
// keys, written into s.xb as [n × QDim].
func (s *State) attention(w int) {
	m := s.m
	c, l, n, pos0 := s.attnCache, s.attnLayer, s.attnN, s.attnPos
	hd, qd, kvd := m.HeadDim, m.QDim(), m.KVDim()
	group := m.Heads / m.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	K, V := c.K[l], c.V[l]
	for t := w; t < n*m.Heads; t += len(s.scores) {
		i, h := t/m.Heads, t%m.Heads
		span := pos0 + i + 1 // positions 0..pos0+i are visible
		q := s.q[i*qd+h*hd : i*qd+(h+1)*hd]
		kvOff := (h / group) * hd
		sc := s.scores[w][:span]
		for p := 0; p < span; p++ {
			sc[p] = tensor.Dot(q, K[p*kvd+kvOff:p*kvd+kvOff+hd]) * scale
		}
		tensor.Softmax(sc)
		out := s.xb[i*qd+h*hd : i*qd+(h+1)*hd]
		clear(out)
		for p, a := range sc {
			tensor.Axpy(out, a, V[p*kvd+kvOff:p*kvd+kvOff+hd])
		}
	}
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
	tensor.MatMulAct(s.pool, s.Logits, m.Output, s.actEmbd)
	return s.Logits, nil
}

package model

import (
	"context"
	"fmt"

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

// TPCache is one sequence's KV cache for a tensor-parallel member: a
// Cache of the member's own KV heads (with multi-head latent attention,
// the latent and rope key every head reads, whole on every member that
// holds heads), for the layers of its slice, in the member's KVType.
type TPCache = Cache

// NewCache allocates a KV cache of capacity positions for the slice, in
// the member's KVType (KVF16 unless SetKVType says otherwise).
func (m *TPModel) NewCache(capacity int) *TPCache { return m.local.NewCache(capacity) }

// SetKVType sets the element type of the caches NewCache makes from now
// on, as Model.SetKVType.
func (m *TPModel) SetKVType(t KVType) error { return m.local.SetKVType(t) }

// KVType is the element type of the caches NewCache makes.
func (m *TPModel) KVType() KVType { return m.local.kvType }

// CacheBytes is the memory NewCache(capacity) takes.
func (m *TPModel) CacheBytes(capacity int) uint64 { return m.local.CacheBytes(capacity) }

// TPState is the scratch memory of one member's forward pass of up to
// Batch tokens, allocated once (as State). The member's slice of a layer
// is a layer of a smaller model (its heads, its FFN columns, its
// experts), so a State of that model computes it, with the same kernels
// as one node; TPState adds the all-reduces between its two halves.
type TPState struct {
	m      *TPModel
	st     *State // the member's local model's forward pass
	Batch  int
	X      []float32 // [Batch × Embd] hidden states, identical on every member
	Logits []float32 // [Vocab], gathered from every member's rows (last stage)

	xb      []float32           // [Embd] the normed row of LogitsOf
	actEmbd *tensor.Activations // [1 × Embd] over xb

	bytesRead int64 // the output head's
}

// NewState allocates scratch for batches of up to batch tokens with
// attention spans of up to capacity positions. pool may be nil (serial).
func (m *TPModel) NewState(pool *tensor.Pool, batch, capacity int) *TPState {
	st := m.local.NewState(pool, batch, capacity)
	return &TPState{
		m: m, st: st, Batch: batch, X: st.X, Logits: st.Logits,
		xb:      make([]float32, m.Embd),
		actEmbd: tensor.NewActivations(1, m.Embd),
	}
}

// BytesRead is the weight bytes this member's passes have read so far.
func (s *TPState) BytesRead() int64 { return s.st.BytesRead() + s.bytesRead }

// Embed writes the embeddings of tokens into s.X (first stage only; every
// member of the group embeds the same tokens).
func (s *TPState) Embed(tokens []int) error {
	if !s.m.IsFirst() {
		return fmt.Errorf("model: slice of layers [%d,%d) has no embedding", s.m.First, s.m.End)
	}
	return s.st.Embed(tokens)
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
	if c.Len+n > c.Capacity || c.Len+n > s.st.capacity {
		return fmt.Errorf("model: context full: %d + %d positions exceed %d", c.Len, n, min(c.Capacity, s.st.capacity))
	}
	s.st.one[0] = Segment{Cache: c, N: n}
	s.st.ropeAngles(s.st.one[:])
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
// x += AllReduce(this member's share of FFN(RMSNorm(x))).
// Each member's partial sums are those of its local model's layer.
func (s *TPState) layer(ctx context.Context, l int, c *TPCache, n int, ar AllReducer) error {
	st, lm := s.st, s.m.local
	x := s.X[:n*s.m.Embd]
	part := st.xb2[:len(x)]
	if lm.KVHeads > 0 {
		st.one[0] = Segment{Cache: c, N: n}
		st.attention(l, st.one[:], n) // into st.xb2
	} else { // more members than head units: this one adds nothing here
		clear(part)
	}
	if err := ar.AllReduce(ctx, part); err != nil {
		return err
	}
	tensor.Add(x, part)

	part = st.xb[:len(x)]
	if w := &lm.Blocks[l]; w.MoE == nil && w.Gate.Rows == 0 {
		clear(part) // no FFN columns here
	} else {
		st.feedForward(l, n) // into st.xb
	}
	if err := ar.AllReduce(ctx, part); err != nil {
		return err
	}
	tensor.Add(x, part)
	return nil
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
	if i < 0 || i >= s.Batch {
		return nil, fmt.Errorf("model: hidden row %d outside the batch of %d", i, s.Batch)
	}
	tensor.RMSNorm(s.xb, s.X[i*m.Embd:(i+1)*m.Embd], m.OutNorm, m.RMSEps)
	clear(s.Logits)
	if r := m.Slice.Vocab; r.Len() > 0 {
		s.actEmbd.Set(s.xb, 1)
		tensor.MatMulAct(s.st.pool, s.Logits[r.Lo:r.Hi], m.Output, s.actEmbd)
		s.bytesRead += int64(len(m.Output.Data))
	}
	if err := ar.AllReduce(ctx, s.Logits); err != nil {
		return nil, err
	}
	return s.Logits, nil
}

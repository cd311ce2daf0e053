package model

import (
	"strata/runtime/tensor"
)

// Attention over the cache, for standard (grouped-query) and multi-head
// latent attention alike: the query heads that share a KV head score the
// same cached keys, so the keys are decoded from the cache a block at a
// time into float32 scratch and every such query (and, in a prompt, every
// token of a small tile) reads them there; then each query's softmax; then
// the values, decoded the same way, summed with those weights. A query's
// result never depends on how the work is split (each of its dots and
// its weighted sum is one kernel chain in position order), so any thread
// count, and any node, gives the same bits.

// attnBlockValues is the float32 scratch one block of decoded rows fills
// (16 KiB): small enough to stay in L1 while the queries read it.
const attnBlockValues = 4096

// attnQueries bounds the (token, head) queries of one unit of work, whose
// score rows are the worker's scratch (512 KiB at 4096 positions): in a
// prompt, the tokens of a tile share each decoded block, so a larger tile
// converts the cache fewer times.
const attnQueries = 32

// attnWorker is one worker's scratch.
type attnWorker struct {
	scores []float32 // [attnQueries × capacity] score rows
	buf    []float32 // a block of decoded rows
}

func newAttnWorker(capacity, width int) attnWorker {
	return attnWorker{scores: make([]float32, attnQueries*capacity), buf: make([]float32, max(attnBlockValues, width))}
}

// attnJob is one layer's attention over a batch, set before pool.Run (so
// the closure is built once). Query (i, h) is q[i*qTok + h*qHead:] (the
// cache's width), its output out[i*oTok + h*oHead:] (vw values: the first
// vw of each value row).
type attnJob struct {
	c        *Cache
	k, v     []byte // the layer's key and value rows (the same with MLA)
	n, pos0  int    // tokens, and the position of the first
	groups   int    // KV heads
	group    int    // query heads per KV head
	sub      int    // query heads per unit of work (≤ group)
	tile     int    // tokens per unit of work
	q        []float32
	qTok     int
	qHead    int
	out      []float32
	oTok     int
	oHead    int
	vw       int
	scale    float32
	capacity int // score row stride
}

// plan splits the job into units of tile tokens × sub query heads of one
// KV head: as many queries per unit as the scratch holds, and at least
// one unit per worker where the batch allows (a decoded token with few KV
// heads splits each head's group of queries instead).
func (j *attnJob) plan(workers int) {
	j.sub = min(j.group, attnQueries)
	for j.sub > 1 && j.units(max(1, attnQueries/j.sub)) < workers {
		j.sub = (j.sub + 1) / 2
	}
	j.tile = max(1, attnQueries/j.sub)
}

func (j *attnJob) units(tile int) int {
	return (j.n + tile - 1) / tile * j.groups * ((j.group + j.sub - 1) / j.sub)
}

// attendUnit computes the causal softmax attention of unit u's queries.
func (s *State) attendUnit(wk *attnWorker, u int) {
	j := &s.job
	c := j.c
	subs := (j.group + j.sub - 1) / j.sub
	tile, rest := u/(j.groups*subs), u%(j.groups*subs)
	g, sg := rest/subs, rest%subs
	i0, i1 := tile*j.tile, min(j.n, (tile+1)*j.tile)
	h0, h1 := g*j.group+sg*j.sub, g*j.group+min(j.group, (sg+1)*j.sub)
	nh := h1 - h0
	score := func(i, h int) []float32 { // positions 0..pos0+i are visible
		return wk.scores[((i-i0)*nh+h-h0)*j.capacity:][:j.pos0+i+1]
	}
	end := j.pos0 + i1
	block := max(1, attnBlockValues/c.width)
	for p0 := 0; p0 < end; p0 += block {
		p1 := min(end, p0+block)
		keys := c.rows(j.k, g, p0, p1, wk.buf)
		for i := max(i0, p0-j.pos0); i < i1; i++ {
			e := min(p1, j.pos0+i+1)
			for h := h0; h < h1; h++ {
				tensor.DotRows(score(i, h)[p0:e], j.q[i*j.qTok+h*j.qHead:][:c.width], keys, c.width)
			}
		}
	}
	for i := i0; i < i1; i++ {
		for h := h0; h < h1; h++ {
			tensor.SoftmaxScaled(score(i, h), j.scale)
			clear(j.out[i*j.oTok+h*j.oHead:][:j.vw])
		}
	}
	out := func(i, h int) []float32 { return j.out[i*j.oTok+h*j.oHead:][:j.vw] }
	for p0 := 0; p0 < end; p0 += block {
		p1 := min(end, p0+block)
		vals := c.rows(j.v, g, p0, p1, wk.buf)
		// Up to four tokens a pass over the values, two heads of the
		// group each: the rows every one of them sees (up to the first
		// one's position) together, then each later token's few more.
		for i := max(i0, p0-j.pos0); i < i1; {
			m := min(4, i1-i)
			e := min(p1, j.pos0+i+1)
			var d0, d1, a0, a1 [4][]float32
			h := h0
			for ; h+1 < h1; h += 2 {
				for t := range m {
					d0[t], d1[t] = out(i+t, h), out(i+t, h+1)
					a0[t], a1[t] = score(i+t, h)[p0:e], score(i+t, h+1)[p0:e]
				}
				tensor.AxpyRowsPairs(d0[:m], d1[:m], a0[:m], a1[:m], vals, c.width)
				for t := 1; t < m; t++ {
					if et := min(p1, j.pos0+i+t+1); et > e {
						tensor.AxpyRowsPair(d0[t], d1[t], score(i+t, h)[e:et], score(i+t, h+1)[e:et], vals[(e-p0)*c.width:], c.width)
					}
				}
			}
			if h < h1 {
				for t := range m {
					tensor.AxpyRows(out(i+t, h), score(i+t, h)[p0:min(p1, j.pos0+i+t+1)], vals, c.width)
				}
			}
			i += m
		}
	}
}

// attnSplitWork is the least attention work (query-key products times
// the head width) worth handing to the pool's workers: below it (a small
// model's decode step) waking them costs more than it saves, and keeps
// them spinning after the step, on cores the next stage or the sampler
// wants (see tensor's splitWork: the same bound, for the same reason).
// Every query's arithmetic is the same either way.
var attnSplitWork = 1 << 18 // variables: the tests split all the work

// work is the job's query-key products times the head width.
func (j *attnJob) work() int {
	return j.n * j.groups * j.group * (j.pos0 + j.n) * j.c.width
}

// runAttention runs the job set in s.job over the workers: each takes the
// next unit nobody has (Pool.Each), with its own scratch. A unit's
// arithmetic does not depend on which worker runs it.
func (s *State) runAttention() {
	s.job.plan(len(s.attn))
	workers := len(s.attn)
	if s.job.work() < attnSplitWork {
		workers = 1
	}
	s.pool.Each(workers, s.job.units(s.job.tile), s.attnFn)
}

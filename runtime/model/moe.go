package model

import (
	"math"

	"strata/runtime/tensor"
)

// moeState is the scratch of the mixture-of-experts layers of a State.
type moeState struct {
	logits []float32 // [Batch × Experts] router output, then expert scores
	sel    []float32 // [Experts] one token's selection scores (biased, masked)
	group  []float32 // [ExpertGroups] one token's group scores
	// The routing of the current batch: token i's j-th expert is
	// experts[i*Used+j] with weight weights[i*Used+j].
	experts []int32
	weights []float32
	// The (token, slot) pairs grouped by expert: expert e's pairs are
	// slots[start[e]:start[e+1]] (counting sort, so an expert's tokens run
	// in one matrix product).
	start []int32             // [Experts+1]
	slots []int32             // [Batch × Used]
	xe    []float32           // [Batch × Embd] the inputs routed to one expert, gathered
	ye    []float32           // [Batch × Embd] that expert's outputs
	actX  *tensor.Activations // [Batch × Embd] over xe
	actH  *tensor.Activations // [Batch × ExpertFFN] an expert's SwiGLU output
	actSh *tensor.Activations // [Batch × SharedExperts*ExpertFFN], nil when none

	// The batch form with an expert per work item (expertsParallel):
	// expert outputs by sorted slot, where each (token, slot) pair sits,
	// one worker's scratch each, and the experts with tokens.
	ys      []float32      // [Batch × Used × Embd], nil for batches of 1
	pos     []int32        // [Batch × Used] slot t's index in slots
	order   []int32        // [Used] one token's slots in ascending expert id
	workers []moeWorker    // one per pool thread
	active  []int32        // the experts with tokens, most tokens first
	w       *MoE           // the layer whose experts run
	xb      []float32      // the batch's normed inputs
	expFn   func(w, a int) // runExpert, bound once
	byRows  bool           // always split each expert's rows over the pool (the reference form; tests)

	one *moeOne // the one-token form (mixOne)
}

// moeWorker is one worker's scratch for running whole experts.
type moeWorker struct {
	xe   []float32           // [Batch × Embd] the expert's tokens, gathered
	hb   []float32           // [Batch × ExpertFFN] gate, then SwiGLU
	hb2  []float32           // [Batch × ExpertFFN] up
	actX *tensor.Activations // over xe
	actH *tensor.Activations // over hb
}

// moeOne is the scratch of mixOne, the MoE FFN of a single token. Its
// FFN units are the token's experts in ascending id, then the shared
// expert if any; unit u's hidden layer is h[off[u]:off[u+1]].
type moeOne struct {
	units  []Dense               // [ExpertsUsed (+1 shared)]
	held   int                   // units [0, held) are this call's experts: the token's, less those another tensor-parallel member holds
	weight []float32             // [ExpertsUsed] the experts' router weights
	off    []int                 // [units+1] hidden offsets
	h, h2  []float32             // hidden layer: gate, then the SwiGLU output; up
	act    []*tensor.Activations // [units] each unit's hidden layer, 1 vector
	ye     []float32             // [Embd] an expert's output rows, before weighting
	x      *tensor.Activations   // the token's normed input
	out    []float32             // [Embd]

	// The work items (Pool.Each): upItems are (unit, hidden rows) blocks,
	// computed by gate and up and SwiGLU; downItems are blocks of output
	// rows, each summing every unit's down rows.
	upItems, downItems []moePart
	upFn, downFn       func(w, i int)
}

// moePart is rows [lo, hi) of unit u.
type moePart struct{ u, lo, hi int }

// moeBlock is the rows of one work item of mixOne: small enough that the
// selected experts of a model like Qwen3-30B-A3B (8 of width 768) make
// many more items than threads, a multiple of 8 (the kernels' row groups,
// and the SwiGLU's vector width: the results do not depend on the split).
const moeBlock = 32

// newMoEState allocates the scratch of c's mixture-of-experts layers,
// whose shared experts are shared columns wide (0: none).
func newMoEState(c Config, shared, batch, workers int) *moeState {
	ms := &moeState{
		logits:  make([]float32, batch*c.Experts),
		sel:     make([]float32, c.Experts),
		group:   make([]float32, max(c.ExpertGroups, 1)),
		experts: make([]int32, batch*c.ExpertsUsed),
		weights: make([]float32, batch*c.ExpertsUsed),
		start:   make([]int32, c.Experts+1),
		slots:   make([]int32, batch*c.ExpertsUsed),
		xe:      make([]float32, batch*c.Embd),
		ye:      make([]float32, batch*c.Embd),
		actX:    tensor.NewActivations(batch, c.Embd),
		actH:    tensor.NewActivations(batch, c.ExpertFFN),
		active:  make([]int32, 0, c.Experts),
	}
	if shared > 0 {
		ms.actSh = tensor.NewActivations(batch, shared)
	}
	ms.one = newMoEOne(c, shared)
	if batch > 1 && workers > 1 {
		ms.ys = make([]float32, batch*c.ExpertsUsed*c.Embd)
		ms.pos = make([]int32, batch*c.ExpertsUsed)
		ms.order = make([]int32, c.ExpertsUsed)
		for range workers {
			ms.workers = append(ms.workers, moeWorker{
				xe:   make([]float32, batch*c.Embd),
				hb:   make([]float32, batch*c.ExpertFFN),
				hb2:  make([]float32, batch*c.ExpertFFN),
				actX: tensor.NewActivations(batch, c.Embd),
				actH: tensor.NewActivations(batch, c.ExpertFFN),
			})
		}
		ms.expFn = func(w, a int) { ms.runExpert(&ms.workers[w], a) }
	}
	return ms
}

func newMoEOne(c Config, shared int) *moeOne {
	o := &moeOne{weight: make([]float32, c.ExpertsUsed), ye: make([]float32, c.Embd), off: []int{0}}
	width := func(u int) int {
		if u < c.ExpertsUsed {
			return c.ExpertFFN
		}
		return shared
	}
	n := c.ExpertsUsed
	if shared > 0 {
		n++
	}
	o.units = make([]Dense, n)
	for u := range n {
		w := width(u)
		o.off = append(o.off, o.off[u]+w)
		o.act = append(o.act, tensor.NewActivations(1, w))
		for lo := 0; lo < w; lo += moeBlock {
			o.upItems = append(o.upItems, moePart{u, lo, min(w, lo+moeBlock)})
		}
	}
	for lo := 0; lo < c.Embd; lo += moeBlock {
		o.downItems = append(o.downItems, moePart{0, lo, min(c.Embd, lo+moeBlock)})
	}
	o.h, o.h2 = make([]float32, o.off[n]), make([]float32, o.off[n])
	o.upFn = func(_, i int) {
		if p := o.upItems[i]; p.u < o.held || p.u >= len(o.weight) {
			o.up(p)
		}
	}
	o.downFn = func(_, i int) { o.down(o.downItems[i]) }
	return o
}

// mixture computes the MoE FFN of the n normed vectors in xb (also set in
// s.actEmbd) into out [n × Embd], as llama.cpp's build_moe_ffn: route
// each token to its experts, run each chosen expert once over all of the
// tokens routed to it, add the weighted outputs, then the shared experts.
// Only the chosen experts' weights are read.
func (s *State) mixture(w *MoE, xb, out []float32, n int) {
	m, ms := s.m, s.moe
	s.matmul(ms.logits[:n*m.Experts], w.Router, s.actEmbd)
	for i := 0; i < n; i++ {
		s.route(w, i)
	}
	if n == 1 && !ms.byRows && !s.expertsOnAccelerator(w) {
		s.mixOne(w, out)
	} else {
		s.mixGrouped(w, xb, out, n)
	}
}

// mixGrouped is mixture for a batch of n routed tokens: each chosen
// expert runs once over all of the tokens routed to it.
func (s *State) mixGrouped(w *MoE, xb, out []float32, n int) {
	m, ms := s.m, s.moe
	embd, used := m.Embd, m.ExpertsUsed
	// Group the (token, slot) pairs by expert.
	clear(ms.start)
	for _, e := range ms.experts[:n*used] {
		ms.start[e+1]++
	}
	for e := 0; e < m.Experts; e++ {
		ms.start[e+1] += ms.start[e]
	}
	for t, e := range ms.experts[:n*used] {
		ms.slots[ms.start[e]] = int32(t)
		if ms.pos != nil {
			ms.pos[t] = ms.start[e]
		}
		ms.start[e]++
	}
	for e := m.Experts; e > 0; e-- { // start[e] now holds the end of e: shift back
		ms.start[e] = ms.start[e-1]
	}
	ms.start[0] = 0

	if w.Shared.Gate.Rows > 0 {
		s.swiglu(&w.Shared, s.actEmbd, ms.actSh, out, n)
	} else {
		clear(out)
	}
	// The experts with tokens, the busiest first, so that the work items
	// of expertsParallel end with small ones (insertion sort: stable, and
	// mostly short moves).
	ms.active = ms.active[:0]
	for e := range m.Experts {
		k := ms.start[e+1] - ms.start[e]
		if k == 0 || !held(w, e) {
			continue
		}
		ms.active = append(ms.active, int32(e))
		j := len(ms.active) - 1
		for ; j > 0 && ms.start[ms.active[j-1]+1]-ms.start[ms.active[j-1]] < k; j-- {
			ms.active[j] = ms.active[j-1]
		}
		ms.active[j] = int32(e)
	}
	// (Experts on an accelerator: all at once there, or one at a time,
	// their products there.)
	if s.expertsOnAccelerator(w) {
		ok, err := s.experts.Experts(w, xb[:n*embd], out[:n*embd], ms.experts[:n*used], ms.weights[:n*used])
		if err != nil {
			s.dropAccelerator(err)
		} else if ok {
			for _, e := range ms.active {
				d := &w.Experts[e]
				s.bytesRead += int64(len(d.Gate.Data) + len(d.Up.Data) + len(d.Down.Data))
			}
			return
		}
	}
	if ms.ys != nil && !ms.byRows && !s.expertsOnAccelerator(w) && len(ms.active) >= 4*len(ms.workers) {
		s.expertsParallel(w, xb, out, n)
		return
	}
	for e := 0; e < m.Experts; e++ {
		slots := ms.slots[ms.start[e]:ms.start[e+1]]
		k := len(slots)
		if k == 0 || !held(w, e) {
			continue
		}
		xe, ye := ms.xe[:k*embd], ms.ye[:k*embd]
		for j, t := range slots {
			i := int(t) / used
			copy(xe[j*embd:(j+1)*embd], xb[i*embd:(i+1)*embd])
		}
		ms.actX.Set(xe, k)
		s.swiglu(&w.Experts[e], ms.actX, ms.actH, ye, k)
		for j, t := range slots {
			i := int(t) / used
			tensor.Axpy(out[i*embd:(i+1)*embd], ms.weights[t], ye[j*embd:(j+1)*embd])
		}
	}
}

// expertsParallel runs the routed experts of a batch of n tokens (grouped
// in ms.slots) one expert per work item, the workers taking the next
// expert as they finish one: with many experts of few tokens each (a
// prompt), the workers meet once per layer rather than at every matrix.
// Each expert's products are serial matrix products, which give what
// the pool-split ones give; its outputs land in ys by sorted slot, and
// each token then adds its experts' in ascending expert id, as the
// grouped form does, so the results are the same bit for bit.
func (s *State) expertsParallel(w *MoE, xb, out []float32, n int) {
	m, ms := s.m, s.moe
	embd, used := m.Embd, m.ExpertsUsed
	ms.w, ms.xb = w, xb
	s.pool.Each(len(ms.workers), len(ms.active), ms.expFn)
	ms.w, ms.xb = nil, nil
	for _, e := range ms.active {
		d := &w.Experts[e]
		s.bytesRead += int64(len(d.Gate.Data) + len(d.Up.Data) + len(d.Down.Data))
	}
	for i := range n {
		// Token i's slots in ascending expert id (insertion sort of a handful).
		order := ms.order
		for j := range used {
			t := int32(i*used + j)
			k := j
			for ; k > 0 && ms.experts[order[k-1]] > ms.experts[t]; k-- {
				order[k] = order[k-1]
			}
			order[k] = t
		}
		o := out[i*embd : (i+1)*embd]
		for _, t := range order {
			if !held(w, int(ms.experts[t])) {
				continue
			}
			p := int(ms.pos[t])
			tensor.Axpy(o, ms.weights[t], ms.ys[p*embd:(p+1)*embd])
		}
	}
}

// runExpert is one item of expertsParallel: active expert a, whole, with
// worker scratch wk.
func (ms *moeState) runExpert(wk *moeWorker, a int) {
	embd, used := ms.w.Experts[0].Gate.Cols, len(ms.order)
	e := ms.active[a]
	d := &ms.w.Experts[e]
	lo, hi := ms.start[e], ms.start[e+1]
	k, width := int(hi-lo), d.Gate.Rows
	xe := wk.xe[:k*embd]
	for j, t := range ms.slots[lo:hi] {
		i := int(t) / used
		copy(xe[j*embd:(j+1)*embd], ms.xb[i*embd:(i+1)*embd])
	}
	wk.actX.Set(xe, k)
	hb, hb2 := wk.hb[:k*width], wk.hb2[:k*width]
	tensor.MatMulAct(nil, hb, d.Gate, wk.actX)
	tensor.MatMulAct(nil, hb2, d.Up, wk.actX)
	tensor.SwiGLU(hb, hb, hb2)
	wk.actH.Set(hb, k)
	tensor.MatMulAct(nil, ms.ys[int(lo)*embd:int(hi)*embd], d.Down, wk.actH)
}

// mixOne is mixture for one token (decoding), routed already. Rather
// than a parallel matrix product per expert matrix, the chosen experts'
// gate and up rows (and the shared expert's) run as one set of work
// items, in one pool run, on the input quantized once; then their down
// rows, each output row summing the experts in ascending id. So few
// threads stay busy with many small experts, and the arithmetic is that
// of the grouped form for one token, bit for bit.
func (s *State) mixOne(w *MoE, out []float32) {
	m, ms, o := s.m, s.moe, s.moe.one
	used := m.ExpertsUsed
	// The experts in ascending id (insertion sort of a handful).
	for j := range used {
		e, wt := ms.experts[j], ms.weights[j]
		k := j
		for ; k > 0 && ms.experts[k-1] > e; k-- {
			ms.experts[k], o.weight[k] = ms.experts[k-1], o.weight[k-1]
		}
		ms.experts[k], o.weight[k] = e, wt
	}
	o.held = 0
	for j, e := range ms.experts[:used] {
		if held(w, int(e)) {
			o.units[o.held], o.weight[o.held] = w.Experts[e], o.weight[j]
			o.held++
		}
	}
	if len(o.units) > used {
		o.units[used] = w.Shared
	}
	for u, d := range o.units {
		if u >= o.held && u < used {
			continue
		}
		s.bytesRead += int64(len(d.Gate.Data) + len(d.Up.Data) + len(d.Down.Data))
		s.actEmbd.Prepare(d.Gate.Type)
		s.actEmbd.Prepare(d.Up.Type)
	}
	o.x, o.out = s.actEmbd, out
	s.pool.Each(s.pool.Threads(), len(o.upItems), o.upFn)
	for u, d := range o.units {
		if u >= o.held && u < used {
			continue
		}
		o.act[u].Set(o.h[o.off[u]:o.off[u+1]], 1)
		o.act[u].Prepare(d.Down.Type)
	}
	s.pool.Each(s.pool.Threads(), len(o.downItems), o.downFn)
	o.x, o.out = nil, nil
}

// held reports whether expert e's weights are here: always on one node;
// under expert parallelism a tensor-parallel member holds some experts
// whole and the others' are zero (their outputs are another member's
// partial sums).
func held(w *MoE, e int) bool { return w.Experts[e].Gate.Rows > 0 }

// up computes rows [p.lo, p.hi) of unit p.u's hidden layer:
// SiLU(Gate x) * Up x.
func (o *moeOne) up(p moePart) {
	d, h := &o.units[p.u], o.off[p.u]
	g, u := o.h[h+p.lo:h+p.hi], o.h2[h+p.lo:h+p.hi]
	tensor.MatMulAct(nil, g, d.Gate.RowRange(p.lo, p.hi), o.x)
	tensor.MatMulAct(nil, u, d.Up.RowRange(p.lo, p.hi), o.x)
	tensor.SwiGLU(g, g, u)
}

// down computes output rows [p.lo, p.hi): the shared expert's down rows
// (or zero), plus each expert's, weighted, in ascending expert id.
func (o *moeOne) down(p moePart) {
	out, ye := o.out[p.lo:p.hi], o.ye[p.lo:p.hi]
	used := len(o.weight)
	if len(o.units) > used {
		tensor.MatMulAct(nil, out, o.units[used].Down.RowRange(p.lo, p.hi), o.act[used])
	} else {
		clear(out)
	}
	for j, wt := range o.weight[:o.held] {
		tensor.MatMulAct(nil, ye, o.units[j].Down.RowRange(p.lo, p.hi), o.act[j])
		tensor.Axpy(out, wt, ye)
	}
}

// route picks token i's experts from its router logits (ms.logits row i)
// into ms.experts and ms.weights.
func (s *State) route(w *MoE, i int) {
	m, ms := s.m, s.moe
	ne, used := m.Experts, m.ExpertsUsed
	probs := ms.logits[i*ne : (i+1)*ne]
	switch m.Gating {
	case GatingSigmoid:
		for e, v := range probs {
			probs[e] = float32(1 / (1 + math.Exp(-float64(v))))
		}
	default:
		tensor.Softmax(probs)
	}
	// The selection scores: the bias steers the choice only.
	sel := ms.sel
	copy(sel, probs)
	if w.Bias != nil {
		tensor.Add(sel, w.Bias)
	}
	if g := m.ExpertGroups; g > 1 {
		// Keep the ExpertGroupsUsed groups whose two best scores sum highest.
		per := ne / g
		for k := 0; k < g; k++ {
			a, b := float32(math.Inf(-1)), float32(math.Inf(-1)) // best, second
			for _, v := range sel[k*per : (k+1)*per] {
				if v > a {
					a, b = v, a
				} else if v > b {
					b = v
				}
			}
			ms.group[k] = a + b
		}
		for k := 0; k < g-m.ExpertGroupsUsed; k++ { // drop the worst groups
			worst := 0
			for j := 1; j < g; j++ {
				if ms.group[j] < ms.group[worst] {
					worst = j
				}
			}
			ms.group[worst] = float32(math.Inf(1)) // dropped: never the worst again
			for e := worst * per; e < (worst+1)*per; e++ {
				sel[e] = float32(math.Inf(-1))
			}
		}
	}
	experts, weights := ms.experts[i*used:(i+1)*used], ms.weights[i*used:(i+1)*used]
	var sum float32
	for j := range experts {
		best := 0
		for e, v := range sel {
			if v > sel[best] {
				best = e
			}
		}
		experts[j], weights[j] = int32(best), probs[best]
		sum += probs[best]
		sel[best] = float32(math.Inf(-1))
	}
	if m.ExpertWeightsNorm {
		sum = max(sum, 6.103515625e-5) // llama.cpp's clamp: the smallest normal F16
		for j := range weights {
			weights[j] /= sum
		}
	}
	if sc := m.ExpertWeightsScale; sc != 0 && sc != 1 {
		for j := range weights {
			weights[j] *= sc
		}
	}
}

package gpu

import (
	"math"
	"slices"
	"unsafe"

	"strata/runtime/model"
)

// A mixture-of-experts layer's routed experts in one submission
// (model.ExpertAccelerator): the router chose on the CPU; the device
// gathers each expert's tokens into one group of rows (a token once per
// expert it went to), runs each chosen expert's gate and up products
// over its group (the matrix kernels' v0: one buffer holds every
// group), SwiGLU over all rows at once, each expert's down product, and
// adds every token's experts' outputs, weighted, in ascending expert id
// as the CPU does.

// moeWork is the scratch of Experts and of the layers routed on the
// device, grown to the most tokens and slots (tokens × experts per
// token) seen.
type moeWork struct {
	tokens, slots        int
	embd, width, experts int
	bufs                 scratch
	x, out               *Buffer // [tokens × Embd] the normed inputs; the sum
	xe, ys               *Buffer // [slots × Embd] gathered inputs; expert outputs
	hb, hb2              *Buffer // [slots × expert width]
	rows                 *Buffer // [slots] the token each gathered row holds; routed on the device: each slot's expert
	slot, weight         *Buffer // [tokens × used] each token's output rows and weights, by expert id
	logits, sel          *Buffer // [tokens × experts] routed on the device: the router's scores, the selection's
	quantBufs
	identity int         // routed on the device: slot holds 0, 1, ... up to this
	host     expertLists // the host-side lists that fill rows, slot and weight
}

// routeOnDevice lets whole mixture-of-experts layers route on the device
// (tests turn it off to run the experts' own submission, Experts).
var routeOnDevice = true

// routedLayer is a mixture-of-experts layer's feed-forward half as the
// device runs it whole: the router (and its bias, nil where none), the
// experts' 3-D tensors and the shared expert's matrices (nil where none).
type routedLayer struct {
	router               *Matrix
	bias                 *Buffer
	gate, up, down       []expertChunk
	shGate, shUp, shDown *Matrix
}

// maxRouted and maxExpertGroups bound what moe_route takes: experts per token,
// expert groups.
const (
	maxRouted       = 32
	maxExpertGroups = 64
)

// routedLayer is w's routing and experts on the device, or nil where the
// device does not hold them all (or routeOnDevice is off): then the
// State routes, and the experts run in their own submission.
func (o *Offload) routedLayer(c model.Config, w *model.MoE) (*routedLayer, error) {
	if !routeOnDevice || len(w.Experts) == 0 || c.ExpertsUsed > maxRouted || c.ExpertGroups > maxExpertGroups ||
		len(w.Experts) != c.Experts || !o.holdsExperts(w) {
		return nil, nil
	}
	first := &w.Experts[0]
	e := &routedLayer{router: o.matrix(w.Router), gate: o.chunksAt(first.Gate.Data, c.Experts),
		up: o.chunksAt(first.Up.Data, c.Experts), down: o.chunksAt(first.Down.Data, c.Experts)}
	if e.router == nil || e.router.Rows != c.Experts {
		return nil, nil
	}
	if sh := &w.Shared; sh.Gate.Rows > 0 {
		e.shGate, e.shUp, e.shDown = o.matrix(sh.Gate), o.matrix(sh.Up), o.matrix(sh.Down)
		if e.shGate == nil || e.shUp == nil || e.shDown == nil {
			return nil, nil
		}
		o.ffn = max(o.ffn, sh.Gate.Rows) // the layer's scratch holds its hidden rows
	}
	var err error
	if e.bias, err = o.floats(w.Bias); err != nil {
		return nil, err
	}
	return e, nil
}

// recordRouted records x += MoE(RMSNorm(x)) of a mixture-of-experts
// layer, all of it on the device: the router's scores, each token's
// experts chosen (moe_route, as State.route), each chosen expert's
// products over its token's row (the _id kernels: a vector per (token,
// expert) pair, the expert's rows picked by the id the routing wrote),
// SwiGLU, the shared expert, and the weighted sum in ascending expert id
// (moe_combine), added to x. Every row's arithmetic is its own: the
// batch does not change it.
func (o *Offload) recordRouted(r *recorder, w *wholeLayer) {
	c, work, mw, e := o.m.Config, &o.work, &o.moe, w.moe
	n, embd, used, width := r.n, c.Embd, c.ExpertsUsed, c.ExpertFFN
	slots := n * used
	r.norm(work.x, w.ffnNorm, work.xb, n, embd, c.RMSEps)
	r.product(mw.logits, e.router, work.xb)
	bias, biased := mw.sel, uint32(0) // (a buffer bound where there is no bias; not read)
	if e.bias != nil {
		bias, biased = e.bias, 1
	}
	push := pushU32(uint32(n), uint32(c.Experts), uint32(used), flag(c.Gating == model.GatingSigmoid), biased,
		uint32(max(c.ExpertGroups, 1)), uint32(c.ExpertGroupsUsed), flag(c.ExpertWeightsNorm), math.Float32bits(c.ExpertWeightsScale))
	r.ds = append(r.ds, dispatch{name: "moe_route", buffers: []*Buffer{mw.logits, mw.sel, bias, mw.rows, mw.weight}, push: push, groups: elementGroups(n)})
	if e.shGate != nil { // the shared expert first: the sum starts from its output, as on the CPU
		r.product(work.hb, e.shGate, work.xb)
		r.product(work.hb2, e.shUp, work.xb)
		r.swiglu(work.hb, work.hb2, n*e.shGate.Rows)
		r.product(mw.out, e.shDown, work.hb)
	} // (else the host cleared mw.out)
	// The experts' products quantize into the experts' scratch, sized
	// for a vector per slot.
	quants := r.quants
	r.quants, r.in32, r.inK = &mw.quantBufs, nil, nil
	r.productIDs(mw.hb, e.gate, width, work.xb, n, mw.rows, slots, used)
	r.productIDs(mw.hb2, e.up, width, work.xb, n, mw.rows, slots, used)
	r.swiglu(mw.hb, mw.hb2, slots*width)
	r.productIDs(mw.ys, e.down, embd, mw.hb, slots, mw.rows, slots, 1)
	r.quants, r.in32, r.inK = quants, nil, nil
	r.ds = append(r.ds, dispatch{name: "moe_combine", buffers: []*Buffer{mw.out, mw.ys, mw.slot, mw.weight}, push: pushU32(uint32(n), uint32(used), uint32(embd)), groups: elementGroups(n * embd)})
	r.add(work.x, mw.out, n*embd, n*embd)
}

// growRouted makes the scratch hold n tokens of c's routed layers, its
// slot list 0, 1, ... (each token's experts' outputs lie in its own
// slots) and, where the layers have no shared expert, its sum zero.
func (w *moeWork) growRouted(d *Device, n int, c model.Config, shared bool) error {
	slots := n * c.ExpertsUsed
	if err := w.grow(d, n, slots, c.Embd, c.ExpertFFN, c.Experts); err != nil {
		return err
	}
	if w.identity < slots {
		ids := unsafe.Slice((*uint32)(unsafe.Pointer(&w.slot.Bytes()[0])), w.slots)
		for i := range ids {
			ids[i] = uint32(i)
		}
		w.identity = w.slots
	}
	if !shared {
		clear(w.out.Float32s()[:n*c.Embd])
	}
	return nil
}

// expertLists is what Experts builds on the host each call, kept so that
// a call allocates nothing.
type expertLists struct {
	start, next, order []int
	rows, at, slot     []uint32
	weight             []float32
	groups             []expertGroup
}

// expertGroup is one chosen expert's matrices and its rows among the
// gathered ones.
type expertGroup struct {
	gate, up, down *Matrix
	lo, n          int
}

// resize makes *s hold n elements (their values undefined), reusing its
// array where it is large enough.
func resize[T any](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
	}
	*s = (*s)[:n]
	return *s
}

// Experts implements model.ExpertAccelerator.
func (o *Offload) Experts(w *model.MoE, xb, out []float32, experts []int32, weights []float32) (bool, error) {
	if len(w.Experts) == 0 || len(experts) == 0 || len(experts) != len(weights) {
		return false, nil
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	first := &w.Experts[0]
	if !o.holdsExperts(w) {
		return false, nil
	}
	embd, width := first.Gate.Cols, first.Gate.Rows
	n := len(xb) / embd
	if n == 0 || len(xb) != n*embd || len(out) != len(xb) || len(experts)%n != 0 {
		return false, nil
	}
	used, slots := len(experts)/n, len(experts)

	// Group the slots by expert (counting sort: ascending id, and within
	// an expert ascending token). The host-side lists are kept across
	// calls; o.mu is only read-locked, so they are built under layerMu.
	o.layerMu.Lock()
	defer o.layerMu.Unlock()
	h := &o.moe.host
	start := resize(&h.start, len(w.Experts)+1)
	clear(start)
	for _, e := range experts {
		if e < 0 || int(e) >= len(w.Experts) {
			return false, nil
		}
		start[e+1]++
	}
	for e := range w.Experts {
		start[e+1] += start[e]
	}
	next := resize(&h.next, len(start))
	copy(next, start)
	rows := resize(&h.rows, slots) // gathered row → token
	at := resize(&h.at, slots)     // slot → gathered row
	for t, e := range experts {
		rows[next[e]], at[t] = uint32(t/used), uint32(next[e])
		next[e]++
	}
	groups := h.groups[:0]
	defer func() { clear(groups); h.groups = groups[:0] }() // keep no matrix alive
	for e := range w.Experts {
		if k := start[e+1] - start[e]; k > 0 {
			d := &w.Experts[e]
			g := expertGroup{gate: o.stacked(d.Gate), up: o.stacked(d.Up), down: o.stacked(d.Down), lo: start[e], n: k}
			if g.gate == nil || g.up == nil || g.down == nil {
				return false, nil // an expert the device cannot bind
			}
			groups = append(groups, g)
		}
	}
	if 3*len(groups)+8 > maxDescriptorSets {
		return false, nil
	}
	// Each token's slots in ascending expert id, as the CPU adds them.
	slot, weight, order := resize(&h.slot, slots), resize(&h.weight, slots), resize(&h.order, used)
	for i := range n {
		for j := range order {
			order[j] = i*used + j
		}
		slices.SortStableFunc(order, func(a, b int) int { return int(experts[a]) - int(experts[b]) })
		for j, t := range order {
			slot[i*used+j], weight[i*used+j] = at[t], weights[t]
		}
	}

	work := &o.moe
	if err := work.grow(o.d, n, slots, embd, width, len(w.Experts)); err != nil {
		return false, err
	}
	copy(work.x.Float32s(), xb)
	copy(work.out.Float32s(), out)
	copy(unsafe.Slice((*uint32)(unsafe.Pointer(&work.rows.Bytes()[0])), slots), rows)
	copy(unsafe.Slice((*uint32)(unsafe.Pointer(&work.slot.Bytes()[0])), slots), slot)
	work.identity = 0 // (a layer routed on the device writes its list again)
	copy(work.weight.Float32s(), weight)

	r := recorder{quants: &work.quantBufs, n: slots}
	r.ds = append(r.ds, dispatch{name: "gather_rows", buffers: []*Buffer{work.x, work.rows, work.xe}, push: pushU32(uint32(slots), uint32(embd)), groups: elementGroups(slots * embd)})
	for _, g := range groups {
		r.productRows(work.hb, g.gate, work.xe, g.lo, g.n)
		r.productRows(work.hb2, g.up, work.xe, g.lo, g.n)
	}
	r.swiglu(work.hb, work.hb2, slots*width)
	for _, g := range groups {
		r.productRows(work.ys, g.down, work.hb, g.lo, g.n)
	}
	r.ds = append(r.ds, dispatch{name: "moe_combine", buffers: []*Buffer{work.out, work.ys, work.slot, work.weight}, push: pushU32(uint32(n), uint32(used), uint32(embd)), groups: elementGroups(n * embd)})
	o.calls.Add(1)
	if err := o.d.run(r.ds...); err != nil {
		return false, err
	}
	o.expertRuns.Add(1)
	copy(out, work.out.Float32s()[:len(out)])
	return true, nil
}

// moeWorkSizes are the bytes of moeWork's buffers, in the order grow
// makes them.
func moeWorkSizes(tokens, slots, embd, width, experts int) []int {
	widest := max(embd, width)
	return bufferSizes(4*tokens*embd, 4*tokens*embd, 4*slots*embd, 4*slots*embd,
		4*slots*width, 4*slots*width,
		4*slots, 4*slots, 4*slots,
		4*tokens*experts, 4*tokens*experts,
		slots*widest, 4*slots*widest/32,
		slots*widest, 4*slots*widest/256, 2*slots*widest/16)
}

// grow makes the scratch hold tokens rows and slots gathered rows of an
// expert width wide, and tokens rows of scores over experts.
func (w *moeWork) grow(d *Device, tokens, slots, embd, width, experts int) error {
	if tokens <= w.tokens && slots <= w.slots && embd == w.embd && width == w.width && experts <= w.experts {
		return nil
	}
	tokens, slots, experts = max(tokens, w.tokens), max(slots, w.slots), max(experts, w.experts)
	w.free()
	if err := w.bufs.make(d, moeWorkSizes(tokens, slots, embd, width, experts), &w.x, &w.out, &w.xe, &w.ys, &w.hb, &w.hb2, &w.rows, &w.slot, &w.weight, &w.logits, &w.sel, &w.q32, &w.d32, &w.qK, &w.dK, &w.sK); err != nil {
		w.free()
		return err
	}
	w.tokens, w.slots, w.embd, w.width, w.experts = tokens, slots, embd, width, experts
	return nil
}

func (w *moeWork) free() {
	w.bufs.free()
	*w = moeWork{host: w.host}
}

package gpu

import (
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

// moeWork is the scratch of Experts, grown to the most tokens and slots
// (tokens × experts per token) seen.
type moeWork struct {
	tokens, slots int
	embd, width   int
	bufs          scratch
	x, out        *Buffer // [tokens × Embd] the normed inputs; the sum
	xe, ys        *Buffer // [slots × Embd] gathered inputs; expert outputs
	hb, hb2       *Buffer // [slots × expert width]
	rows          *Buffer // [slots] the token each gathered row holds
	slot, weight  *Buffer // [tokens × used] each token's output rows and weights, by expert id
	quantBufs
	host expertLists // the host-side lists that fill rows, slot and weight
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
	if err := work.grow(o.d, n, slots, embd, width); err != nil {
		return false, err
	}
	copy(work.x.Float32s(), xb)
	copy(work.out.Float32s(), out)
	copy(unsafe.Slice((*uint32)(unsafe.Pointer(&work.rows.Bytes()[0])), slots), rows)
	copy(unsafe.Slice((*uint32)(unsafe.Pointer(&work.slot.Bytes()[0])), slots), slot)
	copy(work.weight.Float32s(), weight)

	r := recorder{quants: &work.quantBufs, n: slots}
	r.ds = append(r.ds, dispatch{name: "gather_rows", buffers: []*Buffer{work.x, work.rows, work.xe}, push: pushU32(uint32(slots), uint32(embd)), groups: elementGroups(slots * embd)})
	for _, g := range groups {
		r.productRows(work.hb, g.gate, work.xe, g.lo, g.n)
		r.productRows(work.hb2, g.up, work.xe, g.lo, g.n)
	}
	r.ds = append(r.ds, dispatch{name: "swiglu", buffers: []*Buffer{work.hb, work.hb2, work.hb}, push: pushU32(uint32(slots * width)), groups: elementGroups(slots * width)})
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

// stackAt is the held expert tensor that starts at data (expert 0's
// matrix) and holds experts such matrices, or nil.
func (o *Offload) stackAt(data []byte, experts int) *Matrix {
	if len(data) == 0 {
		return nil
	}
	base := uintptr(unsafe.Pointer(&data[0]))
	for _, t := range o.stacks {
		if t.base == base && t.size == uintptr(experts*len(data)) {
			return t.m
		}
	}
	return nil
}

// moeWorkSizes are the bytes of moeWork's buffers, in the order grow
// makes them.
func moeWorkSizes(tokens, slots, embd, width int) []int {
	widest := max(embd, width)
	return bufferSizes(4*tokens*embd, 4*tokens*embd, 4*slots*embd, 4*slots*embd,
		4*slots*width, 4*slots*width,
		4*slots, 4*slots, 4*slots,
		slots*widest, 4*slots*widest/32,
		slots*widest, 4*slots*widest/256, 2*slots*widest/16)
}

// grow makes the scratch hold tokens rows and slots gathered rows of an
// expert width wide.
func (w *moeWork) grow(d *Device, tokens, slots, embd, width int) error {
	if tokens <= w.tokens && slots <= w.slots && embd == w.embd && width == w.width {
		return nil
	}
	w.free()
	if err := w.bufs.make(d, moeWorkSizes(tokens, slots, embd, width), &w.x, &w.out, &w.xe, &w.ys, &w.hb, &w.hb2, &w.rows, &w.slot, &w.weight, &w.q32, &w.d32, &w.qK, &w.dK, &w.sK); err != nil {
		w.free()
		return err
	}
	w.tokens, w.slots, w.embd, w.width = tokens, slots, embd, width
	return nil
}

func (w *moeWork) free() {
	w.bufs.free()
	*w = moeWork{host: w.host}
}

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
}

func newMoEState(c Config, batch int) *moeState {
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
	}
	if c.SharedExperts > 0 {
		ms.actSh = tensor.NewActivations(batch, c.SharedExperts*c.ExpertFFN)
	}
	return ms
}

// mixture computes the MoE FFN of the n normed vectors in xb (also set in
// s.actEmbd) into out [n × Embd], as llama.cpp's build_moe_ffn: route
// each token to its experts, run each chosen expert once over all of the
// tokens routed to it, add the weighted outputs, then the shared experts.
// Only the chosen experts' weights are read.
func (s *State) mixture(w *MoE, xb, out []float32, n int) {
	m, ms := s.m, s.moe
	embd, used := m.Embd, m.ExpertsUsed
	s.matmul(ms.logits[:n*m.Experts], w.Router, s.actEmbd)
	for i := 0; i < n; i++ {
		s.route(w, i)
	}
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
	for e := 0; e < m.Experts; e++ {
		slots := ms.slots[ms.start[e]:ms.start[e+1]]
		k := len(slots)
		if k == 0 {
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

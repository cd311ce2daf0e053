package model

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// Tensor parallelism splits every layer of a stage across the members of
// a group instead of giving each member whole layers. A member holds:
//
//   - whole KV heads [KVHeads.Lo, KVHeads.Hi) with their query heads: its
//     rows of attn_q, attn_k, attn_v (column-parallel: the output
//     dimension is split) and the matching columns of attn_output
//     (row-parallel: the input dimension is split);
//   - FFN columns [FFN.Lo, FFN.Hi): those rows of ffn_gate and ffn_up, and
//     those columns of ffn_down;
//   - with multi-head latent attention (deepseek2), heads
//     [KVHeads.Lo, KVHeads.Hi) (every head reads the same latent, so the
//     unit is the query head): their rows of attn_q_b (or attn_q), their
//     per-head up-projections (attn_k_b and attn_v_b, or their rows of
//     attn_kv_b) and their columns of attn_output; the latent path
//     (attn_q_a, attn_kv_a_mqa and their norms) is small and whole on
//     every member, which caches the latent of every position;
//   - in a mixture-of-experts layer, either columns [ExpertFFN.Lo,
//     ExpertFFN.Hi) of every expert (each expert split like an FFN), or,
//     with ExpertParallel, experts [Experts.Lo, Experts.Hi) whole; in both
//     the matching share ExpertFFN of the shared experts' columns. The
//     router is whole on every member, so every member routes each token
//     to the same experts, and runs those of them it holds;
//   - output rows [Vocab.Lo, Vocab.Hi) of the output head.
//
// attn_output and ffn_down then produce partial sums that the group adds
// up (two all-reduces per layer); the logits slices are gathered the same
// way. Boundaries in a row-parallel matrix's input dimension must fall on
// its type's block boundaries (32 elements for Q8_0, 256 for the
// K-quants), so slices are counted in units (TPUnits) and may be uneven:
// any member count works, and a member may hold no heads at all when
// there are more members than head units.
//
// Splitting each expert's columns reads 1/N of every routed expert on
// each of N members; expert parallelism reads whole experts, as many as
// routing sends to each member, so per token the slowest member reads the
// most routed to any member (ExpertsReadPerToken gives its expectation)
// but runs fewer, larger matrix products. Which one pays is the cost
// model's choice (TPOptions).

// Range is the half-open interval [Lo, Hi).
type Range struct{ Lo, Hi int }

// Len is Hi - Lo.
func (r Range) Len() int { return r.Hi - r.Lo }

func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Lo, r.Hi) }

// TPSlice is one tensor-parallel member's share of every layer of its
// stage (see the comment above).
type TPSlice struct {
	KVHeads   Range // KV heads; query heads [Lo*group, Hi*group) (latent attention: heads)
	FFN       Range // FFN columns of dense layers
	ExpertFFN Range // columns of each expert (of the shared experts only, with ExpertParallel)
	Vocab     Range // output head rows (last stage)

	// ExpertParallel: the member holds the routed experts Experts whole
	// (and none of the others), rather than columns of every one.
	ExpertParallel bool
	Experts        Range
}

func (s TPSlice) String() string {
	if s.ExpertParallel {
		return fmt.Sprintf("kv heads %v, ffn %v, experts %v, shared expert ffn %v, vocab %v", s.KVHeads, s.FFN, s.Experts, s.ExpertFFN, s.Vocab)
	}
	return fmt.Sprintf("kv heads %v, ffn %v, expert ffn %v, vocab %v", s.KVHeads, s.FFN, s.ExpertFFN, s.Vocab)
}

// tpHeads is how many heads tensor parallelism splits whole, and the
// attn_output columns of each: KV heads with their query heads, or with
// latent attention every head (of VDim values).
func (c Config) tpHeads() (heads, cols int) {
	if c.isMLA() {
		return c.Heads, c.MLA.VDim
	}
	return c.KVHeads, c.Heads / max(c.KVHeads, 1) * c.HeadDim
}

// TPUnits is the granularity of tensor-parallel slices: how many KV heads
// and FFN columns move together, so that every row-parallel slice is a
// whole number of its matrix's blocks.
type TPUnits struct {
	KVHeads int // KV heads per unit (with their query heads)
	FFN     int // FFN (and expert FFN) columns per unit
}

// TPUnitsFor returns the units for a model whose attn_output matrices are
// of type out and ffn_down (and ffn_down_exps) matrices of type down: the
// fewest KV heads whose query columns (heads/KV heads × HeadDim each) are
// whole blocks of out, and one block of down.
func TPUnitsFor(c Config, out, down tensor.Type) (TPUnits, error) {
	if err := c.tpSupported(); err != nil {
		return TPUnits{}, err
	}
	bo, bd := out.BlockSize(), down.BlockSize()
	if bo <= 0 || bd <= 0 {
		return TPUnits{}, fmt.Errorf("model: tensor parallelism: unknown weight types %v, %v", out, down)
	}
	heads, cols := c.tpHeads() // attn_output columns per head unit
	u := 1
	for (u*cols)%bo != 0 {
		u++
	}
	if heads%u != 0 {
		return TPUnits{}, fmt.Errorf("model: tensor parallelism: %d heads of %d attn_output columns do not split into whole %v blocks of %d", heads, cols, out, bo)
	}
	if c.hasDenseFFN() && c.FFN%bd != 0 {
		return TPUnits{}, fmt.Errorf("model: tensor parallelism: FFN width %d is not whole %v blocks of %d", c.FFN, down, bd)
	}
	if c.Experts > 0 && c.ExpertFFN%bd != 0 {
		return TPUnits{}, fmt.Errorf("model: tensor parallelism: expert FFN width %d is not whole %v blocks of %d", c.ExpertFFN, down, bd)
	}
	return TPUnits{KVHeads: u, FFN: bd}, nil
}

// TPUnitsOf reads the units from the types of f's layers [first, end)
// (the coarsest block size any of them uses).
func TPUnitsOf(f *gguf.File, c Config, first, end int) (TPUnits, error) {
	out, dt := tensor.F32, tensor.F32
	for i := first; i < end; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		down := p + "ffn_down.weight"
		if c.IsMoE(i) {
			down = p + "ffn_down_exps.weight"
		}
		o, ok1 := f.Tensor(p + "attn_output.weight")
		d, ok2 := f.Tensor(down)
		if !ok1 || !ok2 {
			return TPUnits{}, fmt.Errorf("model: tensor parallelism: layer %d has no attn_output or %s", i, down)
		}
		if o.Type.BlockSize() > out.BlockSize() {
			out = o.Type
		}
		if d.Type.BlockSize() > dt.BlockSize() {
			dt = d.Type
		}
		if sh, ok := f.Tensor(p + "ffn_down_shexp.weight"); ok && sh.Type.BlockSize() > dt.BlockSize() {
			dt = sh.Type
		}
	}
	return TPUnitsFor(c, out, dt)
}

// tpSupported says which models the sliced forward pass runs.
func (c Config) tpSupported() error {
	switch {
	case c.isMLA():
		if c.Heads <= 0 || c.MLA.VDim <= 0 || c.hasDenseFFN() && c.FFN <= 0 || c.Experts > 0 && c.ExpertFFN <= 0 {
			return fmt.Errorf("model: tensor parallelism: %d latent-attention heads of value width %d, FFN %d, expert FFN %d is not a valid shape", c.Heads, c.MLA.VDim, c.FFN, c.ExpertFFN)
		}
	case c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 || c.HeadDim <= 0 || c.hasDenseFFN() && c.FFN <= 0 || c.Experts > 0 && c.ExpertFFN <= 0:
		return fmt.Errorf("model: tensor parallelism: %d heads over %d KV heads of %d, FFN %d, expert FFN %d is not a valid shape", c.Heads, c.KVHeads, c.HeadDim, c.FFN, c.ExpertFFN)
	}
	return nil
}

// hasDenseFFN reports whether any layer has a dense FFN.
func (c Config) hasDenseFFN() bool { return c.Experts == 0 || c.DenseLayers > 0 }

// PlanTP splits c's layers (and an output head of vocab rows) across
// len(weights) members in proportion to their weights (compute rates as
// integers, so every node computes the same split): each member's share of
// KV-head units, FFN units and vocabulary rows is its weight's share,
// rounded by largest remainder (ties to the earlier member). A member may
// get no KV heads when the group is larger than the number of head units;
// it then only adds the FFN's partial sums.
func PlanTP(c Config, vocab int, u TPUnits, weights []uint64) ([]TPSlice, error) {
	return PlanTPWith(c, vocab, u, weights, TPOptions{})
}

// TPOptions are the choices of a tensor-parallel split that the cost
// model makes. The zero value splits every expert by columns.
type TPOptions struct {
	// ExpertParallel gives each member whole routed experts, in
	// proportion to its weight (uneven counts allowed), instead of
	// columns of every expert; the shared experts are split by columns
	// either way.
	ExpertParallel bool
}

// PlanTPWith is PlanTP with options.
func PlanTPWith(c Config, vocab int, u TPUnits, weights []uint64, o TPOptions) ([]TPSlice, error) {
	if err := c.tpSupported(); err != nil {
		return nil, err
	}
	if len(weights) == 0 {
		return nil, fmt.Errorf("model: tensor parallelism over no members")
	}
	nh, _ := c.tpHeads()
	if u.KVHeads <= 0 || u.FFN <= 0 || nh%u.KVHeads != 0 || c.hasDenseFFN() && c.FFN%u.FFN != 0 || c.ExpertFFN%u.FFN != 0 {
		return nil, fmt.Errorf("model: tensor parallelism: units of %d heads and %d FFN columns do not divide %d heads, FFN %d and expert FFN %d", u.KVHeads, u.FFN, nh, c.FFN, c.ExpertFFN)
	}
	if o.ExpertParallel && c.Experts == 0 {
		return nil, fmt.Errorf("model: expert parallelism of a model without experts")
	}
	var sum uint64
	for _, w := range weights {
		if w == 0 || w > 1<<40 {
			return nil, fmt.Errorf("model: tensor parallelism: member weight %d is not in 1..2^40", w)
		}
		sum += w
	}
	heads := apportion(nh/u.KVHeads, weights, sum)
	ffn := make([]int, len(weights))
	if c.hasDenseFFN() {
		ffn = apportion(c.FFN/u.FFN, weights, sum)
	}
	exp := apportion(c.ExpertFFN/u.FFN, weights, sum)
	rows := apportion(vocab, weights, sum)
	whole := make([]int, len(weights))
	if o.ExpertParallel {
		whole = apportion(c.Experts, weights, sum)
	}
	out := make([]TPSlice, len(weights))
	var h, f, e, v, x int
	for i := range out {
		out[i] = TPSlice{
			KVHeads:   Range{h, h + heads[i]*u.KVHeads},
			FFN:       Range{f, f + ffn[i]*u.FFN},
			ExpertFFN: Range{e, e + exp[i]*u.FFN},
			Vocab:     Range{v, v + rows[i]},
		}
		if o.ExpertParallel {
			out[i].ExpertParallel, out[i].Experts = true, Range{x, x + whole[i]}
		}
		h, f, e, v, x = out[i].KVHeads.Hi, out[i].FFN.Hi, out[i].ExpertFFN.Hi, out[i].Vocab.Hi, x+whole[i]
	}
	return out, nil
}

// TPShares is how many of n units PlanTP gives each member of weights
// (KV-head units, FFN units, whole experts): a cost model that predicts a
// split calls it, so that what it predicts is what is loaded.
func TPShares(n int, weights []uint64) []int {
	var sum uint64
	for _, w := range weights {
		sum += w
	}
	if sum == 0 {
		return make([]int, len(weights))
	}
	return apportion(n, weights, sum)
}

// apportion splits n units in proportion to weights (summing to sum):
// floors first, then the remaining units one each to the largest
// remainders, earlier members first among equals. Integer arithmetic only.
func apportion(n int, weights []uint64, sum uint64) []int {
	counts := make([]int, len(weights))
	rem := make([]uint64, len(weights))
	given := 0
	for i, w := range weights {
		q := uint64(n) * w
		counts[i] = int(q / sum)
		rem[i] = q % sum
		given += counts[i]
	}
	for ; given < n; given++ {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		counts[best]++
		rem[best] = 0
	}
	return counts
}

// ExpertsReadPerToken is the expected number of routed experts that the
// busiest member of an expert-parallel group runs for one decoded token,
// when member i holds held[i] of experts whole and the router picks used
// distinct experts, each set equally likely: E[max_i X_i] for the
// multivariate hypergeometric counts X_i. The slowest member sets a
// layer's time, so this (times one expert's bytes) is what a cost model
// compares with splitting every expert by columns, where each member reads
// its column share of all used experts. The assumption of uniform routing
// is optimistic for real routers, which favour some experts.
func ExpertsReadPerToken(experts, used int, held []int) float64 {
	if experts <= 0 || used <= 0 || used > experts {
		return 0
	}
	// E[max] = Σ_{k=1..used} P(max ≥ k) = Σ_k (1 − P(every X_i ≤ k−1)),
	// where P(every X_i ≤ c) counts the draws with at most c from each
	// member: the coefficient of z^used in Π_i Σ_{x≤c} C(held_i, x) z^x,
	// over C(experts, used). Counts are float64: C(384, 8) is 1.3e16.
	total := 0
	for _, h := range held {
		total += h
	}
	if total != experts {
		return math.NaN()
	}
	var e float64
	ways, next, caps := make([]float64, used+1), make([]float64, used+1), make([]int, len(held))
	for k := 1; k <= used; k++ {
		for i := range caps {
			caps[i] = k - 1
		}
		e += 1 - drawsWithin(held, caps, used, ways, next)/choose(experts, used)
	}
	return e
}

// drawsWithin counts the draws of used experts that take at most caps[i]
// of member i's held[i]: the coefficient of z^used in
// Π_i Σ_{x≤caps[i]} C(held[i], x) z^x, as a float64 (C(384, 8) is
// 1.3e16). ways and next are scratch of used+1 values.
func drawsWithin(held, caps []int, used int, ways, next []float64) float64 {
	clear(ways)
	ways[0] = 1
	for i, h := range held {
		clear(next)
		for have, w := range ways {
			if w == 0 {
				continue
			}
			for x := 0; x <= min(caps[i], h) && have+x <= used; x++ {
				next[have+x] += float64(w * choose(h, x)) // rounded: no fused multiply-add, the same on every CPU
			}
		}
		ways, next = next, ways
	}
	return ways[used]
}

// ExpertsTimePerToken generalizes ExpertsReadPerToken to members that
// read at different rates: E[max_i X_i/rate[i]], the expected time the
// slowest member of an expert-parallel group spends on one decoded
// token's routed experts, in units of one expert's bytes (multiply by an
// expert's bytes; rate[i] is member i's bytes per second). Same routing
// assumption. With equal rates it is ExpertsReadPerToken/rate.
func ExpertsTimePerToken(experts, used int, held []int, rate []float64) float64 {
	if experts <= 0 || used <= 0 || used > experts || len(rate) != len(held) {
		return 0
	}
	total := 0
	for i, h := range held {
		if rate[i] <= 0 && h > 0 {
			return math.Inf(1)
		}
		total += h
	}
	if total != experts {
		return math.NaN()
	}
	// Y = max_i X_i/rate[i] takes the values x/rate[i]; E[Y] = Σ over
	// those values v (ascending, v_0 = 0) of (v_k − v_{k−1})·P(Y ≥ v_k),
	// and P(Y ≥ v) = 1 − P(every X_i ≤ the largest x with x/rate[i] < v),
	// counted as in ExpertsReadPerToken. The same divisions make the
	// values and the caps, so equal values compare equal on every CPU.
	var vals []float64
	for i, h := range held {
		for x := 1; x <= min(used, h); x++ {
			vals = append(vals, float64(x)/rate[i])
		}
	}
	slices.Sort(vals)
	vals = slices.Compact(vals)
	all := choose(experts, used)
	ways, next, caps := make([]float64, used+1), make([]float64, used+1), make([]int, len(held))
	var e, prev float64
	for _, v := range vals {
		for i, h := range held {
			caps[i] = 0
			for x := 1; x <= min(h, used) && float64(x)/rate[i] < v; x++ {
				caps[i] = x
			}
		}
		e += float64((v - prev) * (1 - drawsWithin(held, caps, used, ways, next)/all))
		prev = v
	}
	return e
}

// choose is the binomial coefficient C(n, k) as a float64.
func choose(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// DescribeTP renders a split, one member a line.
func DescribeTP(c Config, slices []TPSlice) string {
	var b strings.Builder
	group := c.Heads / max(c.KVHeads, 1)
	for i, s := range slices {
		if c.isMLA() {
			fmt.Fprintf(&b, "member %d: heads %v, ", i, s.KVHeads)
		} else {
			fmt.Fprintf(&b, "member %d: KV heads %v (query heads [%d,%d)), ", i, s.KVHeads, s.KVHeads.Lo*group, s.KVHeads.Hi*group)
		}
		if c.hasDenseFFN() {
			fmt.Fprintf(&b, "FFN columns %v, ", s.FFN)
		}
		switch {
		case s.ExpertParallel && c.SharedExperts > 0:
			fmt.Fprintf(&b, "experts %v whole, shared expert columns %v, ", s.Experts, Range{s.ExpertFFN.Lo * c.SharedExperts, s.ExpertFFN.Hi * c.SharedExperts})
		case s.ExpertParallel:
			fmt.Fprintf(&b, "experts %v whole, ", s.Experts)
		case c.Experts > 0:
			fmt.Fprintf(&b, "columns %v of each expert, ", s.ExpertFFN)
		}
		fmt.Fprintf(&b, "vocab rows %v\n", s.Vocab)
	}
	return b.String()
}

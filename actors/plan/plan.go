// Package plan places a model's layers on a cluster's nodes. Place is a
// pure, deterministic function of (model, nodes, options): every node that
// computes a plan from the same membership view gets the same plan, so no
// node has to be in charge of placement.
//
// The package example places a model on two nodes, and is refused on one.
package plan

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	"strata/internal/units"
	"strata/runtime/model"
)

// Model is what placement needs to know about a model.
type Model struct {
	Name       string
	LayerBytes []uint64 // weight bytes of each layer
	EmbedBytes uint64   // token embedding, held by the first stage
	// HeadBytes is the final norm and output matrix, held by the last
	// stage; with a tied output it includes the embedding matrix again
	// (what the head reads per token).
	HeadBytes uint64
	// TiedOutput: the output matrix is the embedding, so a stage that
	// holds both maps it once.
	TiedOutput bool
	// OtherBytes is the tensors outside the layers that every stage maps
	// (rope_freqs.weight).
	OtherBytes uint64
	// KVValuesPerToken is the values the KV cache holds per token, all
	// layers (model.Profile's); where it is known, placement sizes the
	// cache in Options.KVType and ignores KVBytesPerToken.
	KVValuesPerToken uint64
	KVBytesPerToken  uint64 // all layers, split evenly per layer: the cache's bytes where KVValuesPerToken is 0

	// The decode cost model's inputs (Predict); zero values fall back to
	// LayerBytes and a model without attention or vocabulary to split.
	Embd, KVHeads, Vocab int
	ActiveLayerBytes     []uint64 // bytes one decoded token reads of each layer
	AttnLayerBytes       []uint64 // the attention part of ActiveLayerBytes

	// Mixture of experts, for the cost model's choice in each
	// tensor-parallel group between splitting every routed expert by
	// columns and whole experts per member (expert parallelism; see
	// cost.go). ExpertLayerBytes is each layer's routed experts' bytes,
	// all Experts of them (0 in dense layers), of which a token reads
	// ExpertsUsed. ExpertFFNUnits is how many tensor-parallel units
	// (model.TPUnits.FFN columns) each expert's columns split into: a
	// column split is only as even as these whole units allow; 0 =
	// unknown, and columns are assumed to divide exactly.
	ExpertLayerBytes     []uint64
	Experts, ExpertsUsed int
	ExpertFFNUnits       int

	// NoTP, when set, says why the model's layers cannot be split across
	// a tensor-parallel group ("" = they can): candidates with groups are
	// then refused with it.
	NoTP string
}

// FromProfile converts a model profile (see model.ProfileOf).
func FromProfile(name string, p model.Profile) Model {
	m := Model{Name: name, LayerBytes: p.LayerBytes, EmbedBytes: p.EmbedBytes, HeadBytes: p.HeadBytes, TiedOutput: p.TiedOutput, OtherBytes: p.OtherBytes,
		KVBytesPerToken: p.KVBytesPerToken, KVValuesPerToken: p.KVValuesPerToken,
		Embd: p.Embd, KVHeads: p.KVHeads, Vocab: p.Vocab, ActiveLayerBytes: p.ActiveLayerBytes, AttnLayerBytes: p.AttnLayerBytes,
		ExpertLayerBytes: p.ExpertLayerBytes, Experts: p.Experts, ExpertsUsed: p.ExpertsUsed}
	if p.TiedOutput {
		m.HeadBytes += p.EmbedBytes
	}
	return m
}

// Layers returns the number of layers.
func (m Model) Layers() int { return len(m.LayerBytes) }

// WeightBytes is the bytes of every weight once.
func (m Model) WeightBytes() uint64 { return m.StageBytes(0, m.Layers()) }

// StageBytes is the weight bytes a stage of layers [first, end) maps:
// its layers, the tensors every stage maps, the embedding on the first
// stage, the head on the last (a tied head's matrix once when the stage
// has both). It is the one count of a stage's weights: placement plans
// with it and a node's host reserves it when it loads the shard
// (TestStageBytesIsWhatAShardMaps holds it to model.Load's tensors).
func (m Model) StageBytes(first, end int) uint64 {
	n := m.fixedBytes(first == 0, end == m.Layers())
	for _, b := range m.LayerBytes[first:end] {
		n += b
	}
	return n
}

// fixedBytes is a stage's bytes outside its layers.
func (m Model) fixedBytes(embed, head bool) uint64 {
	n := m.OtherBytes
	if embed {
		n += m.EmbedBytes
	}
	if head {
		n += m.HeadBytes
		if embed && m.TiedOutput {
			n -= min(m.EmbedBytes, m.HeadBytes) // one matrix, mapped once
		}
	}
	return n
}

// Node is one member of the view as placement sees it.
type Node struct {
	ID        string
	FreeBytes uint64  // memory the node offers
	Compute   float64 // relative compute rate; 0 = unknown (memory is used instead)
	// MemBandwidth is the rate, in bytes/s, at which the node's forward
	// pass reads weights (measured: strata bench); 0 = unknown. Decode
	// reads every active weight once per token, so this sets its speed.
	MemBandwidth float64
	// Held marks the layers whose weights the node already has on disk
	// (index = layer; nil = none): between nodes that cost the same, the
	// plan picks the one that need not fetch.
	Held []bool
}

// heldBytes is the weight bytes of layers [first, end) n already holds.
func (n Node) heldBytes(m Model, first, end int) uint64 {
	var b uint64
	for l := first; l < min(end, len(n.Held)); l++ {
		if n.Held[l] {
			b += m.LayerBytes[l] + 1 // +1: a held empty layer still counts
		}
	}
	return b
}

// Options tunes a placement. Zero values pick the defaults noted.
type Options struct {
	Context  int // KV cache positions reserved per session; 0 = model.DefaultContext
	Sessions int // concurrent sessions to reserve KV for; 0 = 1
	// ReserveBytes is kept free on every node (scratch, runtime); 0 = none.
	ReserveBytes uint64
	// KVType is the element type of the KV cache (the nodes' --kv-type),
	// which sizes it for models whose KVValuesPerToken is known; the zero
	// value is f16.
	KVType model.KVType
}

func (o Options) withDefaults() Options {
	if o.Context <= 0 {
		o.Context = model.DefaultContext
	}
	if o.Sessions <= 0 {
		o.Sessions = 1
	}
	return o
}

// KVPerToken is the KV cache of one token across all layers that
// placement reserves for m with o (in o.KVType where m knows its values
// per token).
func (m Model) KVPerToken(o Options) uint64 { return m.withKV(o).KVBytesPerToken }

// withKV returns m with KVBytesPerToken in o's KV cache type, where the
// values per token are known.
func (m Model) withKV(o Options) Model {
	if m.KVValuesPerToken > 0 {
		m.KVBytesPerToken = o.KVType.Bytes(m.KVValuesPerToken)
	}
	return m
}

// Stage is one hop of the ring: node Node runs layers [First, End), or,
// when TP is set, a tensor-parallel group does, led by Node (TP[0]).
type Stage struct {
	Node        string
	First, End  int
	Embed, Head bool   // holds the embedding (first stage) / output head (last)
	WeightBytes uint64 // weights it loads (all members together)
	KVBytes     uint64 // KV cache it reserves (all members together)
	// TP lists the members of a tensor-parallel stage in summation order,
	// the leader first; nil for a stage on one node.
	TP []TPMember
	// ExpertParallel: the group holds the routed experts of its
	// mixture-of-experts layers whole, each member its share of them
	// (model.TPOptions.ExpertParallel), instead of columns of every
	// expert; the cost model's choice (Group.ExpertParallel).
	ExpertParallel bool `json:",omitempty"`
}

// TPMember is one member of a tensor-parallel stage: it holds a slice of
// every layer of the stage (model.PlanTP's share for Weight among the
// members' weights) and the KV cache of its slice's heads.
type TPMember struct {
	Node        string
	Weight      uint64 // its relative rate (memory bandwidth in MB/s): the slices follow it
	WeightBytes uint64 // weights it holds (an estimate: heads move in whole units)
	KVBytes     uint64 // KV cache it reserves
}

// Nodes lists the nodes of the stage: the members of a group, or Node.
func (s Stage) Nodes() []string {
	if len(s.TP) == 0 {
		return []string{s.Node}
	}
	out := make([]string, len(s.TP))
	for i, m := range s.TP {
		out[i] = m.Node
	}
	return out
}

// Plan is a ring of stages covering every layer exactly once, in order.
type Plan struct {
	Model    string
	Context  int
	Sessions int
	// Experts is the model's routed experts per mixture-of-experts layer
	// (0: dense), so that String says how tensor-parallel stages hold them.
	Experts int `json:",omitempty"`
	Stages  []Stage
}

// String renders the plan as a small table.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d stage(s), context %d × %d session(s)\n", p.Model, len(p.Stages), p.Context, p.Sessions)
	for i, s := range p.Stages {
		extra := ""
		if s.Embed {
			extra += " +embedding"
		}
		if s.Head {
			extra += " +head"
		}
		node := s.Node
		if len(s.TP) > 0 {
			node = fmt.Sprintf("TP %d-way", len(s.TP))
			if p.Experts > 0 {
				extra += "  " + expertLayout(s.ExpertParallel)
			}
		}
		fmt.Fprintf(&b, "  stage %d  %-20s layers %3d-%-3d (%d)%s  weights %s  KV %s\n",
			i, node, s.First, s.End-1, s.End-s.First, extra, units.Bytes(s.WeightBytes), units.Bytes(s.KVBytes))
		for j, m := range s.TP {
			fmt.Fprintf(&b, "    member %d  %-20s weight %d  weights %s  KV %s\n", j, m.Node, m.Weight, units.Bytes(m.WeightBytes), units.Bytes(m.KVBytes))
		}
	}
	return b.String()
}

// RefusalError says why a model cannot be placed.
type RefusalError struct {
	Model         string
	WeightBytes   uint64
	KVBytes       uint64
	OfferedBytes  uint64
	Nodes         int
	Context       int
	Sessions      int
	Fragmentation bool // enough memory in total, but no contiguous split fits
	Detail        string
}

func (e *RefusalError) Error() string {
	msg := fmt.Sprintf("cannot place %s: needs %s for weights + %s KV (context %d × %d session(s)); the cluster offers %s across %d node(s)",
		e.Model, units.Bytes(e.WeightBytes), units.Bytes(e.KVBytes), e.Context, e.Sessions, units.Bytes(e.OfferedBytes), e.Nodes)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Place computes the plan: the fewest stages that fit, on the nodes with
// the most memory, layers split in proportion to compute (or to memory
// when compute is unknown), the boundaries then moved to balance each
// stage's work per token (balance), without putting more on a node than
// it offers.
func Place(m Model, nodes []Node, opts Options) (Plan, error) {
	opts = opts.withDefaults()
	m = m.withKV(opts)
	L := m.Layers()
	if L == 0 {
		return Plan{}, errors.New("plan: the model has no layers")
	}
	if len(nodes) == 0 {
		return Plan{}, errors.New("plan: no nodes to place on")
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if n.ID == "" || seen[n.ID] {
			return Plan{}, fmt.Errorf("plan: node ID %q is empty or repeated", n.ID)
		}
		seen[n.ID] = true
	}
	// Order nodes by memory offered, then the bytes they hold, then ID:
	// the input order never matters.
	sorted := append([]Node(nil), nodes...)
	for i := range sorted {
		sorted[i].Held = sorted[i].Held[:min(len(sorted[i].Held), L)]
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].FreeBytes != sorted[j].FreeBytes {
			return sorted[i].FreeBytes > sorted[j].FreeBytes
		}
		if hi, hj := sorted[i].heldBytes(m, 0, L), sorted[j].heldBytes(m, 0, L); hi != hj {
			return hi > hj
		}
		return sorted[i].ID < sorted[j].ID
	})
	kvPerLayer := m.KVBytesPerToken / uint64(L) * uint64(opts.Context) * uint64(opts.Sessions)
	refusal := &RefusalError{
		Model: m.Name, WeightBytes: m.WeightBytes(), KVBytes: kvPerLayer * uint64(L),
		Nodes: len(nodes), Context: opts.Context, Sessions: opts.Sessions,
	}
	for _, n := range sorted {
		// Saturating: members announce their memory, and a sum that
		// wrapped would refuse every plan.
		refusal.OfferedBytes = satAdd(refusal.OfferedBytes, usable(n, opts))
	}
	if satAdd(refusal.WeightBytes, refusal.KVBytes) > refusal.OfferedBytes {
		return Plan{}, refusal
	}
	for k := 1; k <= min(len(sorted), L); k++ {
		if p, ok := assign(m, sorted[:k], kvPerLayer, opts); ok {
			preferHolders(&p, m, sorted, opts)
			return p, nil
		}
	}
	refusal.Fragmentation = true
	refusal.Detail = fmt.Sprintf("no split into contiguous layer ranges fits (largest layer %s + %s KV; the first stage also holds the embedding, %s, and the last the head, %s)",
		units.Bytes(maxOf(m.LayerBytes)), units.Bytes(kvPerLayer), units.Bytes(m.EmbedBytes), units.Bytes(m.HeadBytes))
	return Plan{}, refusal
}

func usable(n Node, o Options) uint64 {
	if n.FreeBytes < o.ReserveBytes {
		return 0
	}
	return n.FreeBytes - o.ReserveBytes
}

// satAdd is a + b, or the largest uint64 when that overflows.
func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

func maxOf(xs []uint64) uint64 {
	var m uint64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// assign splits the layers over exactly the given nodes, in order, or
// reports that they do not fit. Arithmetic is integer-only so every CPU
// computes the same plan.
func assign(m Model, nodes []Node, kvPerLayer uint64, opts Options) (Plan, bool) {
	k, L := len(nodes), m.Layers()
	perLayer := maxOf(m.LayerBytes) + kvPerLayer
	// caps[i]: layers node i holds at most, counting the largest layer size.
	caps := make([]int, k)
	for i, n := range nodes {
		fixed := m.fixedBytes(i == 0, i == k-1)
		free := usable(n, opts)
		if free < fixed {
			return Plan{}, false
		}
		caps[i] = int(min((free-fixed)/max(perLayer, 1), uint64(L)))
		if caps[i] == 0 {
			return Plan{}, false
		}
	}
	// Integer weights: compute (milli-units) when every node reports it,
	// else memory in MiB.
	w := make([]uint64, k)
	var sum uint64
	useCompute := true
	for _, n := range nodes {
		useCompute = useCompute && n.Compute > 0
	}
	for i, n := range nodes {
		if useCompute {
			w[i] = uint64(min(n.Compute, 1e9)*1000) + 1
		} else {
			w[i] = usable(n, opts)>>20 + 1
		}
		sum += w[i]
	}
	// counts[i] = min(cap, floor(target)); then hand out the rest one layer
	// at a time to the node furthest below its target that has room.
	counts := make([]int, k)
	given := 0
	for i := range counts {
		counts[i] = min(caps[i], max(1, int(uint64(L)*w[i]/sum)))
		given += counts[i]
	}
	for given > L { // the max(1, ...) floors overshot: trim the most over target
		best := -1
		for i := range counts {
			if counts[i] > 1 && (best < 0 || over(counts[i], w[i], L, sum) > over(counts[best], w[best], L, sum)) {
				best = i
			}
		}
		if best < 0 {
			return Plan{}, false
		}
		counts[best]--
		given--
	}
	for given < L {
		best := -1
		for i := range counts {
			if counts[i] < caps[i] && (best < 0 || over(counts[i], w[i], L, sum) < over(counts[best], w[best], L, sum)) {
				best = i
			}
		}
		if best < 0 {
			return Plan{}, false
		}
		counts[best]++
		given++
	}
	balance(m, counts, caps, w)
	p := Plan{Model: m.Name, Context: opts.Context, Sessions: opts.Sessions}
	first := 0
	for i, n := range nodes {
		s := Stage{Node: n.ID, First: first, End: first + counts[i], Embed: i == 0, Head: i == k-1}
		s.WeightBytes = m.StageBytes(s.First, s.End)
		s.KVBytes = kvPerLayer * uint64(counts[i])
		if s.WeightBytes+s.KVBytes > usable(n, opts) {
			return Plan{}, false // cannot happen: caps count the largest layer
		}
		p.Stages = append(p.Stages, s)
		first = s.End
	}
	return p, true
}

// balance moves the boundaries between neighbouring stages one layer at
// a time while that lowers the larger of the two stages' work per token
// (relative to their nodes' weights w): the layers' bytes one token reads,
// and on the last stage the output head's. The counts alone split the
// layers, not the work: with equal nodes the last stage, which also reads
// the head (1.8 layers' bytes in tinyllama), was the one the others waited
// for once a pipeline keeps every stage busy. A stage keeps one layer at
// least and never takes more than its cap, so the plan still fits.
func balance(m Model, counts, caps []int, w []uint64) {
	k, L := len(counts), m.Layers()
	if k < 2 {
		return
	}
	layer := m.LayerBytes
	if len(m.ActiveLayerBytes) == L {
		layer = m.ActiveLayerBytes
	}
	first := make([]int, k+1) // stage i is layers [first[i], first[i+1])
	work := func(i int) uint64 {
		var b uint64
		for _, x := range layer[first[i]:first[i+1]] {
			b += x
		}
		if i == k-1 {
			b += m.HeadBytes
		}
		return b
	}
	// heavier reports a/wa > b/wb, exactly (128-bit products).
	heavier := func(a, wa, b, wb uint64) bool {
		ah, al := bits.Mul64(a, wb)
		bh, bl := bits.Mul64(b, wa)
		return ah > bh || ah == bh && al > bl
	}
	// worse reports whether the heavier of (a at i, b at j) outweighs the
	// heavier of (c at i, d at j).
	worse := func(a, b, c, d uint64, i, j int) bool {
		x, wx := a, w[i]
		if heavier(b, w[j], a, w[i]) {
			x, wx = b, w[j]
		}
		y, wy := c, w[i]
		if heavier(d, w[j], c, w[i]) {
			y, wy = d, w[j]
		}
		return heavier(x, wx, y, wy)
	}
	for moves := 0; moves < k*L; moves++ {
		for i := range k {
			first[i+1] = first[i] + counts[i]
		}
		moved := false
		for i := 0; i+1 < k && !moved; i++ {
			a, b := work(i), work(i+1)
			if counts[i] > 1 && counts[i+1] < caps[i+1] { // i's last layer to i+1
				x := layer[first[i+1]-1]
				if worse(a, b, a-x, b+x, i, i+1) {
					counts[i]--
					counts[i+1]++
					moved = true
					continue
				}
			}
			if counts[i+1] > 1 && counts[i] < caps[i] { // i+1's first layer to i
				x := layer[first[i+1]]
				if worse(a, b, a+x, b-x, i, i+1) {
					counts[i]++
					counts[i+1]--
					moved = true
				}
			}
		}
		if !moved {
			return
		}
	}
}

// preferHolders moves stages to the nodes that already hold their
// layers, only between nodes that cost about the same: the stage fits the
// other node's memory and their compute rates are within computeSlack of
// each other (measured rates are never exactly equal), so the split does
// not change and a plan moves as few bytes as it can. Greedy: the (stage,
// node) pair holding the most bytes goes first; ties go to the earlier
// stage, then the node placed there, then the lower ID, so the plan stays
// a pure function of its inputs. Stages no one holds keep their node when
// it is free.
func preferHolders(p *Plan, m Model, sorted []Node, opts Options) {
	placed := make([]Node, len(p.Stages))
	for i, s := range p.Stages {
		for _, n := range sorted {
			if n.ID == s.Node {
				placed[i] = n
			}
		}
	}
	same := func(n Node, i int) bool {
		s, o := p.Stages[i], placed[i]
		if usable(n, opts) < s.WeightBytes+s.KVBytes {
			return false
		}
		lo, hi := min(n.Compute, o.Compute), max(n.Compute, o.Compute)
		return lo == hi || lo > 0 && hi-lo <= computeSlack*hi
	}
	used := map[string]bool{}
	done := make([]bool, len(p.Stages))
	for {
		bi, bn, bh := -1, Node{}, uint64(0)
		for i, s := range p.Stages {
			if done[i] {
				continue
			}
			for _, n := range sorted {
				if used[n.ID] || !same(n, i) {
					continue
				}
				h := n.heldBytes(m, s.First, s.End)
				if h == 0 {
					continue
				}
				if bi < 0 || h > bh || h == bh && i == bi && (n.ID == placed[i].ID || bn.ID != placed[i].ID && n.ID < bn.ID) {
					bi, bn, bh = i, n, h
				}
			}
		}
		if bi < 0 {
			break
		}
		p.Stages[bi].Node, used[bn.ID], done[bi] = bn.ID, true, true
	}
	for i := range p.Stages {
		if done[i] {
			continue
		}
		if !used[placed[i].ID] {
			used[placed[i].ID] = true
			continue
		}
		found := false
		for _, n := range sorted { // its node went to a holder: take one like it
			if !used[n.ID] && same(n, i) {
				p.Stages[i].Node, used[n.ID], found = n.ID, true, true
				break
			}
		}
		if !found { // no swap keeps every stage on a node like its own
			for j := range p.Stages {
				p.Stages[j].Node = placed[j].ID
			}
			return
		}
	}
}

// computeSlack is how far apart (relative) two measured compute rates may
// be for preferHolders to treat the nodes as interchangeable.
const computeSlack = 0.25

// over compares how far count is above its target L*w/sum, as
// count*sum - L*w (scaled by sum, so integers compare exactly).
func over(count int, w uint64, L int, sum uint64) int64 {
	return int64(uint64(count)*sum) - int64(uint64(L)*w)
}

package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"strata/internal/units"
	"strata/runtime/model"
)

// The decode cost model predicts how many tokens per second a placement
// decodes for one sequence. Decoding is memory-bound: every active weight
// is read once per token, so a member's share of a layer takes
// (its bytes of that layer) / (its memory bandwidth). Stages run one after
// another; the members of a tensor-parallel group run at once and wait for
// each other at two all-reduces per layer, so a group's layer takes as
// long as its slowest member plus two all-reduces. Links cost a latency
// per message plus its bytes over the link's throughput.
//
// Assumptions, stated so the numbers can be judged: an all-reduce sends
// every member's partial sums directly to every other member over its own
// link, in parallel (a full mesh, as Thunderbolt cables between 4 Mac
// Studios are), so it costs one link's latency plus one vector's transfer;
// the output head is split by vocabulary rows and its logits gathered to
// one member; compute never limits decode; the KV cache read per token is
// counted at CostOptions.Position; slices follow member bandwidth exactly
// except attention, which moves in whole KV heads.
//
// Mixture-of-experts layers in a group hold their routed experts one of
// two ways (model.TPOptions), chosen per group (chooseExperts; ties and
// ExpertsSplit: columns). Split by columns, every member reads its share
// of each of the ExpertsUsed experts a token is routed to, and the share
// moves in whole units (Model.ExpertFFNUnits, apportioned by the members'
// weights as model.PlanTP does): an expert of 6 units on 4 members puts 2
// on the busiest, 1/3 of each expert instead of 1/4. Whole experts per
// member (expert parallelism), member i holds held_i experts (again
// PlanTP's apportioning) and reads those of the token's experts it holds,
// X_i of them: the group waits for the largest X_i/bandwidth_i, whose
// expectation assumes the router picks every set of ExpertsUsed experts
// with equal probability (model.ExpertsTimePerToken; exact for any
// bandwidths under that assumption, optimistic for real routers, which
// favour some experts). The rest of the layer and the routed experts are
// each timed at their own slowest member and added, which bounds the
// true E[max of sums] from above when the slowest differ; the choice
// compares only the routed experts' time, the part the layouts change.

// Link is a network path between two nodes as measured (or described).
type Link struct {
	Latency    time.Duration // one way, for a small message, software included
	Throughput float64       // bytes/s
}

// send is the time to deliver a message of n bytes.
func (l Link) send(n float64) time.Duration {
	if l.Throughput <= 0 {
		return l.Latency
	}
	return l.Latency + time.Duration(n/l.Throughput*1e9)
}

func (l Link) String() string {
	return fmt.Sprintf("%v, %s/s", l.Latency, strings.ReplaceAll(units.Bytes(uint64(l.Throughput)), " ", ""))
}

// LinkPresets are named links for described clusters: Thunderbolt 5 with
// RDMA (verbs over librdma: about 5 µs, 9 GB/s) and TCP over Thunderbolt
// (about 300 µs a message through the kernel's stack; 4 GB/s).
var LinkPresets = map[string]Link{
	"rdma": {Latency: 5 * time.Microsecond, Throughput: 9e9},
	"tcp":  {Latency: 300 * time.Microsecond, Throughput: 4e9},
}

// ParseLink reads a preset name (rdma, tcp) or "LATENCY,THROUGHPUT" such
// as "5us,9GB/s".
func ParseLink(s string) (Link, error) {
	if l, ok := LinkPresets[strings.ToLower(strings.TrimSpace(s))]; ok {
		return l, nil
	}
	lat, thr, ok := strings.Cut(s, ",")
	if !ok {
		return Link{}, fmt.Errorf("link %q: give a preset (rdma, tcp) or LATENCY,THROUGHPUT such as 5us,9GB/s", s)
	}
	d, err := time.ParseDuration(strings.ReplaceAll(strings.TrimSpace(lat), "µ", "u"))
	if err != nil || d < 0 {
		return Link{}, fmt.Errorf("link %q: latency %q is not a duration such as 5us or 0.3ms", s, lat)
	}
	b, err := ParseRate(thr)
	if err != nil {
		return Link{}, fmt.Errorf("link %q: %w", s, err)
	}
	return Link{Latency: d, Throughput: b}, nil
}

// ParseRate reads a rate in bytes per second such as "9GB/s" or "800GB/s".
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "/s"), "ps")
	b, err := units.ParseBytes(t)
	if err != nil || b == 0 {
		return 0, fmt.Errorf("rate %q is not a positive size per second such as 9GB/s", s)
	}
	return float64(b), nil
}

// Network gives the link between any two nodes.
type Network struct {
	Default Link
	Pairs   map[[2]string]Link // measured links, keyed by (lower ID, higher ID)
}

// Link returns the link between a and b.
func (n Network) Link(a, b string) Link {
	if a > b {
		a, b = b, a
	}
	if l, ok := n.Pairs[[2]string{a, b}]; ok {
		return l
	}
	return n.Default
}

// CostOptions tunes the cost model. Zero values pick the defaults noted.
type CostOptions struct {
	// ActBytes is the bytes of one activation on the wire; 0 = 4 (f32).
	ActBytes int
	// Position is the context length at which a token is decoded: each
	// layer then also reads that many positions of its KV cache; 0 = none.
	Position int
	// DefaultBandwidth is the memory bandwidth (bytes/s) of nodes that
	// announce none; 0 = 100 GB/s.
	DefaultBandwidth float64
	// Experts is how tensor-parallel groups hold a mixture-of-experts
	// model's routed experts; the zero value, ExpertsAuto, lets the cost
	// model choose per group. Every node must use the same (it decides
	// the plan, as Mode does).
	Experts ExpertMode
}

func (o CostOptions) withDefaults() CostOptions {
	if o.ActBytes <= 0 {
		o.ActBytes = 4
	}
	if o.DefaultBandwidth <= 0 {
		o.DefaultBandwidth = 100e9
	}
	return o
}

// Member is one node of a stage. A stage of one member holds its layers
// whole; the members of a tensor-parallel group each hold a slice.
type Member struct {
	Node  string
	Share float64 // fraction of the stage's FFN columns and output rows
	Heads float64 // fraction of its KV heads (whole heads)
	Bytes uint64  // weights and KV cache the member holds
}

// Group is one stage of a candidate: layers [First, End) on Members.
type Group struct {
	First, End int
	Members    []Member
	// MoE: the group has more than one member and routed experts in its
	// layers, so how it holds them is a choice: ExpertParallel (whole
	// experts per member) or else every expert split by columns.
	MoE, ExpertParallel bool
	// ExpertReads is what the choice compared: the busiest member's
	// routed-expert reads per token and layer, in experts' bytes, split by
	// columns [0] and whole [1], at the group's mean bandwidth (exact
	// counts when the members' bandwidths are equal).
	ExpertReads [2]float64
	// experts is both splits of the routed experts, which candidate
	// computed to choose and predict times.
	experts expertSplit
}

// Prediction is the cost model's estimate of one decoded token.
type Prediction struct {
	TokensPerSecond float64
	Weights         time.Duration // reading weights and KV: each stage's slowest member, summed
	Links           time.Duration // all-reduces, the logits gather and hops between stages
	AllReduces      int
	Hops            int
}

// Candidate is one way to run a model on (some of) the nodes.
type Candidate struct {
	Stages []Group
	Prediction
	// Refusal is why the candidate does not fit ("" when it does).
	Refusal string
}

// Nodes is how many nodes the candidate uses.
func (c Candidate) Nodes() int {
	n := 0
	for _, g := range c.Stages {
		n += len(g.Members)
	}
	return n
}

// Kind is "single node", "pipeline", "tensor-parallel" or "hybrid".
func (c Candidate) Kind() string {
	g := len(c.Stages[0].Members)
	switch {
	case len(c.Stages) == 1 && g == 1:
		return "single node"
	case g == 1:
		return "pipeline"
	case len(c.Stages) == 1:
		return "tensor-parallel"
	}
	return "hybrid"
}

// Name describes the candidate's shape: "pipeline of 4", "TP 4-way",
// "2 stages × TP 2-way".
func (c Candidate) Name() string {
	g := len(c.Stages[0].Members)
	switch c.Kind() {
	case "single node":
		return "1 node"
	case "pipeline":
		return fmt.Sprintf("pipeline of %d", len(c.Stages))
	case "tensor-parallel":
		return fmt.Sprintf("TP %d-way", g)
	}
	return fmt.Sprintf("%d stages × TP %d-way", len(c.Stages), g)
}

// Candidates lists every way to run m on the nodes: s stages of g-way
// tensor-parallel groups for every s×g ≤ len(nodes), on the nodes with the
// most memory (as Place orders them), each with its predicted decode speed
// or the reason it does not fit. Deterministic, as Place.
func Candidates(m Model, nodes []Node, net Network, opts Options, co CostOptions) ([]Candidate, error) {
	opts, co = opts.withDefaults(), co.withDefaults()
	m = m.withKV(opts)
	L := m.Layers()
	if L == 0 || len(nodes) == 0 {
		return nil, fmt.Errorf("plan: nothing to place (%d layers, %d nodes)", L, len(nodes))
	}
	sorted := append([]Node(nil), nodes...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].FreeBytes != sorted[j].FreeBytes {
			return sorted[i].FreeBytes > sorted[j].FreeBytes
		}
		return sorted[i].ID < sorted[j].ID
	})
	kvPerLayer := m.KVBytesPerToken / uint64(L) * uint64(opts.Context) * uint64(opts.Sessions)
	var out []Candidate
	for s := 1; s <= min(len(sorted), L); s++ {
		for g := 1; s*g <= len(sorted); g++ {
			c := candidate(m, sorted[:s*g], s, g, kvPerLayer, opts, co)
			if c.Refusal == "" {
				c.Prediction = predict(m, c, sorted, net, co)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// candidate splits nodes into s stages of g members and the layers over
// the stages: each group acts as one node offering the memory its members
// can fill in proportion to their shares, and assign splits layers among
// those as Place does among nodes.
func candidate(m Model, nodes []Node, s, g int, kvPerLayer uint64, opts Options, co CostOptions) Candidate {
	groups := make([][]Member, s)
	virtual := make([]Node, s)
	for i := range groups {
		members := nodes[i*g : (i+1)*g]
		// The shares follow the integer weights the members' slices are
		// cut by (model.PlanTP), so what is predicted is what is loaded.
		bw := make([]float64, g)
		var total float64
		for j, w := range TPWeights(members, co) {
			bw[j] = float64(w)
			total += bw[j]
		}
		heads := wholeHeads(m.KVHeads, bw)
		capacity := uint64(math.MaxUint64)
		for j, n := range members {
			groups[i] = append(groups[i], Member{Node: n.ID, Share: bw[j] / total, Heads: heads[j]})
			frac := max(bw[j]/total, heads[j])
			capacity = min(capacity, uint64(min(float64(usable(n, opts))/frac, 1e19))) // 1e19 < 2^64: the conversion stays defined
		}
		virtual[i] = Node{ID: members[0].ID, FreeBytes: capacity, Compute: total / 1e3}
	}
	c := Candidate{}
	if g > 1 && m.NoTP != "" {
		for _, gm := range groups {
			c.Stages = append(c.Stages, Group{Members: gm})
		}
		c.Refusal = m.NoTP
		return c
	}
	p, ok := assign(m, virtual, kvPerLayer, Options{Context: opts.Context, Sessions: opts.Sessions})
	if !ok {
		c.Stages = []Group{{Members: groups[0]}}
		for _, gm := range groups[1:] {
			c.Stages = append(c.Stages, Group{Members: gm})
		}
		c.Refusal = fmt.Sprintf("the layers do not fit in %d stage(s) of %d node(s)", s, g)
		return c
	}
	for i, st := range p.Stages {
		grp := Group{First: st.First, End: st.End, Members: groups[i]}
		ex := chooseExperts(m, &grp, nodes, co)
		var attn, rest, routed uint64
		for l := st.First; l < st.End; l++ {
			a, r := at(m.AttnLayerBytes, l), uint64(0)
			if grp.MoE { // the routed experts follow the group's layout
				r = at(m.ExpertLayerBytes, l)
			}
			attn += a
			routed += r
			rest += m.LayerBytes[l] - min(a+r, m.LayerBytes[l])
		}
		kv := kvPerLayer * uint64(st.End-st.First)
		for j := range grp.Members {
			mb := &grp.Members[j]
			b := float64(float64(attn+kv)*mb.Heads) + float64(float64(rest)*mb.Share) // no fused multiply-add
			if grp.MoE {
				b += float64(float64(routed) * ex.held(j, grp.ExpertParallel, m.Experts))
			}
			if st.Embed {
				b += float64(m.EmbedBytes) // every member embeds the tokens
			}
			if st.Head {
				b += float64(m.HeadBytes) * mb.Share
			}
			mb.Bytes = uint64(b)
			if n := nodeByID(nodes, mb.Node); mb.Bytes > usable(n, opts) && c.Refusal == "" {
				c.Refusal = fmt.Sprintf("%s would hold %s, offers %s", n.ID, units.Bytes(mb.Bytes), units.Bytes(usable(n, opts)))
			}
		}
		c.Stages = append(c.Stages, grp)
	}
	return c
}

// predict is the cost model (see the comment at the top of the file).
func predict(m Model, c Candidate, nodes []Node, net Network, co CostOptions) Prediction {
	var p Prediction
	act := float64(m.Embd * co.ActBytes)
	kvRead := float64(0)
	if L := m.Layers(); L > 0 {
		kvRead = float64(m.KVBytesPerToken/uint64(L)) * float64(co.Position)
	}
	for si, st := range c.Stages {
		bw := make([]float64, len(st.Members))
		for j, mb := range st.Members {
			bw[j] = bandwidth(nodeByID(nodes, mb.Node), co)
		}
		ex := st.experts
		used := float64(m.ExpertsUsed)
		var sec float64
		for l := st.First; l < st.End; l++ {
			attn := float64(at(m.AttnLayerBytes, l))
			rest := float64(at(m.ActiveLayerBytes, l)) - attn
			if m.ActiveLayerBytes == nil {
				rest = float64(m.LayerBytes[l]) - attn
			}
			// In a MoE group the routed experts (one expert's bytes e, of
			// which a token reads used) follow the group's layout, not
			// the members' shares.
			e, routed := 0.0, 0.0
			if st.MoE {
				e = m.expertBytes(l)
				routed = float64(e * used)
				rest = max(rest-routed, 0)
			}
			slowest := 0.0
			for j, mb := range st.Members {
				// float64(...) rounds each product: no fused multiply-add,
				// so every CPU predicts (and so chooses) the same.
				b := float64((attn+kvRead)*mb.Heads) + float64(rest*mb.Share)
				if routed > 0 && !st.ExpertParallel {
					b += float64(routed * ex.cols[j])
				}
				slowest = max(slowest, b/bw[j])
			}
			if routed > 0 && st.ExpertParallel {
				slowest += float64(e * ex.whole) // the busiest member's experts, on top (see the top of the file)
			}
			sec += slowest
		}
		if si == len(c.Stages)-1 {
			slowest := 0.0
			for j, mb := range st.Members {
				slowest = max(slowest, float64(m.HeadBytes)*mb.Share/bw[j])
			}
			sec += slowest
		}
		p.Weights += time.Duration(sec * 1e9)
		if g := len(st.Members); g > 1 {
			// The slowest pair bounds an all-reduce: every member waits for
			// every other's partial sums.
			var ar time.Duration
			for a := range st.Members {
				for b := a + 1; b < g; b++ {
					ar = max(ar, net.Link(st.Members[a].Node, st.Members[b].Node).send(act))
				}
			}
			n := 2 * (st.End - st.First)
			p.AllReduces += n
			p.Links += time.Duration(n) * ar
			if si == len(c.Stages)-1 { // gather the logits on the first member
				var gather time.Duration
				for _, mb := range st.Members[1:] {
					gather = max(gather, net.Link(st.Members[0].Node, mb.Node).send(float64(m.Vocab)*4*mb.Share))
				}
				p.Links += gather
			}
		}
		if len(c.Stages) > 1 { // hidden states to the next stage; the token from the last to the first
			next := c.Stages[(si+1)%len(c.Stages)].Members[0].Node
			size := act
			if si == len(c.Stages)-1 {
				size = 4
			}
			p.Links += net.Link(st.Members[0].Node, next).send(size)
			p.Hops++
		}
	}
	if t := p.Weights + p.Links; t > 0 {
		p.TokensPerSecond = 1e9 / float64(t)
	}
	return p
}

// expertSplit is a group's routed experts both ways (chooseExperts):
// cols[j] is member j's fraction of every expert's columns (whole units);
// experts[j] the experts it holds whole with expert parallelism, and
// whole the expected time, per byte of one expert, that the busiest
// member then spends on the token's experts it holds.
type expertSplit struct {
	cols    []float64
	experts []int
	whole   float64
}

// held is the fraction of the routed experts' bytes member j holds.
func (ex expertSplit) held(j int, whole bool, experts int) float64 {
	if whole {
		return float64(ex.experts[j]) / float64(experts)
	}
	return ex.cols[j]
}

// expertCosts computes g's split both ways, from the members' integer
// weights (TPWeights) as the loaded slices are cut (model.PlanTPWith).
func expertCosts(m Model, g Group, nodes []Node, co CostOptions) expertSplit {
	n := len(g.Members)
	members := make([]Node, n)
	bw := make([]float64, n)
	for j, mb := range g.Members {
		members[j] = nodeByID(nodes, mb.Node)
		bw[j] = bandwidth(members[j], co)
	}
	w := TPWeights(members, co)
	ex := expertSplit{cols: make([]float64, n)}
	if m.ExpertFFNUnits > 0 {
		for j, u := range model.TPShares(m.ExpertFFNUnits, w) {
			ex.cols[j] = float64(u) / float64(m.ExpertFFNUnits)
		}
	} else { // units unknown: columns divide exactly
		for j, mb := range g.Members {
			ex.cols[j] = mb.Share
		}
	}
	ex.experts = model.TPShares(m.Experts, w)
	ex.whole = model.ExpertsTimePerToken(m.Experts, m.ExpertsUsed, ex.experts, bw)
	return ex
}

// chooseExperts decides how group g holds its routed experts (co.Experts,
// or with ExpertsAuto the cheaper for its busiest member, columns when
// equal), records it on g, and returns both splits. The choice weighs
// reading only: the members' memory then holds what was chosen
// (candidate refuses a layout that does not fit rather than switching).
func chooseExperts(m Model, g *Group, nodes []Node, co CostOptions) expertSplit {
	g.MoE = len(g.Members) > 1 && m.hasExperts(g.First, g.End)
	if !g.MoE {
		return expertSplit{}
	}
	ex := expertCosts(m, *g, nodes, co)
	g.experts = ex
	var cols, mean float64
	for j, mb := range g.Members {
		bw := bandwidth(nodeByID(nodes, mb.Node), co)
		cols = max(cols, float64(float64(m.ExpertsUsed)*ex.cols[j])/bw)
		mean += bw / float64(len(g.Members))
	}
	g.ExpertReads = [2]float64{float64(cols * mean), float64(ex.whole * mean)}
	switch co.Experts {
	case ExpertsSplit:
		g.ExpertParallel = false
	case ExpertsWhole:
		g.ExpertParallel = true
	default:
		g.ExpertParallel = ex.whole < cols
	}
	return ex
}

// hasExperts reports whether any of layers [first, end) has routed experts.
func (m Model) hasExperts(first, end int) bool {
	if m.Experts <= 0 || m.ExpertsUsed <= 0 {
		return false
	}
	for l := first; l < end; l++ {
		if at(m.ExpertLayerBytes, l) > 0 {
			return true
		}
	}
	return false
}

// expertBytes is one routed expert's bytes in layer l (0 in a dense layer).
func (m Model) expertBytes(l int) float64 {
	if m.Experts <= 0 {
		return 0
	}
	return float64(at(m.ExpertLayerBytes, l)) / float64(m.Experts)
}

// expertLayout names how a tensor-parallel stage holds its routed experts.
func expertLayout(whole bool) string {
	if whole {
		return "experts whole per member"
	}
	return "each expert split"
}

// Best returns the fitting candidate with the highest predicted speed
// (fewer nodes among equals), and false when none fits.
func Best(cands []Candidate) (Candidate, bool) {
	var best Candidate
	found := false
	for _, c := range cands {
		if c.Refusal != "" {
			continue
		}
		if !found || c.TokensPerSecond > best.TokensPerSecond || c.TokensPerSecond == best.TokensPerSecond && c.Nodes() < best.Nodes() {
			best, found = c, true
		}
	}
	return best, found
}

// Explain says in words why best was chosen over the other candidates.
func Explain(best Candidate, cands []Candidate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chose %s on %d node(s): %.1f tok/s predicted (per token %v reading weights, %v on links",
		best.Name(), best.Nodes(), best.TokensPerSecond, round(best.Weights), round(best.Links))
	if best.AllReduces > 0 {
		fmt.Fprintf(&b, ": %d all-reduces", best.AllReduces)
	}
	b.WriteString(")")
	for _, g := range best.Stages {
		if g.MoE { // the groups of a candidate are alike: one says it
			other := "each expert split by columns"
			if g.ExpertParallel {
				fmt.Fprintf(&b, "; experts whole per member: the busiest member reads %.2f experts per token and layer, against %.2f experts' bytes with %s", g.ExpertReads[1], g.ExpertReads[0], other)
			} else {
				fmt.Fprintf(&b, "; each expert split by columns: the busiest member reads %.2f experts' bytes per token and layer, against %.2f whole experts with experts whole per member", g.ExpertReads[0], g.ExpertReads[1])
			}
			break
		}
	}
	var single, pipe, tp Candidate
	for _, c := range cands {
		if c.Refusal != "" {
			continue
		}
		switch c.Kind() {
		case "single node":
			single = c
		case "pipeline":
			if c.TokensPerSecond > pipe.TokensPerSecond {
				pipe = c
			}
		default:
			if c.TokensPerSecond > tp.TokensPerSecond {
				tp = c
			}
		}
	}
	if single.Stages != nil && best.Kind() != "single node" {
		fmt.Fprintf(&b, "; %.2fx one node", best.TokensPerSecond/single.TokensPerSecond)
	} else if single.Stages == nil {
		b.WriteString("; the model does not fit on one node")
	}
	if best.Kind() == "pipeline" || best.Kind() == "single node" {
		if tp.Stages != nil {
			fmt.Fprintf(&b, "; the best tensor-parallel plan (%s) would spend %v per token on %d all-reduces and reach %.1f tok/s",
				tp.Name(), round(tp.Links), tp.AllReduces, tp.TokensPerSecond)
		}
	} else if pipe.Stages != nil || single.Stages != nil {
		alt := pipe
		if alt.Stages == nil || single.Stages != nil && single.TokensPerSecond >= pipe.TokensPerSecond {
			alt = single
		}
		fmt.Fprintf(&b, "; layers alone (%s) reach %.1f tok/s: a pipeline reads every weight one stage at a time", alt.Name(), alt.TokensPerSecond)
	}
	return b.String()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	}
	return d
}

// Table renders candidates with their predictions, one a line.
func Table(cands []Candidate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-22s %5s %9s %11s %11s %6s  %s\n", "candidate", "nodes", "tok/s", "weights", "links", "allred", "layers per stage / members")
	for _, c := range cands {
		var parts []string
		for _, g := range c.Stages {
			var ids []string
			for _, mb := range g.Members {
				ids = append(ids, mb.Node)
			}
			part := fmt.Sprintf("%d-%d:%s", g.First, g.End-1, strings.Join(ids, "+"))
			if g.MoE {
				part += " (" + expertLayout(g.ExpertParallel) + ")"
			}
			parts = append(parts, part)
		}
		if c.Refusal != "" {
			fmt.Fprintf(&b, "  %-22s %5d %9s %11s %11s %6s  does not fit: %s\n", c.Name(), c.Nodes(), "-", "-", "-", "-", c.Refusal)
			continue
		}
		fmt.Fprintf(&b, "  %-22s %5d %9.1f %11v %11v %6d  %s\n", c.Name(), c.Nodes(), c.TokensPerSecond, round(c.Weights), round(c.Links), c.AllReduces, strings.Join(parts, " "))
	}
	return b.String()
}

// wholeHeads splits kvHeads whole heads in proportion to weights (largest
// remainder, earlier first among equals) and returns each one's fraction;
// with no heads known, the fractions are the weights'.
func wholeHeads(kvHeads int, weights []float64) []float64 {
	var total float64
	for _, w := range weights {
		total += w
	}
	out := make([]float64, len(weights))
	if kvHeads <= 0 {
		for i, w := range weights {
			out[i] = w / total
		}
		return out
	}
	counts := make([]int, len(weights))
	rem := make([]float64, len(weights))
	given := 0
	for i, w := range weights {
		q := float64(kvHeads) * w / total
		counts[i] = int(q)
		rem[i] = q - float64(counts[i])
		given += counts[i]
	}
	for ; given < kvHeads; given++ {
		best := 0
		for i := range rem {
			if rem[i] > rem[best]+1e-12 {
				best = i
			}
		}
		counts[best]++
		rem[best] = -1
	}
	for i := range out {
		out[i] = float64(counts[i]) / float64(kvHeads)
	}
	return out
}

// TPWeights are the members' weights in the slices of a tensor-parallel
// group (model.PlanTP): each member's memory bandwidth
// (CostOptions.DefaultBandwidth when unknown) as a share of the fastest
// member's, in eighths (1 to 8). Integers, so every node cuts the same
// slices; coarse, so that the noise of measuring bandwidth does not move
// a slice: members within a sixteenth of each other are equal. A slice
// that moved would add the group's partial sums in another order, and
// two runs on the same machines would part from one node's answer at
// different tokens (the "bench tp nondeterminism" of issue 30: the weights
// were the raw MB/s).
func TPWeights(members []Node, co CostOptions) []uint64 {
	co = co.withDefaults()
	var fastest float64
	for _, n := range members {
		fastest = max(fastest, bandwidth(n, co))
	}
	w := make([]uint64, len(members))
	for j, n := range members {
		w[j] = uint64(max(1, math.Round(tpWeightSteps*bandwidth(n, co)/fastest)))
	}
	return w
}

// tpWeightSteps is how finely TPWeights divides the fastest member's rate.
const tpWeightSteps = 8

func bandwidth(n Node, co CostOptions) float64 {
	if n.MemBandwidth > 0 {
		return n.MemBandwidth
	}
	return co.DefaultBandwidth
}

func nodeByID(nodes []Node, id string) Node {
	for _, n := range nodes {
		if n.ID == id {
			return n
		}
	}
	return Node{ID: id}
}

func at(xs []uint64, i int) uint64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

// FormatRate prints a bandwidth such as "800 GB/s".
func FormatRate(r float64) string { return units.Bytes(uint64(r)) + "/s" }

package plan

import (
	"fmt"
	"strings"
)

// Mode is the kind of placement a cluster uses.
type Mode int

const (
	// Pipeline splits layers only (Place); the zero value.
	Pipeline Mode = iota
	// Auto takes the cost model's fastest candidate (Best): pipeline,
	// tensor-parallel or hybrid.
	Auto
	// TensorParallel prefers one stage split across as many nodes as fit.
	TensorParallel
	// Hybrid prefers several stages, each a tensor-parallel group, on as
	// many nodes as fit.
	Hybrid
)

var modeNames = [...]string{"pipeline", "auto", "tp", "hybrid"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(modeNames) {
		return fmt.Sprintf("mode(%d)", int(m))
	}
	return modeNames[m]
}

// ParseMode reads a mode name: pipeline, auto, tp or hybrid.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("placement %q: one of %s", s, strings.Join(modeNames[:], ", "))
}

// ExpertMode is how tensor-parallel groups hold the routed experts of a
// mixture-of-experts model (CostOptions.Experts).
type ExpertMode int

const (
	// ExpertsAuto lets the cost model choose per group; the zero value.
	ExpertsAuto ExpertMode = iota
	// ExpertsSplit splits every expert by columns across the members.
	ExpertsSplit
	// ExpertsWhole gives each member whole experts (expert parallelism).
	ExpertsWhole
)

var expertModeNames = [...]string{"auto", "split", "whole"}

func (e ExpertMode) String() string {
	if e < 0 || int(e) >= len(expertModeNames) {
		return fmt.Sprintf("experts(%d)", int(e))
	}
	return expertModeNames[e]
}

// ParseExpertMode reads auto, split or whole.
func ParseExpertMode(s string) (ExpertMode, error) {
	for i, n := range expertModeNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return ExpertMode(i), nil
		}
	}
	return 0, fmt.Errorf("experts %q: one of %s", s, strings.Join(expertModeNames[:], ", "))
}

// PlaceMode computes a placement of the given mode, a pure deterministic
// function of its inputs as Place is. Pipeline is Place. Auto is the
// fitting candidate (Candidates) the cost model predicts fastest.
// TensorParallel and Hybrid are preferences, not demands, so that a
// session that lost a node can still re-plan: among the fitting
// candidates of that shape (one stage of g > 1 members; s > 1 stages of
// g > 1 members) the one on the most nodes, then the fastest; when none
// fits, Auto's choice. When nothing fits, the error is Place's refusal.
func PlaceMode(m Model, nodes []Node, net Network, opts Options, co CostOptions, mode Mode) (Plan, error) {
	if mode == Pipeline {
		return Place(m, nodes, opts)
	}
	cands, err := Candidates(m, nodes, net, opts, co)
	if err != nil {
		return Plan{}, err
	}
	best, ok := Best(cands)
	if !ok {
		if _, err := Place(m, nodes, opts); err != nil {
			return Plan{}, err
		}
		return Plan{}, &RefusalError{Model: m.Name, Nodes: len(nodes), Context: opts.withDefaults().Context, Sessions: opts.withDefaults().Sessions,
			WeightBytes: m.WeightBytes(), Detail: "no candidate of the cost model fits"}
	}
	if mode == TensorParallel || mode == Hybrid {
		var pick *Candidate
		for i := range cands {
			c := &cands[i]
			g := len(c.Stages[0].Members)
			shaped := g > 1 && (mode == TensorParallel && len(c.Stages) == 1 || mode == Hybrid && len(c.Stages) > 1)
			if c.Refusal != "" || !shaped {
				continue
			}
			if pick == nil || c.Nodes() > pick.Nodes() || c.Nodes() == pick.Nodes() && c.TokensPerSecond > pick.TokensPerSecond {
				pick = c
			}
		}
		if pick != nil {
			best = *pick
		}
	}
	return best.Plan(m, nodes, opts, co), nil
}

// Plan turns a fitting candidate into the placement the cluster loads:
// a stage of one member is a plain stage; a larger group is a
// tensor-parallel stage whose members carry their TPWeights.
func (c Candidate) Plan(m Model, nodes []Node, opts Options, co CostOptions) Plan {
	opts = opts.withDefaults()
	m = m.withKV(opts)
	L := m.Layers()
	kvPerLayer := m.KVBytesPerToken / uint64(max(L, 1)) * uint64(opts.Context) * uint64(opts.Sessions)
	p := Plan{Model: m.Name, Context: opts.Context, Sessions: opts.Sessions, Experts: m.Experts}
	for i, g := range c.Stages {
		s := Stage{Node: g.Members[0].Node, First: g.First, End: g.End, Embed: i == 0, Head: i == len(c.Stages)-1,
			ExpertParallel: g.ExpertParallel}
		s.WeightBytes = m.StageBytes(s.First, s.End)
		s.KVBytes = kvPerLayer * uint64(s.End-s.First)
		if len(g.Members) > 1 {
			members := make([]Node, len(g.Members))
			for j, mb := range g.Members {
				members[j] = nodeByID(nodes, mb.Node)
			}
			weights := TPWeights(members, co)
			for j, mb := range g.Members {
				kv := uint64(float64(s.KVBytes) * mb.Heads)
				s.TP = append(s.TP, TPMember{Node: mb.Node, Weight: weights[j],
					WeightBytes: mb.Bytes - min(kv, mb.Bytes), KVBytes: kv})
			}
		}
		p.Stages = append(p.Stages, s)
	}
	return p
}

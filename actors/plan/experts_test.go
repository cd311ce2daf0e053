package plan

import (
	"math"
	"strings"
	"testing"
	"time"

	"strata/runtime/model"
	"strata/runtime/tensor"
)

// moeModel is one layer of 4 routed experts of 1 MB (a token uses 2) and
// 1 MB of other weights, no attention, KV cache or head: the routed
// experts alone decide between the layouts.
func moeModel(units int) Model {
	return Model{Name: "moe", LayerBytes: []uint64{5e6}, ActiveLayerBytes: []uint64{3e6}, AttnLayerBytes: []uint64{0},
		ExpertLayerBytes: []uint64{4e6}, Experts: 4, ExpertsUsed: 2, ExpertFFNUnits: units}
}

// The prediction of a MoE group worked out by hand, both layouts.
func TestPredictExpertsByHand(t *testing.T) {
	nodes := []Node{{ID: "a", FreeBytes: 1e9, MemBandwidth: 1e9}, {ID: "b", FreeBytes: 1e9, MemBandwidth: 1e9}}
	net := Network{Default: Link{Latency: 100 * time.Microsecond}}
	links := 3 * 100 * time.Microsecond // two all-reduces and the logits gather, latency only
	for _, tc := range []struct {
		name    string
		units   int
		experts ExpertMode
		whole   bool
		weights time.Duration
	}{
		// Expert parallelism: 2 experts each; the token's 2 experts are on
		// one member with probability 2/6, so the busiest reads 4/3
		// experts on average: 0.5 MB of the rest + 4/3 MB at 1 GB/s.
		// Columns: the expert's one unit goes to a whole, so a reads both
		// experts: 0.5 + 2 MB. Whole wins.
		{"auto, 1 unit", 1, ExpertsAuto, true, 1833333 * time.Nanosecond},
		{"split, 1 unit", 1, ExpertsSplit, false, 2500 * time.Microsecond},
		// Units unknown: columns divide exactly, half of both experts
		// each: 0.5 + 1 MB, under 0.5 + 4/3. Columns win.
		{"auto, units unknown", 0, ExpertsAuto, false, 1500 * time.Microsecond},
		{"whole, units unknown", 0, ExpertsWhole, true, 1833333 * time.Nanosecond},
	} {
		cs, err := Candidates(moeModel(tc.units), nodes, net, Options{}, CostOptions{Experts: tc.experts})
		if err != nil {
			t.Fatal(err)
		}
		c := byName(t, cs, "TP 2-way")
		g := c.Stages[0]
		if !g.MoE || g.ExpertParallel != tc.whole {
			t.Errorf("%s: MoE %v, expert parallel %v, want %v", tc.name, g.MoE, g.ExpertParallel, tc.whole)
		}
		if d := c.Weights - tc.weights; d < -2 || d > 2 || c.Links != links {
			t.Errorf("%s: weights %v links %v, want %v %v", tc.name, c.Weights, c.Links, tc.weights, links)
		}
		if want := 1e9 / float64(tc.weights+links); math.Abs(c.TokensPerSecond-want) > 1e-3 {
			t.Errorf("%s: %.4f tok/s, want %.4f", tc.name, c.TokensPerSecond, want)
		}
		if one := byName(t, cs, "1 node"); one.Stages[0].MoE || one.Weights != 3*time.Millisecond {
			t.Errorf("%s: one node reads %v (3 ms: every active byte)", tc.name, one.Weights)
		}
	}
	// The hand-computed speed of the first case, in tok/s.
	cs, _ := Candidates(moeModel(1), nodes, net, Options{}, CostOptions{})
	if c := byName(t, cs, "TP 2-way"); math.Abs(c.TokensPerSecond-468.75) > 0.01 {
		t.Errorf("TP 2-way, experts whole: %.3f tok/s, want 1/(1.8333+0.3 ms) = 468.75", c.TokensPerSecond)
	}
}

// The members' memory holds the layout chosen: with one unit per expert a
// column split puts every expert's columns on the first member.
func TestExpertBytes(t *testing.T) {
	nodes := []Node{{ID: "a", FreeBytes: 4e6, MemBandwidth: 1e9}, {ID: "b", FreeBytes: 4e6, MemBandwidth: 1e9}}
	for _, tc := range []struct {
		experts ExpertMode
		bytes   [2]uint64
		refusal string
	}{
		// Half of the 1 MB of other weights each, plus all 4 MB of experts
		// on a (it offers 4 MB) or 2 of the 4 each.
		{ExpertsSplit, [2]uint64{4.5e6, 0.5e6}, "a would hold 4.5 MB, offers 4.0 MB"},
		{ExpertsWhole, [2]uint64{2.5e6, 2.5e6}, ""},
	} {
		cs, err := Candidates(moeModel(1), nodes, Network{}, Options{}, CostOptions{Experts: tc.experts})
		if err != nil {
			t.Fatal(err)
		}
		c := byName(t, cs, "TP 2-way")
		if got := [2]uint64{c.Stages[0].Members[0].Bytes, c.Stages[0].Members[1].Bytes}; got != tc.bytes || c.Refusal != tc.refusal {
			t.Errorf("%v: members hold %v (refusal %q), want %v (%q)", tc.experts, got, c.Refusal, tc.bytes, tc.refusal)
		}
	}
}

// Real shapes: Qwen3-235B-A22B at Q4_K splits each expert into 6 units
// of 256 columns, which 4 equal members share 2, 2, 1, 1: the busiest
// reads 8 × 2/6 = 2.67 experts' bytes per token, against 3.49 whole
// experts expected of the busiest of 4 holding 32 each: columns. With
// experts of one unit (a small expert FFN) the busiest member of a column
// split reads all 8: whole experts win.
func TestChooseExperts(t *testing.T) {
	s := model.Shapes["qwen3-235b-a22b"]
	if u := s.ExpertFFNUnits(tensor.Q4_K); u != 6 {
		t.Fatalf("qwen3-235b-a22b Q4_K: %d units per expert, want 6", u)
	}
	m := FromProfile("qwen3-235b-a22b", s.Profile(tensor.Q4_K))
	m.ExpertFFNUnits = 6
	nodes := func(n int) []Node {
		var ns []Node
		for i := range n {
			ns = append(ns, Node{ID: string(rune('a' + i)), FreeBytes: 512e9, MemBandwidth: 800e9})
		}
		return ns
	}
	net := Network{Default: LinkPresets["rdma"]}
	group := func(m Model, n int, co CostOptions, name string) Group {
		t.Helper()
		cs, err := Candidates(m, nodes(n), net, Options{}, co)
		if err != nil {
			t.Fatal(err)
		}
		c := byName(t, cs, name)
		if c.Refusal != "" {
			t.Fatalf("%s: %s", name, c.Refusal)
		}
		return c.Stages[0]
	}
	g := group(m, 4, CostOptions{}, "TP 4-way")
	if !g.MoE || g.ExpertParallel {
		t.Errorf("qwen3-235b TP 4-way, 6 units: MoE %v expert parallel %v, want columns", g.MoE, g.ExpertParallel)
	}
	if math.Abs(g.ExpertReads[0]-8.0/3) > 1e-9 || math.Abs(g.ExpertReads[1]-model.ExpertsReadPerToken(128, 8, []int{32, 32, 32, 32})) > 1e-9 {
		t.Errorf("qwen3-235b TP 4-way: expert reads %v, want [2.667 3.486]", g.ExpertReads)
	}
	if g := group(m, 4, CostOptions{Experts: ExpertsWhole}, "TP 4-way"); !g.ExpertParallel {
		t.Errorf("--experts whole: columns")
	}

	tiny := m
	tiny.ExpertFFNUnits = 1
	for _, n := range []int{2, 3} {
		name := map[int]string{2: "TP 2-way", 3: "TP 3-way"}[n]
		if g := group(tiny, n, CostOptions{}, name); !g.ExpertParallel {
			t.Errorf("1 unit per expert, %s: columns chosen (expert reads %v)", name, g.ExpertReads)
		}
		if g := group(tiny, n, CostOptions{Experts: ExpertsSplit}, name); g.ExpertParallel {
			t.Errorf("--experts split, %s: whole experts", name)
		}
	}
	// A pipeline (groups of one) holds experts whole and makes no choice.
	if g := group(tiny, 2, CostOptions{}, "pipeline of 2"); g.MoE || g.ExpertParallel {
		t.Errorf("pipeline stage: MoE %v expert parallel %v", g.MoE, g.ExpertParallel)
	}

	// The choice reaches the plan the cluster loads, and its printout.
	p, err := PlaceMode(tiny, nodes(3), net, Options{}, CostOptions{}, TensorParallel)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stages) != 1 || len(p.Stages[0].TP) != 3 || !p.Stages[0].ExpertParallel || !strings.Contains(p.String(), "experts whole per member") {
		t.Errorf("plan:\n%s", p)
	}
	p, err = PlaceMode(m, nodes(3), net, Options{}, CostOptions{}, TensorParallel)
	if err != nil {
		t.Fatal(err)
	}
	if p.Stages[0].ExpertParallel || !strings.Contains(p.String(), "each expert split") {
		t.Errorf("plan:\n%s", p)
	}
	cs, _ := Candidates(m, nodes(4), net, Options{}, CostOptions{})
	if tab := Table(cs); !strings.Contains(tab, "a+b+c+d (each expert split)") {
		t.Errorf("table:\n%s", tab)
	}
	best, _ := Best(cs)
	t.Log(Explain(best, cs))
}

func TestParseExpertMode(t *testing.T) {
	for s, want := range map[string]ExpertMode{"auto": ExpertsAuto, "Split": ExpertsSplit, " whole": ExpertsWhole} {
		if got, err := ParseExpertMode(s); err != nil || got != want {
			t.Errorf("%q: %v %v", s, got, err)
		}
	}
	if _, err := ParseExpertMode("columns"); err == nil {
		t.Error("columns parsed")
	}
}

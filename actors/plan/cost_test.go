package plan

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"strata/runtime/model"
	"strata/runtime/tensor"
)

// costModel is two 1 GB layers (0.2 GB of attention over 2 KV heads), a
// 0.1 GB embedding and head, 1000-wide activations and vocabulary.
func costModel() Model {
	return Model{Name: "m", LayerBytes: []uint64{1e9, 1e9}, ActiveLayerBytes: []uint64{1e9, 1e9}, AttnLayerBytes: []uint64{2e8, 2e8},
		EmbedBytes: 1e8, HeadBytes: 1e8, Embd: 1000, KVHeads: 2, Vocab: 1000}
}

func byName(t *testing.T, cs []Candidate, name string) Candidate {
	t.Helper()
	for _, c := range cs {
		if c.Name() == name {
			return c
		}
	}
	t.Fatalf("no candidate %q", name)
	return Candidate{}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Abs(b) }

// The predictions worked out by hand (see the comments).
func TestPredictByHand(t *testing.T) {
	nodes := []Node{{ID: "a", FreeBytes: 10e9, MemBandwidth: 1e11}, {ID: "b", FreeBytes: 10e9, MemBandwidth: 1e11}}
	net := Network{Default: Link{Latency: 10 * time.Microsecond, Throughput: 1e9}}
	cs, err := Candidates(costModel(), nodes, net, Options{}, CostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		weights, links   time.Duration
		allReduces, hops int
	}{
		// 2.1 GB at 100 GB/s.
		{"1 node", 21 * time.Millisecond, 0, 0, 0},
		// Half of each layer (5 ms each) and half the head (0.5 ms); four
		// all-reduces of 4000 bytes (10 + 4 µs each), and the other half
		// of 1000 f32 logits gathered (10 + 2 µs).
		{"TP 2-way", 10500 * time.Microsecond, 4*14*time.Microsecond + 12*time.Microsecond, 4, 0},
		// All 2.1 GB one stage after the other; 4000 bytes a→b (14 µs),
		// the 4-byte token b→a (10.004 µs).
		{"pipeline of 2", 21 * time.Millisecond, 14*time.Microsecond + 10004*time.Nanosecond, 0, 2},
	} {
		c := byName(t, cs, tc.name)
		if c.Refusal != "" {
			t.Fatalf("%s: %s", tc.name, c.Refusal)
		}
		if c.Weights != tc.weights || c.Links != tc.links || c.AllReduces != tc.allReduces || c.Hops != tc.hops {
			t.Errorf("%s: weights %v links %v all-reduces %d hops %d, want %v %v %d %d", tc.name, c.Weights, c.Links, c.AllReduces, c.Hops, tc.weights, tc.links, tc.allReduces, tc.hops)
		}
		if !near(c.TokensPerSecond, 1e9/float64(tc.weights+tc.links)) {
			t.Errorf("%s: %v tok/s", tc.name, c.TokensPerSecond)
		}
	}
	best, ok := Best(cs)
	if !ok || best.Name() != "TP 2-way" {
		t.Errorf("best %s", best.Name())
	}
	if e := Explain(best, cs); !strings.Contains(e, "TP 2-way") || !strings.Contains(e, "1.99x one node") {
		t.Errorf("explanation: %s", e)
	}

	// a reads 4x faster (weights 8:2): 4/5 of the FFN and head, and both
	// KV heads (1.6 of them by share, rounded by largest remainder): a's
	// layer takes (0.2 + 0.8*4/5) GB / 400 GB/s = 2.1 ms, b's 0.16 GB /
	// 100 GB/s = 1.6 ms.
	nodes[0].MemBandwidth = 4e11
	cs, _ = Candidates(costModel(), nodes, net, Options{}, CostOptions{})
	c := byName(t, cs, "TP 2-way")
	if m := c.Stages[0].Members; m[0].Heads != 1 || m[1].Heads != 0 || m[0].Share != 0.8 {
		t.Fatalf("members %+v", m)
	}
	if want := (2*(2e8+0.8*8e8) + 0.8*1e8) / 4e11; !near(c.Weights.Seconds(), want) {
		t.Errorf("uneven TP: weights %v, want %.6fs", c.Weights, want)
	}
}

// Random models and clusters: a candidate that fits puts no more on a
// member than it offers and covers every layer once; with equal nodes a
// pipeline is never faster than one node; more latency never speeds a
// plan up; Best is the fastest that fits.
func TestCandidatesProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 300; iter++ {
		L := 1 + r.IntN(40)
		m := Model{Name: "r", EmbedBytes: r.Uint64N(1e9), HeadBytes: r.Uint64N(1e9), KVBytesPerToken: r.Uint64N(1 << 16),
			Embd: 1 + r.IntN(8192), KVHeads: 1 + r.IntN(16), Vocab: 1 + r.IntN(200000)}
		for l := 0; l < L; l++ {
			b := 1 + r.Uint64N(4e9)
			m.LayerBytes = append(m.LayerBytes, b)
			m.ActiveLayerBytes = append(m.ActiveLayerBytes, b/(1+r.Uint64N(4)))
			m.AttnLayerBytes = append(m.AttnLayerBytes, m.ActiveLayerBytes[l]/(1+r.Uint64N(5)))
		}
		var nodes []Node
		bw := 1e9 + r.Float64()*1e12
		for i := 0; i < 1+r.IntN(5); i++ {
			nodes = append(nodes, Node{ID: string(rune('a' + i)), FreeBytes: r.Uint64N(100e9), MemBandwidth: bw})
		}
		o := Options{Context: 1 + r.IntN(4096)}
		fast := Network{Default: Link{Latency: time.Duration(r.IntN(1000)) * time.Microsecond, Throughput: 1e8 + r.Float64()*1e10}}
		slow := fast
		slow.Default.Latency += time.Millisecond
		cf, err := Candidates(m, nodes, fast, o, CostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cs, _ := Candidates(m, nodes, slow, o, CostOptions{})
		var one float64
		for i, c := range cf {
			if c.Refusal != "" {
				continue
			}
			next := 0
			for _, g := range c.Stages {
				if g.First != next || g.End <= g.First {
					t.Fatalf("%s: stage [%d,%d) after %d", c.Name(), g.First, g.End, next)
				}
				next = g.End
				for _, mb := range g.Members {
					if mb.Bytes > usable(nodeByID(nodes, mb.Node), o.withDefaults()) {
						t.Fatalf("%s: %s holds %d of %d", c.Name(), mb.Node, mb.Bytes, nodeByID(nodes, mb.Node).FreeBytes)
					}
				}
			}
			if next != L {
				t.Fatalf("%s covers %d of %d layers", c.Name(), next, L)
			}
			if c.Kind() == "single node" {
				one = c.TokensPerSecond
			}
			if c.Kind() == "pipeline" && one > 0 && c.TokensPerSecond > one*(1+1e-9) {
				t.Fatalf("%s: %v tok/s, one node %v", c.Name(), c.TokensPerSecond, one)
			}
			if cs[i].TokensPerSecond > c.TokensPerSecond*(1+1e-9) && c.Nodes() > 1 {
				t.Fatalf("%s: slower links, faster plan", c.Name())
			}
		}
		if best, ok := Best(cf); ok {
			for _, c := range cf {
				if c.Refusal == "" && c.TokensPerSecond > best.TokensPerSecond {
					t.Fatalf("best %s %v, %s %v", best.Name(), best.TokensPerSecond, c.Name(), c.TokensPerSecond)
				}
			}
		}
	}
}

// The seeds' case (issue 15): four 512 GB M3 Ultras at 800 GB/s. Over
// RDMA, tensor parallelism must win and scale; over TCP's 300 µs a
// message, 188 all-reduces per token cost more than they save.
func TestSeedsCluster(t *testing.T) {
	m := FromProfile("qwen3-235b-a22b", model.Shapes["qwen3-235b-a22b"].Profile(tensor.Q4_K))
	var nodes []Node
	for _, id := range []string{"a", "b", "c", "d"} {
		nodes = append(nodes, Node{ID: id, FreeBytes: 512e9, MemBandwidth: 800e9})
	}
	rdma, _ := Candidates(m, nodes, Network{Default: LinkPresets["rdma"]}, Options{}, CostOptions{})
	tcp, _ := Candidates(m, nodes, Network{Default: LinkPresets["tcp"]}, Options{}, CostOptions{})
	one := byName(t, rdma, "1 node").TokensPerSecond
	// 22B active parameters at Q4_K are about 12.3 GB a token: 65 tok/s.
	if one < 55 || one > 75 {
		t.Errorf("one node: %.1f tok/s", one)
	}
	b, _ := Best(rdma)
	if b.Name() != "TP 4-way" || b.TokensPerSecond < 2*one {
		t.Errorf("RDMA: chose %s at %.1f tok/s (one node %.1f)", b.Name(), b.TokensPerSecond, one)
	}
	if b, _ := Best(tcp); b.Kind() == "tensor-parallel" || b.Kind() == "hybrid" {
		t.Errorf("TCP: chose %s", b.Name())
	}
	t.Logf("\n%s", Table(rdma))
}

func TestParseLink(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Link
		err  bool
	}{
		{"rdma", LinkPresets["rdma"], false},
		{"TCP", LinkPresets["tcp"], false},
		{"5us,9GB/s", Link{5 * time.Microsecond, 9e9}, false},
		{"0.3ms, 1.25GB/s", Link{300 * time.Microsecond, 1.25e9}, false},
		{"5µs,9GB/s", Link{5 * time.Microsecond, 9e9}, false},
		{"fast", Link{}, true},
		{"5us", Link{}, true},
		{"-1us,9GB/s", Link{}, true},
		{"5us,0GB/s", Link{}, true},
	} {
		got, err := ParseLink(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseLink(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestTPWeightsIgnoreMeasurementNoise: the slices of a tensor-parallel
// group do not move when the members' measured bandwidth wobbles (two
// runs on the same machines would otherwise add partial sums in another
// order and part from one node's answer at different tokens), and still
// follow a real difference.
func TestTPWeightsIgnoreMeasurementNoise(t *testing.T) {
	for _, tc := range []struct {
		bw   []float64
		want []uint64
	}{
		{[]float64{19.1e9, 18.7e9, 19.6e9}, []uint64{8, 8, 8}}, // one host, measured three times
		{[]float64{19.6e9, 18.2e9}, []uint64{8, 7}},            // 7 % apart: a difference
		{[]float64{20e9, 10e9}, []uint64{8, 4}},
		{[]float64{10e9, 40e9}, []uint64{2, 8}},
		{[]float64{1e12, 1e9}, []uint64{8, 1}}, // never 0: a member with no share would hold nothing
		{[]float64{0, 0}, []uint64{8, 8}},      // unknown: the default for both
	} {
		nodes := make([]Node, len(tc.bw))
		for i, b := range tc.bw {
			nodes[i] = Node{ID: string(rune('a' + i)), MemBandwidth: b}
		}
		if got := TPWeights(nodes, CostOptions{}); !slices.Equal(got, tc.want) {
			t.Errorf("bandwidths %v: weights %v, want %v", tc.bw, got, tc.want)
		}
	}
}

package plan

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

const GB = 1_000_000_000

func uniform(layers int, layerBytes, embed, head, kvPerToken uint64) Model {
	m := Model{Name: "m", EmbedBytes: embed, HeadBytes: head, KVBytesPerToken: kvPerToken}
	for i := 0; i < layers; i++ {
		m.LayerBytes = append(m.LayerBytes, layerBytes)
	}
	return m
}

// check asserts the invariants every plan keeps.
func check(t *testing.T, m Model, nodes []Node, o Options, p Plan) {
	t.Helper()
	o = o.withDefaults()
	free := map[string]uint64{}
	for _, n := range nodes {
		free[n.ID] = usable(n, o)
	}
	next := 0
	used := map[string]bool{}
	for i, s := range p.Stages {
		if s.First != next || s.End <= s.First {
			t.Fatalf("stage %d covers [%d,%d), expected to start at %d", i, s.First, s.End, next)
		}
		next = s.End
		if used[s.Node] {
			t.Fatalf("node %s used twice", s.Node)
		}
		used[s.Node] = true
		if s.WeightBytes+s.KVBytes > free[s.Node] {
			t.Fatalf("stage %d on %s: %d bytes, node offers %d", i, s.Node, s.WeightBytes+s.KVBytes, free[s.Node])
		}
		if s.Embed != (i == 0) || s.Head != (i == len(p.Stages)-1) {
			t.Fatalf("stage %d embed/head flags %v/%v", i, s.Embed, s.Head)
		}
	}
	if next != m.Layers() {
		t.Fatalf("layers covered up to %d of %d", next, m.Layers())
	}
}

func TestProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	placed, refused := 0, 0
	for iter := 0; iter < 3000; iter++ {
		m := Model{Name: "rand", EmbedBytes: r.Uint64N(5 * GB), HeadBytes: r.Uint64N(5 * GB), KVBytesPerToken: r.Uint64N(1 << 20)}
		layers := 1 + r.IntN(100)
		for i := 0; i < layers; i++ {
			m.LayerBytes = append(m.LayerBytes, 1+r.Uint64N(4*GB))
		}
		var nodes []Node
		for i := 0; i < 1+r.IntN(8); i++ {
			n := Node{ID: fmt.Sprintf("n%d", i), FreeBytes: r.Uint64N(300 * GB)}
			if r.IntN(2) == 0 {
				n.Compute = r.Float64() * 100
			}
			nodes = append(nodes, n)
		}
		o := Options{Context: 1 + r.IntN(8192)}
		p, err := Place(m, nodes, o)
		if err != nil {
			var re *RefusalError
			if !errors.As(err, &re) {
				t.Fatalf("unexpected error %v", err)
			}
			refused++
			continue
		}
		placed++
		check(t, m, nodes, o, p)
		// Same inputs in any order give the same plan.
		shuffled := append([]Node(nil), nodes...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if q, err := Place(m, shuffled, o); err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("node order changed the plan: %v\n%v\n%v", err, p, q)
		}
	}
	if placed < 500 || refused < 100 {
		t.Errorf("random cases not varied enough: %d placed, %d refused", placed, refused)
	}
}

func TestFewestStages(t *testing.T) {
	m := uniform(22, 1*GB, 1*GB, 1*GB, 0)
	// One node holds everything: one stage, even with others around.
	p, err := Place(m, []Node{{ID: "big", FreeBytes: 30 * GB}, {ID: "a", FreeBytes: 10 * GB}, {ID: "b", FreeBytes: 10 * GB}}, Options{})
	if err != nil || len(p.Stages) != 1 || p.Stages[0].Node != "big" {
		t.Fatalf("%v %v", p, err)
	}
	// Needs 24 GB: two 13 GB nodes suffice; the third stays out.
	p, err = Place(m, []Node{{ID: "a", FreeBytes: 13 * GB}, {ID: "b", FreeBytes: 13 * GB}, {ID: "c", FreeBytes: 13 * GB}}, Options{})
	if err != nil || len(p.Stages) != 2 {
		t.Fatalf("%v %v", p, err)
	}
}

func TestProportionalToCompute(t *testing.T) {
	m := uniform(30, 1*GB, 0, 0, 0)
	nodes := []Node{{ID: "fast", FreeBytes: 20 * GB, Compute: 2}, {ID: "slow", FreeBytes: 20 * GB, Compute: 1}}
	p, err := Place(m, nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Both are needed (30 GB); layers follow compute 2:1 = 20:10, capped by memory at 20.
	if got := []int{p.Stages[0].End - p.Stages[0].First, p.Stages[1].End - p.Stages[1].First}; !reflect.DeepEqual(got, []int{20, 10}) {
		t.Errorf("layers %v, want [20 10]\n%v", got, p)
	}
	// Memory caps win over compute: the fast node only holds 12.
	nodes[0].FreeBytes = 12 * GB
	p, err = Place(m, nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Stages {
		if s.Node == "fast" && s.End-s.First != 12 {
			t.Errorf("fast holds %d layers, memory allows 12\n%v", s.End-s.First, p)
		}
	}
}

// TestBalancesTheHead: the last stage also reads the output head every
// token, so with equal nodes it takes fewer layers (tinyllama's shape: 22
// layers, a head of 1.8 layers' bytes, an embedding only looked up);
// with compute 2:1 the split follows compute with the head counted; and
// a node's memory still caps what it takes.
func TestBalancesTheHead(t *testing.T) {
	m := uniform(22, 100, 177, 177, 0)
	layers := func(p Plan) []int {
		var n []int
		for _, s := range p.Stages {
			n = append(n, s.End-s.First)
		}
		return n
	}
	nodes := []Node{{ID: "a", FreeBytes: 1200}, {ID: "b", FreeBytes: 1200}, {ID: "c", FreeBytes: 1200}}
	p, err := Place(m, nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, m, nodes, Options{}, p)
	if got := layers(p); !reflect.DeepEqual(got, []int{8, 8, 6}) {
		t.Errorf("layers %v, want [8 8 6] (the head's 1.8 layers on the last)\n%v", got, p)
	}
	// Active bytes, where known, are the work (a mixture's routed experts
	// are read only in part): here every layer but the first reads little.
	ma := m
	ma.ActiveLayerBytes = slices.Repeat([]uint64{10}, 22)
	ma.ActiveLayerBytes[0] = 200
	if p, err = Place(ma, nodes, Options{}); err != nil {
		t.Fatal(err)
	}
	check(t, ma, nodes, Options{}, p)
	if got := layers(p); got[0] >= got[1] {
		t.Errorf("layers %v: the first stage, with the heavy layer, should hold fewer\n%v", got, p)
	}
	nodes = []Node{{ID: "fast", FreeBytes: 2000, Compute: 2}, {ID: "slow", FreeBytes: 2000, Compute: 1}}
	if p, err = Place(m, nodes, Options{}); err != nil {
		t.Fatal(err)
	}
	check(t, m, nodes, Options{}, p)
	// 22 + 1.77 layers of work at 2:1: 15.8 and 7.9, the slow one's
	// including the head: 16 and 6 (6 + 1.77 = 7.77 against 16/2 = 8).
	if got := layers(p); !reflect.DeepEqual(got, []int{16, 6}) {
		t.Errorf("layers %v, want [16 6]\n%v", got, p)
	}
	// Memory caps what balancing moves: balanced, the first of two equal
	// nodes would take 12 layers (1200 against 10 + the head, 1177), but
	// its memory holds the embedding and 11.
	nodes = []Node{{ID: "a", FreeBytes: 177 + 11*100}, {ID: "b", FreeBytes: 177 + 11*100}}
	if p, err = Place(m, nodes, Options{}); err != nil {
		t.Fatal(err)
	}
	check(t, m, nodes, Options{}, p)
	if got := layers(p); !reflect.DeepEqual(got, []int{11, 11}) {
		t.Errorf("layers %v, want [11 11]\n%v", got, p)
	}
}

func TestRefusalExplains(t *testing.T) {
	m := uniform(80, 1.75*GB, 1*GB, 1*GB, 2<<20)
	_, err := Place(m, []Node{{ID: "a", FreeBytes: 32 * GB}, {ID: "b", FreeBytes: 32 * GB}, {ID: "c", FreeBytes: 32 * GB}}, Options{Context: 4096})
	var re *RefusalError
	if !errors.As(err, &re) || re.Fragmentation {
		t.Fatalf("%v", err)
	}
	want := "cannot place m: needs 142.0 GB for weights + 8.6 GB KV (context 4096 × 1 session(s)); the cluster offers 96.0 GB across 3 node(s)"
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	// Enough in total, but no layer fits anywhere.
	_, err = Place(uniform(2, 10*GB, 0, 0, 0), []Node{{ID: "a", FreeBytes: 8 * GB}, {ID: "b", FreeBytes: 8 * GB}, {ID: "c", FreeBytes: 8 * GB}}, Options{})
	if !errors.As(err, &re) || !re.Fragmentation || !strings.Contains(err.Error(), "largest layer 10.0 GB") {
		t.Errorf("fragmentation: %v", err)
	}
	if _, err := Place(m, nil, Options{}); err == nil {
		t.Error("no nodes accepted")
	}
	if _, err := Place(m, []Node{{ID: "a"}, {ID: "a"}}, Options{}); err == nil {
		t.Error("repeated node accepted")
	}
}

// A 1-trillion-parameter model on the four Mac Studios of docs/design.md.
func TestKimiK2OnMacStudios(t *testing.T) {
	nodes := []Node{{ID: "a", FreeBytes: 512 * GB}, {ID: "b", FreeBytes: 512 * GB}, {ID: "c", FreeBytes: 256 * GB}, {ID: "d", FreeBytes: 256 * GB}}
	k2 := model.Shapes["kimi-k2"]
	for _, c := range []struct {
		typ    tensor.Type
		stages int
	}{{tensor.Q4_K, 2}, {tensor.Q8_0, 3}, {tensor.F16, 0}} {
		m := FromProfile("kimi-k2", k2.Profile(c.typ))
		o := Options{Context: 8192}
		p, err := Place(m, nodes, o)
		if c.stages == 0 {
			if err == nil || !strings.Contains(err.Error(), "needs 2.05 TB for weights") || !strings.Contains(err.Error(), "offers 1.54 TB") {
				t.Errorf("%s: %v", c.typ, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		check(t, m, nodes, o, p)
		if len(p.Stages) != c.stages {
			t.Errorf("%s: %d stages, want %d\n%v", c.typ, len(p.Stages), c.stages, p)
		}
	}
}

func TestFromProfileTiedOutput(t *testing.T) {
	m := FromProfile("x", model.Profile{LayerBytes: []uint64{1}, EmbedBytes: 100, HeadBytes: 4, TiedOutput: true})
	if m.HeadBytes != 104 {
		t.Errorf("tied head bytes %d, want 104 (norm + the embedding as output)", m.HeadBytes)
	}
}

// Qwen3-235B-A22B: every layer carries its 128 experts, so a layer is one
// unit of placement and its bytes include all experts (active or not).
func TestQwen3MoEPlacement(t *testing.T) {
	q := model.Shapes["qwen3-235b-a22b"]
	m := FromProfile("qwen3-235b-a22b", q.Profile(tensor.Q4_K))
	if per := m.LayerBytes[0]; per < 1300e6 || per > 1450e6 {
		t.Fatalf("a Q4_K layer with 128 experts is %d bytes, want about 1.4 GB", per)
	}
	for _, c := range []struct {
		free   uint64
		stages int
	}{{512 * GB, 1}, {96 * GB, 2}, {48 * GB, 3}} {
		nodes := []Node{{ID: "a", FreeBytes: c.free}, {ID: "b", FreeBytes: c.free}, {ID: "c", FreeBytes: c.free}, {ID: "d", FreeBytes: c.free}}
		o := Options{Context: 8192}
		p, err := Place(m, nodes, o)
		if err != nil {
			t.Fatalf("%d GB nodes: %v", c.free/GB, err)
		}
		check(t, m, nodes, o, p)
		if len(p.Stages) != c.stages {
			t.Errorf("%d GB nodes: %d stages, want %d\n%v", c.free/GB, len(p.Stages), c.stages, p)
		}
	}
}

// Between nodes that cost the same, each stage goes to the node that
// already holds its layers; the split itself does not change, and the
// plan is the same whatever the input order.
func TestPlacementPrefersHolders(t *testing.T) {
	m := uniform(8, GB, GB/2, GB/2, 0)
	held := func(first, end int) []bool {
		h := make([]bool, 8)
		for l := first; l < end; l++ {
			h[l] = true
		}
		return h
	}
	base := []Node{{ID: "a", FreeBytes: 6 * GB}, {ID: "b", FreeBytes: 6 * GB}, {ID: "c", FreeBytes: 6 * GB}}
	plain, err := Place(m, base, Options{Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Stages) != 2 || plain.Stages[0].Node != "a" || plain.Stages[1].Node != "b" {
		t.Fatalf("without holders: %v", plain)
	}
	for _, tc := range []struct {
		name  string
		held  map[string][]bool
		nodes []string // stage nodes expected
	}{
		{"c holds the second half", map[string][]bool{"c": held(4, 8)}, []string{"a", "c"}},
		{"c holds the first half", map[string][]bool{"c": held(0, 4)}, []string{"c", "a"}},
		{"c holds all, b the second half", map[string][]bool{"c": held(0, 8), "b": held(4, 8)}, []string{"c", "b"}},
		{"b holds one layer of the first stage", map[string][]bool{"b": held(2, 3)}, []string{"b", "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := append([]Node(nil), base...)
			for i := range nodes {
				nodes[i].Held = tc.held[nodes[i].ID]
			}
			for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}} {
				in := []Node{nodes[order[0]], nodes[order[1]], nodes[order[2]]}
				p, err := Place(m, in, Options{Context: 16})
				if err != nil {
					t.Fatal(err)
				}
				check(t, m, in, Options{Context: 16}, p)
				var got []string
				for i, s := range p.Stages {
					got = append(got, s.Node)
					if s.First != plain.Stages[i].First || s.End != plain.Stages[i].End {
						t.Fatalf("split changed: %v vs %v", p, plain)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.nodes) {
					t.Fatalf("order %v: stages on %v, want %v", order, got, tc.nodes)
				}
			}
		})
	}
	// A holder that cannot fit the stage, or computes at a very different
	// rate (the split would not be the same), is not preferred: cost first.
	for _, c := range []Node{{ID: "c", FreeBytes: 4 * GB, Compute: 2, Held: held(0, 8)}, {ID: "c", FreeBytes: 6 * GB, Compute: 1, Held: held(0, 8)}} {
		nodes := append([]Node(nil), base...)
		for i := range nodes {
			nodes[i].Compute, nodes[i].FreeBytes = 2, 7*GB
		}
		nodes[2] = c
		p, err := Place(m, nodes, Options{Context: 16})
		if err != nil || p.Stages[0].Node != "a" || p.Stages[1].Node != "b" {
			t.Fatalf("holder %+v: %v %v", c, p, err)
		}
	}
	// Measured rates a little apart count as the same.
	nodes := []Node{{ID: "a", FreeBytes: 6 * GB, Compute: 100}, {ID: "b", FreeBytes: 6 * GB, Compute: 104}, {ID: "c", FreeBytes: 6 * GB, Compute: 98, Held: held(4, 8)}}
	p, err := Place(m, nodes, Options{Context: 16})
	if err != nil || p.Stages[len(p.Stages)-1].Node != "c" {
		t.Fatalf("holder with a near rate: %v %v", p, err)
	}
}

// Memory is announced by the members themselves: claims whose sum
// overflows must not wrap to a refusal.
func TestHugeMemoryClaims(t *testing.T) {
	m := uniform(8, 1*GB, 1*GB, 1*GB, 1<<10)
	nodes := []Node{{ID: "a", FreeBytes: 1 << 63}, {ID: "b", FreeBytes: 1 << 63}}
	p, err := Place(m, nodes, Options{Context: 1024})
	if err != nil {
		t.Fatal(err)
	}
	check(t, m, nodes, Options{Context: 1024}, p)
}

// The KV cache a plan reserves is the one the shards make: for each cache
// type (Options.KVType, the nodes' --kv-type), the stages' KV bytes add
// up to the cache a model loaded with that type allocates for the
// context (a llama and a multi-head latent attention model), and, on the
// model of equal layers, a smaller type fits where a larger one does not.
func TestPlanKVType(t *testing.T) {
	for _, shape := range []string{"llama3-tiny", "deepseek2-tiny"} {
		t.Run(shape, func(t *testing.T) {
			s, err := model.LookupShape(shape)
			if err != nil {
				t.Fatal(err)
			}
			f, prof := synthQ8(t, s)
			mod, err := model.Load(f, 0, prof.Layers)
			if err != nil {
				t.Fatal(err)
			}
			m := FromProfile(shape, prof)
			const ctx = 512
			need := map[model.KVType]uint64{}
			for _, kt := range []model.KVType{model.KVF16, model.KVQ8_0, model.KVF32} {
				if err := mod.SetKVType(kt); err != nil {
					t.Fatal(err)
				}
				want := mod.CacheBytes(ctx)
				opts := Options{Context: ctx, KVType: kt}
				p, err := Place(m, []Node{{ID: "a", FreeBytes: 1 << 40}, {ID: "b", FreeBytes: 1}}, opts)
				if err != nil {
					t.Fatal(err)
				}
				var got uint64
				for _, s := range p.Stages {
					got += s.KVBytes
				}
				if got != want || m.KVPerToken(opts)*ctx != want {
					t.Errorf("%v: plan reserves %d KV bytes (%d per token), the cache takes %d", kt, got, m.KVPerToken(opts), want)
				}
				need[kt] = m.WeightBytes() + want
			}
			if slices.Min(m.LayerBytes) != slices.Max(m.LayerBytes) {
				return // placement counts the largest layer for each: no exact fit
			}
			// Room for the weights and the q8_0 cache only: f16 and f32
			// are refused.
			room := []Node{{ID: "a", FreeBytes: need[model.KVQ8_0]}}
			if _, err := Place(m, room, Options{Context: ctx, KVType: model.KVQ8_0}); err != nil {
				t.Errorf("q8_0 cache: %v", err)
			}
			for _, kt := range []model.KVType{model.KVF16, model.KVF32} {
				if _, err := Place(m, room, Options{Context: ctx, KVType: kt}); err == nil {
					t.Errorf("%v cache placed in the room of the q8_0 one", kt)
				}
			}
		})
	}
}

// A stage's weight bytes (what placement plans and a host reserves) are
// the bytes of the tensors model.Load maps for it, for every stage of
// every cut of models with a separate head, a tied one, rope factors
// outside the layers, experts and MLA.
func TestStageBytesIsWhatAShardMaps(t *testing.T) {
	tied, err := model.LookupShape("qwen3-tiny")
	if err != nil {
		t.Fatal(err)
	}
	tied.Name, tied.TiedEmbed, tied.Layers = "qwen3-tiny-tied", true, 3
	shapes := []model.Shape{tied}
	for _, name := range []string{"llama3-tiny", "qwen2-tiny", "qwen3moe-tiny", "deepseek2-tiny"} {
		s, err := model.LookupShape(name)
		if err != nil {
			t.Fatal(err)
		}
		shapes = append(shapes, s)
	}
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			f, prof := synthQ8(t, s)
			m := FromProfile(s.Name, prof)
			if s.TiedEmbed != m.TiedOutput || s.RopeFreqs != (m.OtherBytes > 0) {
				t.Fatalf("shape tied %v rope factors %v, profile tied %v other %d bytes", s.TiedEmbed, s.RopeFreqs, m.TiedOutput, m.OtherBytes)
			}
			L := m.Layers()
			for first := 0; first < L; first++ {
				for end := first + 1; end <= L; end++ {
					shard, err := model.Load(f, first, end)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := m.StageBytes(first, end), shard.MappedBytes; got != want {
						t.Errorf("layers [%d,%d): StageBytes %d, Load maps %d", first, end, got, want)
					}
				}
			}
			if m.WeightBytes() != prof.TotalBytes() {
				t.Errorf("WeightBytes %d, the file's weights %d", m.WeightBytes(), prof.TotalBytes())
			}
		})
	}
}

// synthQ8 writes shape s as a Q8_0 file (seed 1) for this test, and
// opens it and reads its profile.
func synthQ8(t *testing.T, s model.Shape) (*gguf.File, model.Profile) {
	t.Helper()
	path := filepath.Join(t.TempDir(), s.Name+".gguf")
	if err := synth.WriteFile(path, s, synth.Options{Type: tensor.Q8_0, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	prof, err := model.ProfileOf(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, prof
}

package model

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// moeModel is a one-layer model holding only a MoE FFN with every option
// on: sigmoid gating, a selection bias, 4 groups of which 2 are kept,
// renormalised and scaled weights, a shared expert.
func moeModel(t *testing.T) (*Model, *MoE) {
	c := Config{Arch: "test", Embd: 32, Layers: 1, Heads: 1, KVHeads: 1, HeadDim: 32, RopeDim: 32,
		Experts: 8, ExpertsUsed: 3, ExpertFFN: 32, SharedExperts: 1, Gating: GatingSigmoid,
		ExpertGroups: 4, ExpertGroupsUsed: 2, ExpertWeightsNorm: true, ExpertWeightsScale: 2.5}
	return moeModelOf(t, c, tensor.F32)
}

// moeModelOf is moeModel's MoE FFN for the config c, with experts of type
// typ (the router stays F32).
func moeModelOf(t *testing.T, c Config, typ tensor.Type) (*Model, *MoE) {
	r := rand.New(rand.NewPCG(3, 4))
	mat := func(typ tensor.Type, rows, cols int) tensor.Matrix {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = r.Float32()*2 - 1
		}
		b, err := tensor.Quantize(typ, v)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tensor.NewMatrix(typ, rows, cols, b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	dense := func(w int) Dense {
		return Dense{Gate: mat(typ, w, c.Embd), Up: mat(typ, w, c.Embd), Down: mat(typ, c.Embd, w)}
	}
	w := &MoE{Router: mat(tensor.F32, c.Experts, c.Embd), Bias: make([]float32, c.Experts)}
	if c.SharedExperts > 0 {
		w.Shared = dense(c.SharedExperts * c.ExpertFFN)
	}
	for e := 0; e < c.Experts; e++ {
		w.Bias[e] = r.Float32() - 0.5
		w.Experts = append(w.Experts, dense(c.ExpertFFN))
	}
	return &Model{Config: c, End: 0}, w // End 0: not the last shard, no head
}

// refMoE is the MoE FFN of one vector, spelled out in float64.
func refMoE(c Config, w *MoE, x []float32) []float64 {
	dot := func(m tensor.Matrix, r int, v []float64) float64 {
		row := make([]float32, m.Cols)
		m.EmbedRow(r, row)
		var s float64
		for i := range row {
			s += float64(row[i]) * v[i]
		}
		return s
	}
	xf := make([]float64, len(x))
	for i, v := range x {
		xf[i] = float64(v)
	}
	ffn := func(d Dense, v []float64) []float64 {
		h := make([]float64, d.Gate.Rows)
		for j := range h {
			g := dot(d.Gate, j, v)
			h[j] = g / (1 + math.Exp(-g)) * dot(d.Up, j, v)
		}
		out := make([]float64, d.Down.Rows)
		for j := range out {
			out[j] = dot(d.Down, j, h)
		}
		return out
	}
	probs, sel := make([]float64, c.Experts), make([]float64, c.Experts)
	for e := range probs {
		probs[e] = 1 / (1 + math.Exp(-dot(w.Router, e, xf)))
		sel[e] = probs[e] + float64(w.Bias[e])
	}
	per := c.Experts / c.ExpertGroups
	type group struct {
		g     int
		score float64
	}
	var groups []group
	for g := 0; g < c.ExpertGroups; g++ {
		s := append([]float64(nil), sel[g*per:(g+1)*per]...)
		sort.Float64s(s)
		groups = append(groups, group{g, s[per-1] + s[per-2]})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].score > groups[j].score })
	var cand []int
	for _, g := range groups[:c.ExpertGroupsUsed] {
		for e := g.g * per; e < (g.g+1)*per; e++ {
			cand = append(cand, e)
		}
	}
	sort.Slice(cand, func(i, j int) bool { return sel[cand[i]] > sel[cand[j]] })
	chosen := cand[:c.ExpertsUsed]
	var sum float64
	for _, e := range chosen {
		sum += probs[e]
	}
	out := ffn(w.Shared, xf)
	for _, e := range chosen {
		y := ffn(w.Experts[e], xf)
		for i := range out {
			out[i] += probs[e] / sum * float64(c.ExpertWeightsScale) * y[i]
		}
	}
	return out
}

// The MoE FFN equals the float64 reference for every token of a batch
// (tokens that share an expert run through it together), reads only the
// chosen experts, and allocates nothing.
func TestMixtureMatchesReference(t *testing.T) {
	m, w := moeModel(t)
	const n = 6
	pool := tensor.NewPool(2)
	defer pool.Close()
	s := m.NewState(pool, n, 8)
	r := rand.New(rand.NewPCG(9, 9))
	xb := make([]float32, n*m.Embd)
	for i := range xb {
		xb[i] = r.Float32()*2 - 1
	}
	out := make([]float32, n*m.Embd)
	for _, batch := range []int{n, 1} {
		for i0 := 0; i0 < n; i0 += batch {
			x := xb[i0*m.Embd : (i0+batch)*m.Embd]
			s.actEmbd.Set(x, batch)
			s.mixture(w, x, out[i0*m.Embd:(i0+batch)*m.Embd], batch)
		}
		for i := 0; i < n; i++ {
			want := refMoE(m.Config, w, xb[i*m.Embd:(i+1)*m.Embd])
			for j, v := range want {
				if d := math.Abs(float64(out[i*m.Embd+j]) - v); d > 1e-4*(1+math.Abs(v)) {
					t.Fatalf("batch %d, token %d, element %d: %v, want %v", batch, i, j, out[i*m.Embd+j], v)
				}
			}
		}
	}
	// One token reads the router, the shared expert and 3 of 8 experts.
	x := xb[:m.Embd]
	before := s.BytesRead()
	s.actEmbd.Set(x, 1)
	s.mixture(w, x, out[:m.Embd], 1)
	expert := int64(3 * m.Embd * m.ExpertFFN * 4)
	if got, want := s.BytesRead()-before, int64(len(w.Router.Data))+4*expert; got != want {
		t.Errorf("one token read %d weight bytes, want %d (router, shared and 3 experts)", got, want)
	}
	if a := testing.AllocsPerRun(20, func() {
		s.actEmbd.Set(xb, n)
		s.mixture(w, xb, out, n)
	}); a != 0 {
		t.Errorf("%v allocations per MoE batch", a)
	}
}

// The fast forms of the MoE FFN are bit for bit the reference form (each
// expert's tokens in one matrix product split by rows over the pool):
// one token's (mixOne: every chosen expert's rows as work items of one
// pool run) and a batch's with many experts (an expert per work item),
// for quantized and float experts, with and without a shared expert,
// serial and on a pool.
func TestMixtureFormsAgree(t *testing.T) {
	pool := tensor.NewPool(2)
	defer pool.Close()
	const batch = 16
	for _, typ := range []tensor.Type{tensor.F32, tensor.Q8_0, tensor.Q4_K, tensor.Q6_K} {
		for _, shared := range []int{0, 1} {
			c := Config{Arch: "test", Embd: 512, Layers: 1, Heads: 1, KVHeads: 1, HeadDim: 32, RopeDim: 32,
				Experts: 16, ExpertsUsed: 5, ExpertFFN: 256 + 256*shared, SharedExperts: shared,
				ExpertWeightsNorm: true}
			m, w := moeModelOf(t, c, typ)
			for _, p := range []*tensor.Pool{nil, pool} {
				s := m.NewState(p, batch, 8)
				r := rand.New(rand.NewPCG(5, uint64(shared)))
				x := make([]float32, batch*c.Embd)
				got, want := make([]float32, batch*c.Embd), make([]float32, batch*c.Embd)
				for _, n := range []int{1, 1, 1, batch, 9, 1} {
					for i := range x[:n*c.Embd] {
						x[i] = r.Float32()*2 - 1
					}
					for k, out := range [][]float32{got, want} {
						s.moe.byRows = k == 1
						s.actEmbd.Set(x[:n*c.Embd], n)
						s.mixture(w, x[:n*c.Embd], out[:n*c.Embd], n)
					}
					if n > 1 && p != nil && len(s.moe.active) < 8 {
						t.Fatalf("%d tokens routed to %d experts: the per-expert form did not run", n, len(s.moe.active))
					}
					for i := range got[:n*c.Embd] {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v, %d shared, pool %v, %d tokens, element %d: %v, reference form %v",
								typ, shared, p != nil, n, i, got[i], want[i])
						}
					}
				}
				s.moe.byRows = false
				for _, n := range []int{1, batch} {
					if a := testing.AllocsPerRun(5, func() {
						s.actEmbd.Set(x[:n*c.Embd], n)
						s.mixture(w, x[:n*c.Embd], got[:n*c.Embd], n)
					}); a != 0 {
						t.Errorf("%v, pool %v: %v allocations per MoE FFN of %d tokens", typ, p != nil, a, n)
					}
				}
			}
		}
	}
}

// Mixture-of-experts metadata that cannot work is refused with a reason.
func TestConfigMoEErrors(t *testing.T) {
	base := func() *gguf.Metadata {
		md := gguf.NewMetadata()
		for k, v := range map[string]any{"general.architecture": "qwen3moe", "qwen3moe.embedding_length": uint32(64), "qwen3moe.block_count": uint32(2),
			"qwen3moe.attention.head_count": uint32(4), "qwen3moe.attention.head_count_kv": uint32(2), "qwen3moe.context_length": uint32(128),
			"qwen3moe.expert_count": uint32(8), "qwen3moe.expert_used_count": uint32(2), "qwen3moe.expert_feed_forward_length": uint32(32)} {
			md.Set(k, v)
		}
		return md
	}
	c, err := ConfigOf(base())
	if err != nil || !c.IsMoE(0) || !c.ExpertWeightsNorm || c.Gating != GatingSoftmax || !c.QKNorm || !c.RopeNeox {
		t.Fatalf("qwen3moe config %+v: %v", c, err)
	}
	for name, edit := range map[string]func(*gguf.Metadata){
		"expert_count":               func(md *gguf.Metadata) { md.Delete("qwen3moe.expert_count") },
		"of 8 experts":               func(md *gguf.Metadata) { md.Set("qwen3moe.expert_used_count", uint32(9)) },
		"expert_feed_forward_length": func(md *gguf.Metadata) { md.Delete("qwen3moe.expert_feed_forward_length") },
		"groups":                     func(md *gguf.Metadata) { md.Set("qwen3moe.expert_group_count", uint32(3)) },
	} {
		md := base()
		edit(md)
		if _, err := ConfigOf(md); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

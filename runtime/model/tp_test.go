package model_test

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

func TestPlanTP(t *testing.T) {
	tiny := model.Config{Arch: "llama", Embd: 2048, FFN: 5632, Heads: 32, KVHeads: 4, HeadDim: 64}
	stories := model.Config{Arch: "llama", Embd: 64, FFN: 172, Heads: 8, KVHeads: 4, HeadDim: 8}
	qwen := model.Config{Arch: "qwen3moe", Embd: 4096, Heads: 64, KVHeads: 4, HeadDim: 128, Experts: 128, ExpertsUsed: 8, ExpertFFN: 1536}
	kimi := model.Config{Arch: "deepseek2", Embd: 7168, Heads: 64, KVHeads: 1, HeadDim: 192, Experts: 384, ExpertsUsed: 8, ExpertFFN: 2048, SharedExperts: 1,
		MLA: model.MLAConfig{KVLoraRank: 512, VDim: 128}}
	tests := []struct {
		name      string
		c         model.Config
		out, down tensor.Type
		vocab     int
		weights   []uint64
		opts      *model.TPOptions
		want      []model.TPSlice
		err       bool
	}{
		{"tinyllama Q8_0 2-way", tiny, tensor.Q8_0, tensor.Q8_0, 32000, []uint64{1, 1}, nil,
			[]model.TPSlice{{KVHeads: model.Range{0, 2}, FFN: model.Range{0, 2816}, Vocab: model.Range{0, 16000}}, {KVHeads: model.Range{2, 4}, FFN: model.Range{2816, 5632}, Vocab: model.Range{16000, 32000}}}, false},
		// 4 KV heads over 3: 2+1+1; 176 FFN blocks: 59+59+58.
		{"tinyllama Q8_0 3-way", tiny, tensor.Q8_0, tensor.Q8_0, 32000, []uint64{1, 1, 1}, nil,
			[]model.TPSlice{{KVHeads: model.Range{0, 2}, FFN: model.Range{0, 1888}, Vocab: model.Range{0, 10667}}, {KVHeads: model.Range{2, 3}, FFN: model.Range{1888, 3776}, Vocab: model.Range{10667, 21334}}, {KVHeads: model.Range{3, 4}, FFN: model.Range{3776, 5632}, Vocab: model.Range{21334, 32000}}}, false},
		// By compute 3:1 with Q4_K: 22 blocks of 256 → 16.5 (17) + 5.5 (5).
		{"tinyllama Q4_K 3:1", tiny, tensor.Q4_K, tensor.Q4_K, 32000, []uint64{3, 1}, nil,
			[]model.TPSlice{{KVHeads: model.Range{0, 3}, FFN: model.Range{0, 4352}, Vocab: model.Range{0, 24000}}, {KVHeads: model.Range{3, 4}, FFN: model.Range{4352, 5632}, Vocab: model.Range{24000, 32000}}}, false},
		// Five members, four KV heads: one member holds no heads.
		{"tinyllama 5-way", tiny, tensor.Q8_0, tensor.Q8_0, 10, []uint64{1, 1, 1, 1, 1}, nil,
			[]model.TPSlice{{KVHeads: model.Range{0, 1}, FFN: model.Range{0, 1152}, Vocab: model.Range{0, 2}}, {KVHeads: model.Range{1, 2}, FFN: model.Range{1152, 2272}, Vocab: model.Range{2, 4}}, {KVHeads: model.Range{2, 3}, FFN: model.Range{2272, 3392}, Vocab: model.Range{4, 6}}, {KVHeads: model.Range{3, 4}, FFN: model.Range{3392, 4512}, Vocab: model.Range{6, 8}}, {KVHeads: model.Range{4, 4}, FFN: model.Range{4512, 5632}, Vocab: model.Range{8, 10}}}, false},
		// F32 stories260K: attn_output columns per KV head are 16, FFN any.
		{"stories F32 3-way", stories, tensor.F32, tensor.F32, 512, []uint64{1, 1, 1}, nil,
			[]model.TPSlice{{KVHeads: model.Range{0, 2}, FFN: model.Range{0, 58}, Vocab: model.Range{0, 171}}, {KVHeads: model.Range{2, 3}, FFN: model.Range{58, 115}, Vocab: model.Range{171, 342}}, {KVHeads: model.Range{3, 4}, FFN: model.Range{115, 172}, Vocab: model.Range{342, 512}}}, false},
		// Q8_0 stories-shaped: 16 columns per KV head, so heads go in pairs;
		// FFN 172 is no whole number of 32-blocks.
		{"stories Q8_0", stories, tensor.Q8_0, tensor.Q8_0, 512, []uint64{1, 1}, nil, nil, true},
		// Qwen3-235B-A22B: 4 KV heads of 16 query heads × 128, experts of
		// 1536 columns (6 blocks of 256) over 4 members: 2+2+1+1 blocks.
		{"qwen3moe 4-way", qwen, tensor.Q4_K, tensor.Q4_K, 151936, []uint64{1, 1, 1, 1}, nil,
			[]model.TPSlice{
				{KVHeads: model.Range{0, 1}, ExpertFFN: model.Range{0, 512}, Vocab: model.Range{0, 37984}},
				{KVHeads: model.Range{1, 2}, ExpertFFN: model.Range{512, 1024}, Vocab: model.Range{37984, 75968}},
				{KVHeads: model.Range{2, 3}, ExpertFFN: model.Range{1024, 1280}, Vocab: model.Range{75968, 113952}},
				{KVHeads: model.Range{3, 4}, ExpertFFN: model.Range{1280, 1536}, Vocab: model.Range{113952, 151936}}}, false},
		// Kimi K2's latent attention: 64 heads whose attn_output columns
		// (128 each) pair up into Q4_K blocks.
		{"latent attention", kimi, tensor.Q4_K, tensor.Q4_K, 163840, []uint64{1, 1}, nil,
			[]model.TPSlice{{KVHeads: model.Range{0, 32}, ExpertFFN: model.Range{0, 1024}, Vocab: model.Range{0, 81920}}, {KVHeads: model.Range{32, 64}, ExpertFFN: model.Range{1024, 2048}, Vocab: model.Range{81920, 163840}}}, false},
		// Whole experts by 3:2:1: 128 experts as 64 + 43 + 21.
		{"qwen3moe expert parallel 3:2:1", qwen, tensor.Q4_K, tensor.Q4_K, 151936, []uint64{3, 2, 1}, &model.TPOptions{ExpertParallel: true},
			[]model.TPSlice{
				{KVHeads: model.Range{0, 2}, ExpertFFN: model.Range{0, 768}, Vocab: model.Range{0, 75968}, ExpertParallel: true, Experts: model.Range{0, 64}},
				{KVHeads: model.Range{2, 3}, ExpertFFN: model.Range{768, 1280}, Vocab: model.Range{75968, 126613}, ExpertParallel: true, Experts: model.Range{64, 107}},
				{KVHeads: model.Range{3, 4}, ExpertFFN: model.Range{1280, 1536}, Vocab: model.Range{126613, 151936}, ExpertParallel: true, Experts: model.Range{107, 128}}}, false},
		{"expert parallel without experts", tiny, tensor.Q8_0, tensor.Q8_0, 32000, []uint64{1, 1}, &model.TPOptions{ExpertParallel: true}, nil, true},
		{"zero weight", tiny, tensor.Q8_0, tensor.Q8_0, 32000, []uint64{1, 0}, nil, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := model.TPUnitsFor(tc.c, tc.out, tc.down)
			var got []model.TPSlice
			if err == nil {
				if tc.opts != nil {
					got, err = model.PlanTPWith(tc.c, tc.vocab, u, tc.weights, *tc.opts)
				} else {
					got, err = model.PlanTP(tc.c, tc.vocab, u, tc.weights)
				}
			}
			if tc.err {
				if err == nil {
					t.Fatalf("want an error, got %v", got)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got\n%s want\n%s", model.DescribeTP(tc.c, got), model.DescribeTP(tc.c, tc.want))
			}
		})
	}
	u, _ := model.TPUnitsFor(stories, tensor.Q8_0, tensor.F32)
	if u.KVHeads != 2 {
		t.Fatalf("stories-shaped Q8_0 attn_output: %d KV heads per unit, want 2 (16 columns each, blocks of 32)", u.KVHeads)
	}
}

// tpRun is the teacher-forced logits of ids through a group of
// len(weights) members, each its own goroutine with its own pool of
// threads, fed batch tokens per forward pass. It checks that every member
// ends with bit-identical logits.
func tpRun(t testing.TB, f *gguf.File, g tpGroup, threads int, ids []int, batch int) [][]float32 {
	t.Helper()
	members, err := loadTPWith(f, g)
	if err != nil {
		t.Fatal(err)
	}
	ars := model.LocalGroup(len(members))
	logits := make([][][]float32, len(members)) // [member][position]
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool := tensor.NewPool(threads)
			defer pool.Close()
			s, c := m.NewState(pool, batch, len(ids)), m.NewCache(len(ids))
			ctx := context.Background()
			for lo := 0; lo < len(ids); lo += batch {
				hi := min(lo+batch, len(ids))
				if errs[i] = s.Embed(ids[lo:hi]); errs[i] != nil {
					return
				}
				if errs[i] = s.Forward(ctx, c, hi-lo, ars[i]); errs[i] != nil {
					return
				}
				for j := lo; j < hi; j++ {
					l, err := s.LogitsOf(ctx, j-lo, ars[i])
					if err != nil {
						errs[i] = err
						return
					}
					logits[i] = append(logits[i], append([]float32(nil), l...))
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	for i := 1; i < len(members); i++ {
		for p := range logits[0] {
			for j := range logits[0][p] {
				if math.Float32bits(logits[i][p][j]) != math.Float32bits(logits[0][p][j]) {
					t.Fatalf("member %d's logit %d at position %d is %v, member 0's %v: the group's hidden states differ", i, j, p, logits[i][p][j], logits[0][p][j])
				}
			}
		}
	}
	return logits[0]
}

// tpGroup is a group to test: the members' weights, their KV cache type,
// and whether mixture-of-experts layers split by whole experts.
type tpGroup struct {
	weights []uint64
	kv      model.KVType
	ep      bool
}

func (g tpGroup) String() string {
	s := fmt.Sprintf("weights %v, kv %v", g.weights, g.kv)
	if g.ep {
		s += ", expert parallel"
	}
	return s
}

// loadTP plans and loads the slices of every layer of f for a group with
// the given weights (f16 KV caches, experts split by columns).
func loadTP(f *gguf.File, weights []uint64) ([]*model.TPModel, error) {
	return loadTPWith(f, tpGroup{weights: weights})
}

// loadTPWith plans and loads the slices of every layer of f for group g.
func loadTPWith(f *gguf.File, g tpGroup) ([]*model.TPModel, error) {
	weights := g.weights
	c, err := model.ConfigOf(f.Metadata())
	if err != nil {
		return nil, err
	}
	u, err := model.TPUnitsOf(f, c, 0, c.Layers)
	if err != nil {
		return nil, err
	}
	emb, _ := f.Tensor("token_embd.weight")
	slices, err := model.PlanTPWith(c, int(emb.Dims[1]), u, weights, model.TPOptions{ExpertParallel: g.ep})
	if err != nil {
		return nil, err
	}
	var ms []*model.TPModel
	for _, s := range slices {
		m, err := model.LoadTP(f, 0, c.Layers, s)
		if err != nil {
			return nil, err
		}
		if err := m.SetKVType(g.kv); err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// oneNode is the teacher-forced logits of ids through the whole model
// with a KV cache of type kv.
func oneNode(t testing.TB, f *gguf.File, kv model.KVType, ids []int, batch int) [][]float32 {
	t.Helper()
	m, err := loadKV(t, f, kv)
	if err != nil {
		t.Fatal(err)
	}
	return teacher(t, m, ids, batch)
}

// loadKV loads the whole model in f with a KV cache of type kv.
func loadKV(t testing.TB, f *gguf.File, kv model.KVType) (*model.Model, error) {
	t.Helper()
	m, err := model.Load(f, 0, mustConfig(t, f).Layers)
	if err != nil {
		return nil, err
	}
	return m, m.SetKVType(kv)
}

func teacher(t testing.TB, m *model.Model, ids []int, batch int) [][]float32 {
	var out [][]float32
	if err := model.TeacherForced(m, nil, ids, batch, func(_ int, l []float32) { out = append(out, append([]float32(nil), l...)) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustConfig(t testing.TB, f *gguf.File) model.Config {
	c, err := model.ConfigOf(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// logitDiff compares logits position by position: the largest absolute
// difference relative to the position's largest |logit| (worst over
// positions), and the first position whose argmax differs (-1: none).
func logitDiff(want, got [][]float32) (rel float64, firstArgmax int) {
	firstArgmax = -1
	for p := range want {
		var scale, d float64
		for j := range want[p] {
			scale = max(scale, math.Abs(float64(want[p][j])))
			d = max(d, math.Abs(float64(want[p][j]-got[p][j])))
		}
		rel = max(rel, d/scale)
		if firstArgmax < 0 && argmax(want[p]) != argmax(got[p]) {
			firstArgmax = p
		}
	}
	return rel, firstArgmax
}

// tpFile writes a synthetic model of shape s for the TP tests.
func tpFile(t testing.TB, s model.Shape, typ tensor.Type, layers int) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.WriteFile(path, s, synth.Options{Type: typ, Seed: 7, Layers: layers}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// tinyllamaTP is tinyllama-1.1b's layer shape (Embd 2048, FFN 5632, 32
// heads over 4 KV heads of 64) with a 4096-token vocabulary, so a few
// layers make a small file; Peaked so that greedy decoding is not a coin
// toss between near-equal logits.
var tinyllamaTP = func() model.Shape {
	s := model.Shapes["tinyllama-1.1b"]
	s.Vocab, s.Peaked = 4096, true
	return s
}()

// TestTPMatchesOneNode runs 64 teacher-forced positions through 2-way,
// 3-way and uneven (3:2:1) groups of every architecture and compares
// their logits with one node's, both with the same KV cache type. The
// group sums attn_output and ffn_down (and a mixture's experts) in pieces
// (each member's share, then the members in order), one node in one
// pass, so the results differ by float rounding. With F32 weights and an
// f32 cache that is all (bound 1e-5 of the position's largest |logit|,
// measured about 2e-6). An f16 or q8_0 cache, and quantized weights,
// round the keys and values, or the next layer's 8-bit input: a last-bit
// difference that moves one value across a rounding step changes it by a
// whole step, so a position can differ by about as much as that rounding
// does at all (measured up to 3e-2 on the tinyllama shape with Q8_0
// weights; TestQuantizedFidelity measures the same effect between strata
// and llama.cpp). What must hold there: every argmax agrees, and the group
// is no further from exact arithmetic (f32 cache, dequantized weights)
// than one node is (rms, within 1.25x).
func TestTPMatchesOneNode(t *testing.T) {
	stories := openFile(t, "gguf/stories260K.gguf")
	shape := func(name string, typ tensor.Type, layers int) func() *gguf.File {
		return func() *gguf.File { return tpFile(t, model.Shapes[name], typ, layers) }
	}
	legacy := model.Shapes["deepseek2-tiny"]
	legacy.LegacyKVB = true
	f32, f16, q8 := model.KVF32, model.KVF16, model.KVQ8_0
	files := []struct {
		name    string
		f       func() *gguf.File
		batches []int
		kv      []model.KVType
		ep      bool // experts whole per member (expert parallelism)
	}{
		{"stories260K", func() *gguf.File { return stories }, []int{1, 16}, []model.KVType{f32, f16}, false},
		{"tinyllama-shape F32 1 layer", func() *gguf.File { return tpFile(t, tinyllamaTP, tensor.F32, 1) }, []int{1}, []model.KVType{f32}, false},
		{"tinyllama-shape Q8_0 2 layers", func() *gguf.File { return tpFile(t, tinyllamaTP, tensor.Q8_0, 2) }, []int{1}, []model.KVType{f16}, false},
		{"llama3-tiny Q8_0", shape("llama3-tiny", tensor.Q8_0, 0), []int{1, 16}, []model.KVType{f16, q8}, false},
		{"qwen2-tiny Q4_K", shape("qwen2-tiny", tensor.Q4_K, 0), []int{1, 16}, []model.KVType{f16}, false},
		{"qwen3-tiny Q8_0", shape("qwen3-tiny", tensor.Q8_0, 0), []int{1, 16}, []model.KVType{f16}, false},
		// Mixture of experts: every expert split by columns, or whole
		// experts per member.
		{"qwen3moe-tiny F32", shape("qwen3moe-tiny", tensor.F32, 0), []int{1, 16}, []model.KVType{f32, f16}, false},
		{"qwen3moe-tiny F32 expert parallel", shape("qwen3moe-tiny", tensor.F32, 0), []int{1, 16}, []model.KVType{f32}, true},
		{"qwen3moe-tiny Q8_0", shape("qwen3moe-tiny", tensor.Q8_0, 0), []int{1, 16}, []model.KVType{f16}, false},
		{"qwen3moe-tiny Q8_0 expert parallel", shape("qwen3moe-tiny", tensor.Q8_0, 0), []int{1, 16}, []model.KVType{f16}, true},
		// Latent attention split by heads; a shared expert split by
		// columns beside routed experts split either way.
		{"deepseek2-tiny F32", shape("deepseek2-tiny", tensor.F32, 0), []int{1, 16}, []model.KVType{f32, f16}, false},
		{"deepseek2-tiny F32 expert parallel", shape("deepseek2-tiny", tensor.F32, 0), []int{1, 16}, []model.KVType{f32}, true},
		{"deepseek2-tiny attn_kv_b F32", func() *gguf.File { return tpFile(t, legacy, tensor.F32, 0) }, []int{1, 16}, []model.KVType{f32}, false},
		{"deepseek2-tiny Q8_0", shape("deepseek2-tiny", tensor.Q8_0, 0), []int{1, 16}, []model.KVType{f16}, false},
		{"deepseek2-tiny Q8_0 expert parallel", shape("deepseek2-tiny", tensor.Q8_0, 0), []int{1}, []model.KVType{f16}, true},
	}
	weights := [][]uint64{{1, 1}, {1, 1, 1}, {3, 2, 1}}
	for _, fc := range files {
		t.Run(fc.name, func(t *testing.T) {
			f := fc.f()
			f32w := strings.Contains(fc.name, "F32") || fc.name == "stories260K" // stories260K's weights are F32
			r := rand.New(rand.NewPCG(1, 2))
			ids := make([]int, 64)
			for i := range ids {
				ids[i] = 1 + r.IntN(mustVocab(t, f)-1)
			}
			var exact [][]float32
			for _, kv := range fc.kv {
				if (kv != f32 || !f32w) && exact == nil {
					m, err := loadKV(t, f, f32)
					if err != nil {
						t.Fatal(err)
					}
					exact = teacher(t, dequantized(t, m), ids, 16)
				}
				for _, batch := range fc.batches {
					want := oneNode(t, f, kv, ids, batch)
					for _, w := range weights {
						g := tpGroup{weights: w, kv: kv, ep: fc.ep}
						got := tpRun(t, f, g, 1, ids, batch)
						rel, first := logitDiff(want, got)
						msg := fmt.Sprintf("batch %2d, %v: max relative logit difference from one node %.2e", batch, g, rel)
						if kv == f32 && f32w {
							if rel > 1e-5 {
								t.Errorf("batch %d, %v: relative logit difference %.2e exceeds 1e-5 with F32 weights and cache", batch, g, rel)
							}
						} else {
							rmsOne, rmsTP := rmsDiff(exact, want), rmsDiff(exact, got)
							msg += fmt.Sprintf("; rms from exact: one node %.2e, group %.2e", rmsOne, rmsTP)
							if rmsTP > 1.25*rmsOne {
								t.Errorf("batch %d, %v: the group is %.2e rms from exact, one node %.2e (allowed 1.25x)", batch, g, rmsTP, rmsOne)
							}
						}
						t.Log(msg)
						if first >= 0 {
							t.Errorf("batch %d, %v: argmax differs from one node's at position %d", batch, g, first)
						}
					}
				}
			}
		})
	}
}

// rmsDiff is the root mean square over positions and logits of the
// difference from ref, relative to each position's largest |logit|.
func rmsDiff(ref, got [][]float32) float64 {
	var sum float64
	var n int
	for p := range ref {
		var scale float64
		for _, v := range ref[p] {
			scale = max(scale, math.Abs(float64(v)))
		}
		for j := range ref[p] {
			d := float64(got[p][j]-ref[p][j]) / scale
			sum += d * d
			n++
		}
	}
	return math.Sqrt(sum / float64(max(n, 1)))
}

func mustVocab(t testing.TB, f *gguf.File) int {
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		t.Fatal("no token_embd.weight")
	}
	return int(emb.Dims[1])
}

// tpGreedy decodes steps tokens greedily after prompt with a group of
// len(weights) members, one token per forward pass.
func tpGreedy(t testing.TB, f *gguf.File, g tpGroup, prompt []int, steps int) []int {
	t.Helper()
	members, err := loadTPWith(f, g)
	if err != nil {
		t.Fatal(err)
	}
	ars := model.LocalGroup(len(members))
	outs := make([][]int, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			capacity := len(prompt) + steps
			s, c := m.NewState(nil, len(prompt), capacity), m.NewCache(capacity)
			tokens := prompt
			for len(outs[i]) < steps {
				if errs[i] = s.Embed(tokens); errs[i] != nil {
					return
				}
				if errs[i] = s.Forward(ctx, c, len(tokens), ars[i]); errs[i] != nil {
					return
				}
				l, err := s.LogitsOf(ctx, len(tokens)-1, ars[i])
				if err != nil {
					errs[i] = err
					return
				}
				next := argmax(l)
				outs[i] = append(outs[i], next)
				tokens = []int{next}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	return outs[0]
}

// TestTPGreedy: greedy text from 2-way and uneven 3-way groups equals one
// node's (f16 KV caches on both): on stories260K the 256 tokens of
// llama2.c's published sample, on the tinyllama-shaped synthetic Q8_0
// model and a Q8_0 model of every other architecture 64 tokens of one
// node's run. Where the group picks another token, one node's two
// candidates must be a near tie: their logits within tieBound of the
// position's largest |logit| (the rounding TestTPMatchesOneNode measures
// with 8-bit activations); the divergence is logged with its margin.
func TestTPGreedy(t *testing.T) {
	const tieBound = 3e-2
	stories := openFile(t, "gguf/stories260K.gguf")
	want := model.StoriesIDs(t)
	for _, w := range [][]uint64{{1, 1}, {1, 1, 1}, {3, 2, 1}} {
		got := tpGreedy(t, stories, tpGroup{weights: w}, []int{1}, len(want))
		if i := firstDiff(got, want); i >= 0 {
			t.Errorf("stories260K, weights %v: token %d is %d, one node's %d", w, i, got[i], want[i])
		}
	}
	files := []struct {
		name string
		f    *gguf.File
		ep   bool
	}{
		{"tinyllama-shape Q8_0", tpFile(t, tinyllamaTP, tensor.Q8_0, 2), false},
		{"llama3-tiny Q8_0", tpFile(t, model.Shapes["llama3-tiny"], tensor.Q8_0, 0), false},
		{"qwen2-tiny Q8_0", tpFile(t, model.Shapes["qwen2-tiny"], tensor.Q8_0, 0), false},
		{"qwen3-tiny Q8_0", tpFile(t, model.Shapes["qwen3-tiny"], tensor.Q8_0, 0), false},
		{"qwen3moe-tiny Q8_0", tpFile(t, model.Shapes["qwen3moe-tiny"], tensor.Q8_0, 0), false},
		{"deepseek2-tiny Q8_0", tpFile(t, model.Shapes["deepseek2-tiny"], tensor.Q8_0, 0), false},
	}
	prompt := []int{1, 300, 1000, 7, 99}
	for _, fc := range files {
		one, err := loadKV(t, fc.f, model.KVF16)
		if err != nil {
			t.Fatal(err)
		}
		oneWant := greedy(t, one, prompt, 64)
		for _, g := range []tpGroup{{weights: []uint64{1, 1}}, {weights: []uint64{1, 1, 1}}, {weights: []uint64{3, 2, 1}}, {weights: []uint64{1, 1}, ep: true}, {weights: []uint64{3, 2, 1}, ep: true}} {
			if g.ep && one.Experts == 0 {
				continue
			}
			got := tpGreedy(t, fc.f, g, prompt, len(oneWant))
			i := firstDiff(got, oneWant)
			if i < 0 {
				t.Logf("%s, %v: %d tokens equal one node's", fc.name, g, len(got))
				continue
			}
			// One node's logits where the texts part: how close was its choice?
			ids := append(append([]int(nil), prompt...), oneWant[:i]...)
			logits := oneNode(t, fc.f, model.KVF16, ids, 1)
			l := logits[len(logits)-1]
			var scale float64
			for _, v := range l {
				scale = max(scale, math.Abs(float64(v)))
			}
			margin := float64(l[oneWant[i]]-l[got[i]]) / scale
			t.Logf("%s, %v: first divergence at token %d: group %d, one node %d; one node's logits for them %.5g and %.5g, margin %.2e of the largest |logit|",
				fc.name, g, i, got[i], oneWant[i], l[got[i]], l[oneWant[i]], margin)
			if margin > tieBound {
				t.Errorf("%s, %v: token %d is %d, one node's %d by a margin of %.2e (not a near tie, bound %.0e)", fc.name, g, i, got[i], oneWant[i], margin, tieBound)
			}
		}
	}
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func openFile(t testing.TB, rel string) *gguf.File {
	f, err := gguf.Open(testdata.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// greedy decodes steps tokens after prompt with the whole model on one node.
func greedy(t testing.TB, m *model.Model, prompt []int, steps int) []int {
	capacity := len(prompt) + steps
	s, c := m.NewState(nil, len(prompt), capacity), m.NewCache(capacity)
	tokens := prompt
	var out []int
	for len(out) < steps {
		if err := s.Embed(tokens); err != nil {
			t.Fatal(err)
		}
		if err := s.Forward(c, len(tokens)); err != nil {
			t.Fatal(err)
		}
		l, err := s.LogitsOf(len(tokens) - 1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, argmax(l))
		tokens = []int{out[len(out)-1]}
	}
	return out
}

// A member's decode step allocates nothing (the all-reduce included, once
// its scratch has grown).
func TestTPForwardNoAlloc(t *testing.T) {
	f := openFile(t, "gguf/stories260K.gguf")
	ms, err := loadTP(f, []uint64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	ars := model.LocalGroup(2)
	ctx := context.Background()
	states := make([]*model.TPState, 2)
	caches := make([]*model.TPCache, 2)
	for i, m := range ms {
		states[i], caches[i] = m.NewState(nil, 1, 512), m.NewCache(512)
	}
	done := make(chan error)
	step := func(i int) error {
		s := states[i]
		if err := s.Embed([]int{1}); err != nil {
			return err
		}
		if err := s.Forward(ctx, caches[i], 1, ars[i]); err != nil {
			return err
		}
		_, err := s.LogitsOf(ctx, 0, ars[i])
		return err
	}
	// Member 1 steps in a goroutine for each of member 0's steps.
	run := func() {
		go func() { done <- step(1) }()
		if err := step(0); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	run()
	// Counts the whole process: the goroutine's start allocates, so the
	// bound is what one go statement costs, not the forward pass.
	if a := testing.AllocsPerRun(20, run); a > 2 {
		t.Fatalf("a TP decode step allocates %.1f times", a)
	}
}

func TestLoadTPErrors(t *testing.T) {
	f := openFile(t, "gguf/stories260K.gguf")
	for _, tc := range []struct {
		name string
		s    model.TPSlice
	}{
		{"heads past the end", model.TPSlice{KVHeads: model.Range{Lo: 2, Hi: 5}, FFN: model.Range{Hi: 10}, Vocab: model.Range{Hi: 10}}},
		{"reversed ffn", model.TPSlice{KVHeads: model.Range{Hi: 1}, FFN: model.Range{Lo: 10, Hi: 5}, Vocab: model.Range{Hi: 10}}},
		{"vocab past the end", model.TPSlice{KVHeads: model.Range{Hi: 1}, FFN: model.Range{Hi: 5}, Vocab: model.Range{Hi: 1 << 20}}},
		{"experts in a dense model", model.TPSlice{KVHeads: model.Range{Hi: 1}, FFN: model.Range{Hi: 5}, ExpertFFN: model.Range{Hi: 8}, Vocab: model.Range{Hi: 10}}},
	} {
		if _, err := model.LoadTP(f, 0, 5, tc.s); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	q := tpFile(t, model.Shapes["qwen3-tiny"], tensor.Q8_0, 0)
	s := model.TPSlice{KVHeads: model.Range{Hi: 1}, FFN: model.Range{Lo: 0, Hi: 48}, Vocab: model.Range{Hi: 10}}
	if _, err := model.LoadTP(q, 0, 2, s); err == nil {
		t.Error("FFN columns off the Q8_0 block boundaries: no error")
	} else {
		t.Log(err)
	}
	mla := tpFile(t, model.Shapes["deepseek2-tiny"], tensor.Q8_0, 0)
	for _, tc := range []struct {
		name string
		s    model.TPSlice
	}{
		{"latent attention: heads past the end", model.TPSlice{KVHeads: model.Range{Lo: 2, Hi: 5}, FFN: model.Range{Hi: 32}, ExpertFFN: model.Range{Hi: 32}, Vocab: model.Range{Hi: 10}}},
		{"experts past the end", model.TPSlice{KVHeads: model.Range{Hi: 1}, FFN: model.Range{Hi: 32}, ExpertFFN: model.Range{Hi: 32}, Vocab: model.Range{Hi: 10}, ExpertParallel: true, Experts: model.Range{Lo: 4, Hi: 9}}},
		{"experts without expert parallelism", model.TPSlice{KVHeads: model.Range{Hi: 1}, FFN: model.Range{Hi: 32}, ExpertFFN: model.Range{Hi: 32}, Vocab: model.Range{Hi: 10}, Experts: model.Range{Lo: 0, Hi: 4}}},
		{"shared expert columns off the Q8_0 blocks", model.TPSlice{KVHeads: model.Range{Hi: 1}, FFN: model.Range{Hi: 32}, ExpertFFN: model.Range{Hi: 16}, Vocab: model.Range{Hi: 10}, ExpertParallel: true, Experts: model.Range{Hi: 4}}},
	} {
		if _, err := model.LoadTP(mla, 0, 3, tc.s); err == nil {
			t.Errorf("%s: no error", tc.name)
		} else {
			t.Log(err)
		}
	}
}

// A file's profile and its shape's agree on the decode cost inputs, and a
// mixture-of-experts layer's active bytes count ExpertsUsed of Experts.
func TestProfileDecodeBytes(t *testing.T) {
	for _, name := range []string{"qwen3-tiny", "qwen3moe-tiny", "deepseek2-tiny", "llama3-tiny"} {
		s := model.Shapes[name]
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := synth.WriteFile(path, s, synth.Options{Type: tensor.Q8_0, Sparse: true}); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := model.ProfileOf(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := s.Profile(tensor.Q8_0)
		if fmt.Sprint(got.ActiveLayerBytes, got.AttnLayerBytes, got.Embd, got.KVHeads, got.Vocab) !=
			fmt.Sprint(want.ActiveLayerBytes, want.AttnLayerBytes, want.Embd, want.KVHeads, want.Vocab) {
			t.Errorf("%s: file %v %v %d %d %d, shape %v %v %d %d %d", name, got.ActiveLayerBytes, got.AttnLayerBytes, got.Embd, got.KVHeads, got.Vocab,
				want.ActiveLayerBytes, want.AttnLayerBytes, want.Embd, want.KVHeads, want.Vocab)
		}
		for l := range want.LayerBytes {
			var attn, exps, other uint64
			for _, ts := range s.Tensors(tensor.Q8_0) {
				switch p := fmt.Sprintf("blk.%d.", l); {
				case len(ts.Name) < len(p) || ts.Name[:len(p)] != p:
				case strings.Contains(ts.Name, "_exps."):
					exps += ts.Bytes()
				case strings.Contains(ts.Name, ".attn_"):
					attn += ts.Bytes()
				default:
					other += ts.Bytes()
				}
			}
			active := attn + other
			if s.Experts > 0 {
				active += exps / uint64(s.Experts) * uint64(s.ExpertsUsed)
			}
			if want.ActiveLayerBytes[l] != active || want.AttnLayerBytes[l] != attn {
				t.Errorf("%s layer %d: active %d attention %d, want %d %d", name, l, want.ActiveLayerBytes[l], want.AttnLayerBytes[l], active, attn)
			}
		}
	}
}

// BenchmarkLocalGroup is one all-reduce of a tinyllama hidden state (2048
// floats) across in-process members: what a TP layer pays twice.
func BenchmarkLocalGroup(b *testing.B) {
	for _, n := range []int{2, 3} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			ars := model.LocalGroup(n)
			bufs := make([][]float32, n)
			for i := range bufs {
				bufs[i] = make([]float32, 2048)
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			for i := 1; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range b.N {
						if err := ars[i].AllReduce(ctx, bufs[i]); err != nil {
							panic(err)
						}
					}
				}()
			}
			b.SetBytes(2048 * 4)
			b.ReportAllocs()
			for range b.N {
				if err := ars[0].AllReduce(ctx, bufs[0]); err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
		})
	}
}

// A hybrid plan: layers [0,2) of stories260K on a 2-way group, [2,5) on
// an uneven 3-way group, hidden states handed from the first group to the
// second as a pipeline hop does. Its logits match one node's to float
// rounding (F32 weights), position by position.
func TestTPHybrid(t *testing.T) {
	f := openFile(t, "gguf/stories260K.gguf")
	c := mustConfig(t, f)
	u, err := model.TPUnitsOf(f, c, 0, c.Layers)
	if err != nil {
		t.Fatal(err)
	}
	type stage struct {
		members []*model.TPModel
		states  []*model.TPState
		caches  []*model.TPCache
		ars     []model.AllReducer
	}
	ids := model.StoriesIDs(t)[:64]
	mkStage := func(first, end int, weights []uint64) *stage {
		slices, err := model.PlanTP(c, mustVocab(t, f), u, weights)
		if err != nil {
			t.Fatal(err)
		}
		st := &stage{ars: model.LocalGroup(len(slices))}
		for _, s := range slices {
			m, err := model.LoadTP(f, first, end, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetKVType(model.KVF32); err != nil { // as one node's below
				t.Fatal(err)
			}
			st.members = append(st.members, m)
			st.states = append(st.states, m.NewState(nil, 1, len(ids)))
			st.caches = append(st.caches, m.NewCache(len(ids)))
		}
		return st
	}
	stages := []*stage{mkStage(0, 2, []uint64{1, 1}), mkStage(2, 5, []uint64{2, 1, 1})}
	want := oneNode(t, f, model.KVF32, ids, 1)
	ctx := context.Background()
	var got [][]float32
	for p, id := range ids {
		var hidden []float32
		var logits []float32
		for si, st := range stages {
			var wg sync.WaitGroup
			errs := make([]error, len(st.members))
			for i, s := range st.states {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if si == 0 {
						errs[i] = s.Embed([]int{id})
					} else {
						copy(s.X, hidden)
					}
					if errs[i] == nil {
						errs[i] = s.Forward(ctx, st.caches[i], 1, st.ars[i])
					}
					if errs[i] == nil && si == len(stages)-1 {
						l, err := s.LogitsOf(ctx, 0, st.ars[i])
						if i == 0 {
							logits = append([]float32(nil), l...)
						}
						errs[i] = err
					}
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("position %d, stage %d member %d: %v", p, si, i, err)
				}
			}
			hidden = append(hidden[:0], st.states[0].X[:c.Embd]...)
		}
		got = append(got, logits)
	}
	rel, first := logitDiff(want, got)
	t.Logf("2-way then 3-way (2:1:1) stages: max relative logit difference from one node %.2e over %d positions", rel, len(ids))
	if rel > 1e-5 || first >= 0 {
		t.Errorf("hybrid: relative difference %.2e (bound 1e-5), first argmax difference at %d", rel, first)
	}
}

// The members' slices partition the model: their bytes add up to every
// layer matrix and the output head exactly, whatever the split, less what
// every member holds whole (routers, the latent path of latent attention),
// counted from the file's tensor table.
func TestTPSlicesPartition(t *testing.T) {
	for _, tc := range []struct {
		shape string
		ep    bool
	}{{"qwen3-tiny", false}, {"qwen3moe-tiny", false}, {"qwen3moe-tiny", true}, {"deepseek2-tiny", false}, {"deepseek2-tiny", true}} {
		t.Run(fmt.Sprintf("%s ep=%v", tc.shape, tc.ep), func(t *testing.T) { slicesPartition(t, tc.shape, tc.ep) })
	}
}

func slicesPartition(t *testing.T, shape string, ep bool) {
	f := tpFile(t, model.Shapes[shape], tensor.Q8_0, 0)
	var want int64
	whole := []string{"ffn_gate_inp.", "attn_q_a.", "attn_kv_a_mqa."}
	for _, ts := range f.Tensors() {
		split := len(ts.Dims) >= 2 && strings.HasPrefix(ts.Name, "blk.") || ts.Name == "output.weight"
		for _, w := range whole {
			split = split && !strings.Contains(ts.Name, w)
		}
		if split {
			want += int64(ts.Size)
		}
	}
	for _, w := range [][]uint64{{1}, {1, 1}, {3, 2, 1}, {1, 1, 1, 1, 1}} {
		ms, err := loadTPWith(f, tpGroup{weights: w, ep: ep})
		if err != nil {
			t.Fatal(err)
		}
		var got, copied int64
		for _, m := range ms {
			got += m.SliceBytes()
			copied += m.CopiedBytes()
		}
		if got != want {
			t.Errorf("weights %v: slices hold %d bytes, the model %d", w, got, want)
		}
		t.Logf("weights %v: %d members hold %d bytes, %d of them copied (attn_output and ffn_down columns)", w, len(ms), got, copied)
	}
}

// ExpertsReadPerToken against counting every draw of a small router.
func TestExpertsReadPerToken(t *testing.T) {
	for _, tc := range []struct {
		experts, used int
		held          []int
	}{{8, 2, []int{4, 4}}, {8, 3, []int{3, 3, 2}}, {10, 4, []int{5, 3, 2}}, {6, 6, []int{2, 4}}, {9, 1, []int{9}}, {7, 2, []int{0, 7}}} {
		var sum, draws float64
		eachDraw(tc.experts, tc.used, tc.held, func(count []int) {
			sum += float64(slices.Max(count))
			draws++
		})
		want := sum / draws
		if got := model.ExpertsReadPerToken(tc.experts, tc.used, tc.held); math.Abs(got-want) > 1e-12 {
			t.Errorf("%d of %d experts held as %v: got %v, counted %v", tc.used, tc.experts, tc.held, got, want)
		}
	}
	// Qwen3-235B-A22B's 8 of 128 over 4 members, against 8/4 = 2 expert
	// widths for each member when every expert is split by columns.
	t.Logf("qwen3-235b, 4 members: the busiest runs %.3f experts per token", model.ExpertsReadPerToken(128, 8, []int{32, 32, 32, 32}))
	t.Logf("kimi-k2, 4 members: the busiest runs %.3f experts per token", model.ExpertsReadPerToken(384, 8, []int{96, 96, 96, 96}))
}

// eachDraw calls f with how many experts each member holds of every set
// of used of the experts (member i holding held[i] of them, in order).
func eachDraw(experts, used int, held []int, f func(count []int)) {
	owner := []int{}
	for i, h := range held {
		for range h {
			owner = append(owner, i)
		}
	}
	for set := uint(0); set < 1<<experts; set++ {
		if bits.OnesCount(set) != used {
			continue
		}
		count := make([]int, len(held))
		for e := range experts {
			if set>>e&1 == 1 {
				count[owner[e]]++
			}
		}
		f(count)
	}
}

// ExpertsTimePerToken against counting every draw, with members that read
// at different rates; with equal rates it is ExpertsReadPerToken/rate.
func TestExpertsTimePerToken(t *testing.T) {
	for _, tc := range []struct {
		experts, used int
		held          []int
		rate          []float64
	}{
		{8, 2, []int{4, 4}, []float64{1, 1}},
		{8, 3, []int{5, 3}, []float64{5, 3}},
		{10, 4, []int{5, 3, 2}, []float64{2, 3, 7}},
		{9, 2, []int{0, 6, 3}, []float64{0, 2, 1}},
		{6, 6, []int{2, 4}, []float64{1.5, 4}},
	} {
		var sum, draws float64
		eachDraw(tc.experts, tc.used, tc.held, func(count []int) {
			slowest := 0.0
			for i, c := range count {
				if c > 0 {
					slowest = max(slowest, float64(c)/tc.rate[i])
				}
			}
			sum += slowest
			draws++
		})
		want := sum / draws
		if got := model.ExpertsTimePerToken(tc.experts, tc.used, tc.held, tc.rate); math.Abs(got-want) > 1e-12 {
			t.Errorf("%d of %d experts held as %v at rates %v: got %v, counted %v", tc.used, tc.experts, tc.held, tc.rate, got, want)
		}
	}
	held := []int{32, 32, 32, 32}
	if got, want := model.ExpertsTimePerToken(128, 8, held, []float64{4, 4, 4, 4}), model.ExpertsReadPerToken(128, 8, held)/4; math.Abs(got-want) > 1e-12 {
		t.Errorf("equal rates: got %v, want ExpertsReadPerToken/4 = %v", got, want)
	}
}

// TPShares is the split PlanTP makes.
func TestTPShares(t *testing.T) {
	c := model.Config{Arch: "qwen3moe", Embd: 64, Heads: 4, KVHeads: 2, HeadDim: 16, Experts: 7, ExpertsUsed: 2, ExpertFFN: 96}
	for _, w := range [][]uint64{{1, 1}, {3, 2, 1}, {5, 1, 1, 1}} {
		slices, err := model.PlanTPWith(c, 10, model.TPUnits{KVHeads: 1, FFN: 32}, w, model.TPOptions{ExpertParallel: true})
		if err != nil {
			t.Fatal(err)
		}
		units, experts := model.TPShares(3, w), model.TPShares(7, w)
		for i, s := range slices {
			if s.ExpertFFN.Len() != units[i]*32 || s.Experts.Len() != experts[i] {
				t.Errorf("weights %v member %d: TPShares says %d units, %d experts; PlanTPWith gave %v, %v", w, i, units[i], experts[i], s.ExpertFFN, s.Experts)
			}
		}
	}
}

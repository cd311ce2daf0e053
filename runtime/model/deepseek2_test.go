package model_test

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"strata/internal/llamacpp"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// dsLoad writes shape s in type typ and loads all of its layers.
func dsLoad(t testing.TB, s model.Shape, typ tensor.Type) (*model.Model, string) {
	path := filepath.Join(t.TempDir(), s.Name+".gguf")
	if err := synth.WriteFile(path, s, synth.Options{Type: typ, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := model.Load(f, 0, s.Layers)
	if err != nil {
		t.Fatal(err)
	}
	return m, path
}

// dsTeacherForced runs ids through m, batch tokens per Forward, and
// returns the top-k logits after every position.
func dsTeacherForced(t testing.TB, m *model.Model, pool *tensor.Pool, ids []int, batch, k int) *llamacpp.Logits {
	s := m.NewState(pool, batch, len(ids))
	c := m.NewCache(len(ids))
	out := &llamacpp.Logits{}
	for lo := 0; lo < len(ids); lo += batch {
		hi := min(lo+batch, len(ids))
		if err := s.Embed(ids[lo:hi]); err != nil {
			t.Fatal(err)
		}
		if err := s.Forward(c, hi-lo); err != nil {
			t.Fatal(err)
		}
		for i := range hi - lo {
			l, err := s.LogitsOf(i)
			if err != nil {
				t.Fatal(err)
			}
			out.Positions = append(out.Positions, llamacpp.TopOf(l, k))
		}
	}
	return out
}

func dsRandomIDs(n, vocab int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 7))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = 3 + r.IntN(vocab-3)
	}
	return ids
}

// DeepSeek-V2-Lite's structure at test size: 27 layers (llama.cpp reads
// no q_lora_rank for that layer count), a plain attn_q, softmax routing
// over 2 shared and 4 routed experts, and YaRN with mscale_all_dim 0.707
// (llama.cpp's DeepSeek-V2 special case of the attention factor).
func TestDeepseek2OracleV2LiteShape(t *testing.T) {
	s := model.Shapes["deepseek-v2-lite"]
	s.Name, s.Peaked = "v2-lite-small", true
	s.Embd, s.FFN, s.Heads, s.KVHeads, s.Vocab, s.Context = 32, 64, 2, 2, 1024, 512
	s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 2, 16
	s.KVLoraRank, s.RopeHeadDim, s.NopeHeadDim, s.VHeadDim = 16, 8, 16, 16
	m, _ := dsLoad(t, s, tensor.F32)
	if m.MLA.QLoraRank != 0 || m.Blocks[0].MLA.Q.Rows == 0 || m.Gating != model.GatingSoftmax || m.MLA.Yarn.Ext != 1 {
		t.Fatalf("loaded %+v", m.Config)
	}
	oracleOf(t, s, tensor.F32)
}

// The cache holds the latent and rope key per position, not full K/V.
func TestDeepseek2CacheIsLatent(t *testing.T) {
	s := model.Shapes["deepseek2-tiny"]
	m, path := dsLoad(t, s, tensor.F32)
	c := m.NewCache(10)
	want := int64(10 * (s.KVLoraRank + s.RopeHeadDim) * 2 * s.Layers) // f16
	if c.Bytes() != want || m.CacheBytes(10) != uint64(want) {
		t.Errorf("cache %d bytes, CacheBytes %d, want %d", c.Bytes(), m.CacheBytes(10), want)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := model.ProfileOf(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.KVBytesPerToken != uint64(want/10) || s.Profile(tensor.F32).KVBytesPerToken != uint64(want/10) {
		t.Errorf("profile KV bytes per token %d (file) %d (shape), want %d", p.KVBytesPerToken, s.Profile(tensor.F32).KVBytesPerToken, want/10)
	}
}

// Batched prefill, token-by-token decoding, pools and shards agree (in
// F32: with 8-bit activations the batch and one-vector kernels round
// differently, which can move a token to another expert).
func TestDeepseek2BatchesAndShards(t *testing.T) {
	s := model.Shapes["deepseek2-tiny"]
	m, path := dsLoad(t, s, tensor.F32)
	if err := m.SetKVType(model.KVF32); err != nil { // f16 would round the batches' differences
		t.Fatal(err)
	}
	ids := dsRandomIDs(24, s.Vocab, 2)
	ref := dsTeacherForced(t, m, nil, ids, 1, 5)
	pool := tensor.NewPool(3)
	defer pool.Close()
	for _, batch := range []int{1, 5, 24} {
		d := llamacpp.Compare(dsTeacherForced(t, m, pool, ids, batch, 5), ref)
		if len(d.ArgmaxMismatch) > 0 || d.MaxRel > 1e-5 {
			t.Errorf("batch %d on a pool vs 1 serially: %v", batch, d)
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := model.Load(f, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := model.Load(f, 1, s.Layers)
	if err != nil {
		t.Fatal(err)
	}
	if a.SetKVType(model.KVF32) != nil || b.SetKVType(model.KVF32) != nil {
		t.Fatal("SetKVType(f32) refused")
	}
	sa, sb := a.NewState(nil, 1, len(ids)), b.NewState(nil, 1, len(ids))
	ca, cb := a.NewCache(len(ids)), b.NewCache(len(ids))
	for i, tok := range ids {
		sa.Embed([]int{tok})
		sa.Forward(ca, 1)
		copy(sb.X, sa.X[:s.Embd])
		sb.Forward(cb, 1)
		l, _ := sb.LogitsOf(0)
		if got := llamacpp.TopOf(l, 5); got.Argmax != ref.Positions[i].Argmax || got.Top[0].Logit != ref.Positions[i].Top[0].Logit {
			t.Fatalf("position %d: shards %v, whole %v", i, got, ref.Positions[i])
		}
	}
}

// The f16 and q8_0 caches give nearly the f32 cache's logits, on a
// latent (deepseek2) and a grouped-query (llama) model: the same argmax at
// every position in f16, and top logits within the rounding of the keys
// and values (q8_0's 8 bits move these random-weight models' near-tied
// logits by a few percent, enough to swap a near tie, so only the size of
// the change is checked there).
func TestKVTypesNearF32(t *testing.T) {
	for _, c := range []struct {
		shape    string
		f16, q80 float64 // largest relative difference of the top logits
	}{{"deepseek2-tiny", 5e-3, 0.1}, {"llama3-tiny", 5e-3, 0.1}} {
		s := model.Shapes[c.shape]
		m, _ := dsLoad(t, s, tensor.F32)
		ids := dsRandomIDs(40, s.Vocab, 4)
		if err := m.SetKVType(model.KVF32); err != nil {
			t.Fatal(err)
		}
		ref := dsTeacherForced(t, m, nil, ids, 1, 5)
		pool := tensor.NewPool(2)
		defer pool.Close()
		for _, kv := range []struct {
			typ model.KVType
			tol float64
		}{{model.KVF16, c.f16}, {model.KVQ8_0, c.q80}} {
			if err := m.SetKVType(kv.typ); err != nil {
				t.Fatal(err)
			}
			d := llamacpp.Compare(dsTeacherForced(t, m, pool, ids, 7, 5), ref)
			t.Logf("%s, %v cache vs f32: %v", c.shape, kv.typ, d)
			if kv.typ == model.KVF16 && len(d.ArgmaxMismatch) > 0 || d.MaxRel > kv.tol {
				t.Errorf("%s, %v cache vs f32: %v (tolerance %g)", c.shape, kv.typ, d, kv.tol)
			}
		}
	}
}

// Malformed deepseek2 metadata is refused with a clear error.
func TestDeepseek2BadMetadata(t *testing.T) {
	s := model.Shapes["deepseek2-tiny"]
	for _, c := range []struct {
		key  string
		val  any
		want string
	}{
		{"deepseek2.attention.kv_lora_rank", uint32(0), "kv_lora_rank"},
		{"deepseek2.rope.dimension_count", uint32(7), "head dims"},
		{"deepseek2.attention.key_length_mla", uint32(8), "head dims"},
		{"deepseek2.rope.scaling.type", "longrope", "not supported"},
	} {
		md, err := synth.Metadata(s, tensor.F32)
		if err != nil {
			t.Fatal(err)
		}
		md.Set(c.key, c.val)
		if _, err := model.ConfigOf(md); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %v: %v", c.key, c.val, err)
		}
	}
}

// A whole mixture-of-experts model's forward pass allocates nothing per
// token, decoding or in batches, on a pool: qwen3moe (one token's experts
// as work items, a batch's experts one per item) and deepseek2 (MLA, a
// shared expert, and attn_kv_b files' dequantized W_UK).
func TestMoEForwardNoAlloc(t *testing.T) {
	kvb := model.Shapes["deepseek2-tiny"]
	kvb.LegacyKVB = true
	for _, s := range []model.Shape{model.Shapes["qwen3moe-tiny"], model.Shapes["deepseek2-tiny"], kvb} {
		m, _ := dsLoad(t, s, tensor.Q8_0)
		pool := tensor.NewPool(2)
		st := m.NewState(pool, 16, 64)
		c := m.NewCache(64)
		batch := dsRandomIDs(16, s.Vocab, 4)
		if a := testing.AllocsPerRun(5, func() {
			if c.Len+17 > c.Capacity {
				c.Len = 0
			}
			st.Embed(batch[:1])
			st.Forward(c, 1)
			st.LogitsOf(0)
			st.Embed(batch)
			st.Forward(c, 16)
			st.LogitsOf(15)
		}); a != 0 {
			t.Errorf("%s (kv_b %v): %v allocations per step", s.Name, s.LegacyKVB, a)
		}
		pool.Close()
	}
}

// The cache takes what CacheBytes and the profile (placement's count)
// say, in every cache type: half of f32 in f16, 34/32 bytes a value in q8_0.
func TestKVBytesAccounting(t *testing.T) {
	for _, name := range []string{"llama3-tiny", "deepseek2-tiny"} {
		s := model.Shapes[name]
		m, path := dsLoad(t, s, tensor.F32)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := model.ProfileOf(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if p.KVBytesPerToken != p.KVBytesPerTokenOf(model.KVF16) || p.KVValuesPerToken != s.KVValuesPerToken() {
			t.Errorf("%s: profile %d bytes (f16) of %d values per token, shape %d values", name, p.KVBytesPerToken, p.KVValuesPerToken, s.KVValuesPerToken())
		}
		for _, c := range []struct {
			typ   model.KVType
			per32 uint64 // bytes per 32 values
		}{{model.KVF16, 64}, {model.KVQ8_0, 34}, {model.KVF32, 128}} {
			if err := m.SetKVType(c.typ); err != nil {
				t.Fatal(err)
			}
			const capacity = 10
			want := capacity * p.KVValuesPerToken / 32 * c.per32
			if got := uint64(m.NewCache(capacity).Bytes()); got != want || m.CacheBytes(capacity) != want || capacity*p.KVBytesPerTokenOf(c.typ) != want {
				t.Errorf("%s %v: cache %d bytes, CacheBytes %d, profile %d, want %d", name, c.typ, got, m.CacheBytes(capacity), capacity*p.KVBytesPerTokenOf(c.typ), want)
			}
		}
	}
}

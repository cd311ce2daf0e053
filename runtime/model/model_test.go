package model

import (
	"strconv"
	"strings"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// storiesGreedy are the 256 greedy token ids after BOS recorded in
// ../shared/testdata/SOURCES.md (llama2.c's published stories260K sample).
const storiesGreedy = `403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352 266 268 388 426 338 391 266 267 337 335 312 432 398 312 286 267 414 270 333 415 426 13 438 310 439 419 357 336 432 313 438 310 432 278 316 439 419 298 414 267 265 282 295 433 426 436 317 286 296 418 269 279 292 416 439 413 409 416 327 263 415 294 267 400 426 338 336 432 313 442 391 267 337 335 364 420 268 388 432 398 359 280 303 439 413 272 417 264 312 426 436 13 438 310 286 296 418 269 279 292 416 439 413 409 416 327 263 415 294 267 400 426 338 336 432 313 442 439 423 262 304 420 422 432 317 426 359 279 292 416 439 413 409 416 327 263 415 294 267 400 426 436 13 438 310 279 292 416 439 413 391 267 281 421 427 311 357 432 384 358 336 432 313 442 439 423 262 304 420 422 432 357 426 359 279 292 416 439 413 409 416 327 263 415 294 267 400 426 436 320 285 357 336 432 313 455 289 439 413 263 304 420 422 432 317 426 410 448 411 280 303 281 421 427 364 426`

func storiesIDs(t testing.TB) []int {
	var ids []int
	for _, f := range strings.Fields(storiesGreedy) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n)
	}
	return ids
}

func openModel(t testing.TB, rel string) *gguf.File {
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

// greedy decodes steps tokens after prompt, one token per Forward.
func greedy(t testing.TB, m *Model, pool *tensor.Pool, prompt []int, steps int) []int {
	capacity := len(prompt) + steps
	s := m.NewState(pool, len(prompt), capacity)
	c := m.NewCache(capacity)
	if err := s.Embed(prompt); err != nil {
		t.Fatal(err)
	}
	if err := s.Forward(c, len(prompt)); err != nil {
		t.Fatal(err)
	}
	logits, _ := s.LogitsOf(len(prompt) - 1)
	var out []int
	for len(out) < steps {
		next := argmax(logits)
		out = append(out, next)
		s.Embed([]int{next})
		if err := s.Forward(c, 1); err != nil {
			t.Fatal(err)
		}
		logits, _ = s.LogitsOf(0)
	}
	return out
}

func TestStoriesGreedy(t *testing.T) {
	f := openModel(t, "gguf/stories260K.gguf")
	m, err := Load(f, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := storiesIDs(t)
	for _, threads := range []int{1, 2, 3} {
		pool := tensor.NewPool(threads)
		got := greedy(t, m, pool, []int{1}, len(want))
		pool.Close()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("threads=%d: token %d is %d, want %d (first %d match)", threads, i, got[i], want[i], i)
			}
		}
	}
}

// Batched prefill and token-by-token decoding see the same logits: within
// float rounding in an f32 cache (the batch and one-vector matrix kernels
// round differently), and in the smaller caches within what rounding the
// slightly different keys and values to f16 or 8 bits can add.
func TestPrefillMatchesStepwise(t *testing.T) {
	f := openModel(t, "gguf/stories260K.gguf")
	m, _ := Load(f, 0, 5)
	prompt := storiesIDs(t)[:40]
	prompt = append([]int{1}, prompt...)
	for _, kv := range []struct {
		typ KVType
		tol float32
	}{{KVF32, 1e-4}, {KVF16, 5e-3}} {
		if err := m.SetKVType(kv.typ); err != nil {
			t.Fatal(err)
		}
		s := m.NewState(nil, len(prompt), 64)
		c := m.NewCache(64)
		s.Embed(prompt)
		s.Forward(c, len(prompt))
		batched := append([]float32(nil), mustLogits(t, s, len(prompt)-1)...)

		s2 := m.NewState(nil, 1, 64)
		c2 := m.NewCache(64)
		var step []float32
		for _, tok := range prompt {
			s2.Embed([]int{tok})
			s2.Forward(c2, 1)
			step = mustLogits(t, s2, 0)
		}
		var worst float32
		for i := range step {
			worst = max(worst, abs32(step[i]-batched[i]))
		}
		t.Logf("%v cache: largest logit difference %.2g", kv.typ, worst)
		if worst > kv.tol {
			t.Errorf("%v cache: stepwise and batched logits differ by %v", kv.typ, worst)
		}
	}
}

func abs32(x float32) float32 { return max(x, -x) }

// A q8_0 cache needs rows of whole 32-value blocks: stories260K's heads are
// 8 wide, and SetKVType says so rather than building a cache it cannot fill.
func TestKVTypeQ8_0NeedsBlocks(t *testing.T) {
	f := openModel(t, "gguf/stories260K.gguf")
	m, _ := Load(f, 0, 5)
	if err := m.SetKVType(KVQ8_0); err == nil || !strings.Contains(err.Error(), "multiple of 32") {
		t.Fatalf("SetKVType(q8_0) on 8-wide heads: %v", err)
	}
	if m.KVType() != KVF16 {
		t.Fatalf("after the refusal the cache type is %v, want the default f16", m.KVType())
	}
	for _, name := range []string{"F16", "q8_0", "f32"} {
		if _, err := ParseKVType(name); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseKVType("q4_0"); err == nil {
		t.Error("ParseKVType(q4_0) accepted")
	}
}

func mustLogits(t testing.TB, s *State, i int) []float32 {
	l, err := s.LogitsOf(i)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Running the layers as two shards gives the same tokens as one model.
func TestShardsMatchWhole(t *testing.T) {
	f := openModel(t, "gguf/stories260K.gguf")
	a, err := Load(f, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(f, 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !a.IsFirst() || a.IsLast() || b.IsFirst() || !b.IsLast() {
		t.Fatal("first/last flags wrong")
	}
	if _, err := b.NewState(nil, 1, 8).LogitsOf(0); err != nil {
		t.Fatal(err)
	}
	if err := b.NewState(nil, 1, 8).Embed([]int{1}); err == nil {
		t.Error("second shard embedded tokens")
	}
	const steps = 60
	sa, sb := a.NewState(nil, 1, steps+1), b.NewState(nil, 1, steps+1)
	ca, cb := a.NewCache(steps+1), b.NewCache(steps+1)
	tok := 1
	want := storiesIDs(t)
	for i := 0; i < steps; i++ {
		sa.Embed([]int{tok})
		sa.Forward(ca, 1)
		copy(sb.X, sa.X[:a.Embd])
		sb.Forward(cb, 1)
		tok = argmax(mustLogits(t, sb, 0))
		if tok != want[i] {
			t.Fatalf("token %d: %d, want %d", i, tok, want[i])
		}
	}
}

func TestTinyRandomLoadsAndRuns(t *testing.T) {
	f := openModel(t, "gguf/llama-2-tiny-random.gguf")
	m, err := Load(f, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Vocab != 32000 || m.Output.Type != tensor.F16 || m.Embed.Type != tensor.F16 || &m.Output.Data[0] == &m.Embed.Data[0] {
		t.Fatalf("vocab %d, output %s (untied F16 expected)", m.Vocab, m.Output.Type)
	}
	got := greedy(t, m, nil, []int{1, 15043}, 20)
	if len(got) != 20 {
		t.Fatal("no tokens")
	}
	for _, id := range got {
		if id < 0 || id >= 32000 {
			t.Fatalf("token %d", id)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	f := openModel(t, "gguf/stories260K.gguf")
	for _, r := range [][2]int{{-1, 2}, {0, 6}, {3, 3}, {4, 2}} {
		if _, err := Load(f, r[0], r[1]); err == nil {
			t.Errorf("range %v accepted", r)
		}
	}
	v := openModel(t, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf")
	if _, err := Load(v, 0, 1); err == nil || !strings.Contains(err.Error(), "gpt2") {
		t.Errorf("gpt2 architecture: %v", err)
	}
	s := func() *State { m, _ := Load(f, 0, 5); return m.NewState(nil, 2, 4) }()
	if err := s.Embed([]int{600}); err == nil {
		t.Error("token outside vocabulary accepted")
	}
	c := s.m.NewCache(4)
	s.Embed([]int{1, 2})
	s.Forward(c, 2)
	s.Forward(c, 2)
	if err := s.Forward(c, 1); err == nil || !strings.Contains(err.Error(), "context full") {
		t.Errorf("overflow: %v", err)
	}
}

func BenchmarkStoriesDecode(b *testing.B) {
	f := openModel(b, "gguf/stories260K.gguf")
	m, _ := Load(f, 0, 5)
	pool := tensor.NewPool(0)
	defer pool.Close()
	s := m.NewState(pool, 1, 512)
	c := m.NewCache(512)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if c.Len == c.Capacity {
			c.Len = 0
		}
		s.Embed([]int{1})
		s.Forward(c, 1)
		s.LogitsOf(0)
	}
}

// The forward pass allocates nothing per token, batched or not, on a pool.
func TestForwardNoAlloc(t *testing.T) {
	f := openModel(t, "gguf/stories260K.gguf")
	m, _ := Load(f, 0, 5)
	pool := tensor.NewPool(2)
	defer pool.Close()
	s := m.NewState(pool, 4, 512)
	c := m.NewCache(512)
	batch := []int{1, 5, 9, 13}
	if a := testing.AllocsPerRun(20, func() {
		if c.Len+5 > c.Capacity {
			c.Len = 0
		}
		s.Embed(batch[:1])
		s.Forward(c, 1)
		s.LogitsOf(0)
		s.Embed(batch)
		s.Forward(c, 4)
		s.LogitsOf(3)
	}); a != 0 {
		t.Errorf("%v allocations per step", a)
	}
}

// quantizeModel re-encodes every matrix of m whose rows are whole 32-blocks
// (all but ffn_down in stories260K) as typ, in place.
func quantizeModel(t *testing.T, m *Model, typ tensor.Type) {
	q := func(w *tensor.Matrix) {
		if w.Cols%typ.BlockSize() != 0 {
			return
		}
		f := make([]float32, w.Rows*w.Cols)
		for r := range w.Rows {
			w.EmbedRow(r, f[r*w.Cols:(r+1)*w.Cols])
		}
		data, err := tensor.Quantize(typ, f)
		if err != nil {
			t.Fatal(err)
		}
		if *w, err = tensor.NewMatrix(typ, w.Rows, w.Cols, data); err != nil {
			t.Fatal(err)
		}
	}
	for i := range m.Blocks {
		l := &m.Blocks[i]
		for _, w := range []*tensor.Matrix{&l.Q, &l.K, &l.V, &l.O, &l.Gate, &l.Up, &l.Down} {
			q(w)
		}
	}
	q(&m.Output)
}

// With quantized weights, batched prefill (the batch kernels) and
// token-by-token decoding (the one-vector kernels) see nearly the same
// logits, on a pool, and greedy decoding stays close to the float model's.
func TestQuantizedPrefillMatchesStepwise(t *testing.T) {
	for _, typ := range []tensor.Type{tensor.Q8_0, tensor.Q4_0} {
		t.Run(typ.String(), func(t *testing.T) {
			f := openModel(t, "gguf/stories260K.gguf")
			m, _ := Load(f, 0, 5)
			quantizeModel(t, m, typ)
			pool := tensor.NewPool(2)
			defer pool.Close()
			prompt := append([]int{1}, storiesIDs(t)[:24]...)
			s := m.NewState(pool, len(prompt), 64)
			c := m.NewCache(64)
			s.Embed(prompt)
			s.Forward(c, len(prompt))
			batched := append([]float32(nil), mustLogits(t, s, len(prompt)-1)...)

			s2 := m.NewState(pool, 1, 64)
			c2 := m.NewCache(64)
			var step []float32
			for _, tok := range prompt {
				s2.Embed([]int{tok})
				s2.Forward(c2, 1)
				step = mustLogits(t, s2, 0)
			}
			// The two forms round differently, and a difference in the last
			// bit can move an activation across a quantization step in a
			// later layer, so logits agree to a fraction of their scale
			// rather than to float rounding.
			var scale float32
			for _, v := range step {
				scale = max(scale, v, -v)
			}
			for i := range step {
				if d := step[i] - batched[i]; d > 1e-2*scale || d < -1e-2*scale {
					t.Fatalf("logit %d: stepwise %v, batched %v (scale %v)", i, step[i], batched[i], scale)
				}
			}
			if testing.Verbose() {
				var md float32
				for i := range step {
					md = max(md, step[i]-batched[i], batched[i]-step[i])
				}
				t.Logf("max |stepwise - batched| = %g of scale %g", md, scale)
			}
			if argmax(step) != argmax(batched) {
				t.Errorf("stepwise picks %d, batched %d", argmax(step), argmax(batched))
			}
			// Greedy decoding of the quantized model follows the float
			// model's story for a while (Q4_0 drifts sooner).
			got := greedy(t, m, pool, []int{1}, 12)
			want := storiesIDs(t)
			same := 0
			for same < len(got) && got[same] == want[same] {
				same++
			}
			if min := map[tensor.Type]int{tensor.Q8_0: 8, tensor.Q4_0: 3}[typ]; same < min {
				t.Errorf("greedy %v: only the first %d tokens match the float model (want %d)", got, same, min)
			}
		})
	}
}

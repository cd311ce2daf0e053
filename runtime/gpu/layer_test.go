package gpu

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"strata/internal/testdata"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// The activation quantizers on the device give the CPU's quants, scales
// and sums (tensor.QuantizeQ32, QuantizeQ8K), so a whole layer's integer
// block dots are the CPU's: bit for bit on lavapipe (a device whose
// division or f16 rounding differs in the last place may move a quant by
// one; the model tests' tolerances hold either way). Zero blocks, and
// values that land on .5 steps, included.
func TestQuantizeKernels(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(21, 22))
	x := randVec(r, 4*256)
	clear(x[256:512]) // a zero block of each size
	for i := 600; i < 700; i++ {
		x[i] = float32(i%9) - 4 // small integers: quants at exact halves
	}
	buf := func(size int) *Buffer {
		b, err := d.NewBuffer(size)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Free)
		return b
	}
	in := buf(4 * len(x))
	copy(in.Float32s(), x)
	int8s := func(b *Buffer) []int8 { return unsafe.Slice((*int8)(unsafe.Pointer(&b.Bytes()[0])), len(x)) }

	q, s := buf(len(x)), buf(4*len(x)/32)
	if err := d.run(dispatch{name: "quantize_q32", buffers: []*Buffer{in, q, s}, push: pushU32(uint32(len(x) / 32)), groups: elementGroups(len(x) / 32)}); err != nil {
		t.Fatal(err)
	}
	wantQ, wantS := make([]int8, len(x)), make([]float32, len(x)/32)
	tensor.QuantizeQ32(x, wantQ, wantS)
	if !slices.Equal(int8s(q), wantQ) || !slices.Equal(s.Float32s()[:len(wantS)], wantS) {
		t.Errorf("quantize_q32 differs from tensor.QuantizeQ32")
	}

	qk, sk, sums := buf(len(x)), buf(4*len(x)/256), buf(2*len(x)/16)
	if err := d.run(dispatch{name: "quantize_q8k", buffers: []*Buffer{in, qk, sk, sums}, push: pushU32(uint32(len(x) / 256)), groups: elementGroups(len(x) / 256)}); err != nil {
		t.Fatal(err)
	}
	wantSums := make([]int16, len(x)/16)
	wantS = wantS[:len(x)/256]
	tensor.QuantizeQ8K(x, wantQ, wantS, wantSums)
	gotSums := unsafe.Slice((*int16)(unsafe.Pointer(&sums.Bytes()[0])), len(wantSums))
	if !slices.Equal(int8s(qk), wantQ) || !slices.Equal(sk.Float32s()[:len(wantS)], wantS) || !slices.Equal(gotSums, wantSums) {
		t.Errorf("quantize_q8k differs from tensor.QuantizeQ8K")
	}
}

// A whole layer on the device serves a batch of several sequences as the
// CPU does: each segment's rows at its own cache's positions, attending
// over its own cache (prefilled to different lengths), for f16 and f32
// caches; every row's logits within float rounding of the CPU's, and the
// keys and values the device stored give the CPU's next step. Grouped-
// query attention (stories260K) and latent attention (deepseek2-tiny,
// F16 weights: its dense layer whole, its mixture-of-experts layers'
// attention half).
func TestWholeLayersBatchOfSequences(t *testing.T) {
	d := openDevice(t)
	dir := t.TempDir()
	for _, mc := range []struct {
		name, path string
		products   int // matrix products a layer has at least
	}{
		{"stories260K", testdata.Path(t, "gguf/stories260K.gguf"), 7},
		{"deepseek2-tiny F16", synthModel(t, dir, "deepseek2-tiny", tensor.F16), 4},
	} {
		t.Run(mc.name, func(t *testing.T) { wholeLayersBatchOfSequences(t, d, loadModel(t, mc.path), mc.products) })
	}
}

func wholeLayersBatchOfSequences(t *testing.T, d *Device, m *model.Model, products int) {
	o, err := d.OffloadLayers(m, AllLayers)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Free()
	if whole, attention := o.WholeLayers(); whole+attention != len(m.Blocks) {
		t.Fatalf("%d whole and %d attention halves of %d layers", whole, attention, len(m.Blocks))
	}
	// The last round: a device whose binding range the caches exceed
	// (lavapipe's is 128 MiB: a long context's cache may be over a
	// device's) runs no whole layer, and fails nothing: the State runs
	// them, their products still on the device.
	maxRange := d.maxRange
	defer func() { d.maxRange = maxRange }()
	for round, kv := range []model.KVType{model.KVF16, model.KVF32, model.KVF16} {
		if round == 2 {
			d.maxRange = 32 << 10 // the products' buffers fit; a layer's cache (64 KiB and more) does not
		}
		if err := m.SetKVType(kv); err != nil {
			t.Fatal(err)
		}
		prompts := [][]int{{1, 400, 30}, {1, 17}, {1, 90, 91, 92, 93, 94, 95, 96, 97}}
		next := [][]int{{5}, {6, 7, 8}, {9}} // the batch: 1, 3 and 1 rows
		// run prefills each prompt on the CPU, then runs the batch of
		// next, accelerated by acc, and one more CPU step per sequence:
		// the logits of every row of both.
		run := func(acc model.Accelerator) [][]float32 {
			cpu := m.NewState(nil, 16, 1024)
			var caches []*model.Cache
			for _, p := range prompts {
				c := m.NewCache(1024)
				if err := cpu.Embed(p); err != nil {
					t.Fatal(err)
				}
				if err := cpu.Forward(c, len(p)); err != nil {
					t.Fatal(err)
				}
				caches = append(caches, c)
			}
			s := m.NewState(nil, 16, 1024)
			s.Accelerate(acc)
			out := batchStep(t, s, caches, next)
			for _, c := range caches {
				if err := cpu.Embed([]int{42}); err != nil {
					t.Fatal(err)
				}
				if err := cpu.Forward(c, 1); err != nil {
					t.Fatal(err)
				}
				l, err := cpu.LogitsOf(0)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, slices.Clone(l))
			}
			return out
		}
		want := run(nil)
		calls, layerRuns := o.Calls(), o.layerRuns.Load()
		got := run(o)
		if round < 2 && o.layerRuns.Load()-layerRuns < int64(len(m.Blocks)) {
			t.Fatalf("%v cache: %d layer submissions for %d layers", kv, o.layerRuns.Load()-layerRuns, len(m.Blocks))
		}
		if round == 2 && o.layerRuns.Load() != layerRuns {
			t.Fatalf("unbindable cache: %d layer submissions", o.layerRuns.Load()-layerRuns)
		}
		if round == 2 && o.Calls()-calls < int64(products*len(m.Blocks)) {
			t.Fatalf("unbindable cache: the device ran %d calls, want every product of %d layers", o.Calls()-calls, len(m.Blocks))
		}
		for i := range want {
			lo, hi := slices.Min(want[i]), slices.Max(want[i])
			for j := range want[i] {
				if diff := math.Abs(float64(got[i][j] - want[i][j])); diff > 1e-4*float64(hi-lo) {
					t.Fatalf("%v cache: row %d logit %d: %g, want %g", kv, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
}

// batchStep runs rows[i] of the sequences with caches[i] as one batch on
// s and returns every row's logits.
func batchStep(t *testing.T, s *model.State, caches []*model.Cache, rows [][]int) [][]float32 {
	t.Helper()
	var ids []int
	var segs []model.Segment
	for i, r := range rows {
		ids = append(ids, r...)
		segs = append(segs, model.Segment{Cache: caches[i], N: len(r)})
	}
	if err := s.Embed(ids); err != nil {
		t.Fatal(err)
	}
	if err := s.ForwardBatch(segs); err != nil {
		t.Fatal(err)
	}
	if s.AcceleratorErr() != nil {
		t.Fatal(s.AcceleratorErr())
	}
	var out [][]float32
	for i := range ids {
		l, err := s.LogitsOf(i)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(l))
	}
	return out
}

// synthModel writes a synthetic model of shape and weight type into dir
// (seed 7) and returns its path.
func synthModel(t *testing.T, dir, shape string, typ tensor.Type) string {
	t.Helper()
	p := filepath.Join(dir, shape+"-"+typ.String()+".gguf")
	if err := synth.WriteFile(p, model.Shapes[shape], synth.Options{Type: typ, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	return p
}

package gpu

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"strata/runtime/tensor"
)

// openDevice opens the first device. Without one the test is skipped,
// unless STRATA_WANT_VULKAN is set (make test sets it, and its deps
// install lavapipe): then it fails, so CI never skips these silently.
func openDevice(t *testing.T) *Device {
	t.Helper()
	d, err := Open(-1)
	if err != nil {
		if os.Getenv("STRATA_WANT_VULKAN") != "" {
			t.Fatalf("STRATA_WANT_VULKAN is set, and: %v", err)
		}
		t.Skipf("no Vulkan device: %v", err)
	}
	t.Cleanup(d.Close)
	t.Logf("device %d: %s (%s, shares host memory: %v)", d.Index, d.Name, d.Kind, d.SharesMemory())
	return d
}

func TestDevices(t *testing.T) {
	d := openDevice(t)
	list, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) <= d.Index || list[d.Index].Name != d.Name {
		t.Errorf("Devices() = %+v, opened %d %q", list, d.Index, d.Name)
	}
	if _, err := Open(len(list)); err == nil {
		t.Errorf("Open(%d) of %d devices: no error", len(list), len(list))
	}
}

// matmulShapes take every path of the kernels: a row shorter than a
// workgroup, lengths not a multiple of 64 (F32), several vectors, and
// more rows than one dispatch dimension holds.
var matmulShapes = []struct{ rows, cols, n int }{
	{1, 32, 1}, {7, 96, 1}, {33, 288, 3}, {300, 2048, 2}, {70000, 32, 1},
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// within checks got against want, element by element, to tol times the
// sum of the absolute products behind each (scale: one per output).
func within(t *testing.T, what string, got, want, scale []float32, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*float64(scale[i])+1e-30 || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: element %d: %g, want %g (difference %g, allowed %g)", what, i, got[i], want[i], d, tol*float64(scale[i]))
		}
	}
}

// absProducts is |W| |x|: the scale of each output's rounding error.
func absProducts(w []float32, x []float32, rows, cols, n int) []float32 {
	out := make([]float32, rows*n)
	for v := range n {
		for r := range rows {
			var s float64
			for c := range cols {
				s += math.Abs(float64(w[r*cols+c]) * float64(x[v*cols+c]))
			}
			out[v*rows+r] = float32(s)
		}
	}
	return out
}

// TestMatMulF32 agrees with tensor.MatMul within float32 rounding (the
// sums run in another order: 64 strided partial sums and a tree).
func TestMatMulF32(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range matmulShapes {
		wf := randVec(r, s.rows*s.cols)
		x := randVec(r, s.n*s.cols)
		raw, err := tensor.Quantize(tensor.F32, wf)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tensor.NewMatrix(tensor.F32, s.rows, s.cols, raw)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, s.rows*s.n)
		tensor.MatMul(nil, want, m, x, s.n)
		dm, err := d.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(want))
		if err := d.MatMul(got, dm, x, s.n); err != nil {
			t.Fatal(err)
		}
		dm.Free()
		within(t, "F32", got, want, absProducts(wf, x, s.rows, s.cols, s.n), 4*float64(s.cols)*0x1p-24)
	}
}

// TestMatMulQ8_0 agrees with tensor.MatMulAct: the same quantized
// activations, every block's integer dot exact, the float sums of the
// blocks in another order.
func TestMatMulQ8_0(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range matmulShapes {
		wf := randVec(r, s.rows*s.cols)
		x := randVec(r, s.n*s.cols)
		raw, err := tensor.Quantize(tensor.Q8_0, wf)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tensor.NewMatrix(tensor.Q8_0, s.rows, s.cols, raw)
		if err != nil {
			t.Fatal(err)
		}
		a := tensor.NewActivations(s.n, s.cols)
		a.Set(x, s.n)
		want := make([]float32, s.rows*s.n)
		tensor.MatMulAct(nil, want, m, a)
		dm, err := d.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(want))
		if err := d.MatMul(got, dm, x, s.n); err != nil {
			t.Fatal(err)
		}
		dm.Free()

		// The scale of the float error: the blocks' |scaled integer dots|,
		// from the dequantized weights and the activations' quants.
		deq := make([]float32, len(wf))
		if err := tensor.Dequantize(tensor.Q8_0, raw, deq); err != nil {
			t.Fatal(err)
		}
		q := make([]int8, len(x))
		ds := make([]float32, len(x)/32)
		tensor.QuantizeQ32(x, q, ds)
		xq := make([]float32, len(x))
		for i := range xq {
			xq[i] = float32(q[i]) * ds[i/32]
		}
		within(t, "Q8_0", got, want, absProducts(deq, xq, s.rows, s.cols, s.n), 4*float64(s.cols/32+8)*0x1p-24)
	}
}

// A weight type without a kernel is refused, so the caller keeps it on
// the CPU.
func TestUploadRefusesOtherTypes(t *testing.T) {
	d := openDevice(t)
	raw, err := tensor.Quantize(tensor.Q4_K, make([]float32, 256))
	if err != nil {
		t.Fatal(err)
	}
	m, err := tensor.NewMatrix(tensor.Q4_K, 1, 256, raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Upload(m); err == nil {
		t.Error("Q4_K uploaded; no kernel for it yet")
	}
}

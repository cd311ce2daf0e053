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
	t.Logf("device %d: %s (%s, shares host memory: %v, imports host memory aligned to %d, binds at offsets of %d)", d.Index, d.Name, d.Kind, d.SharesMemory(), d.importAlign, d.offsetAlign)
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

// The shapes of each type's test take every path of the kernels: a row
// shorter than a workgroup's stride, rows of a few and of many blocks,
// several vectors, and more rows than one dispatch dimension holds.
func matmulShapes(block int) []struct{ rows, cols, n int } {
	b := max(block, 32)
	return []struct{ rows, cols, n int }{
		{1, b, 1}, {7, 3 * b, 1}, {33, 9 * b, 3}, {300, max(2048, 8*b), 2}, {70000, b, 1},
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// absProducts is |W| |x| for each output: the scale of its rounding error.
func absProducts(w []float32, x []float32, rows, cols, n int) []float64 {
	out := make([]float64, rows*n)
	for v := range n {
		for r := range rows {
			var s float64
			for c := range cols {
				s += math.Abs(float64(w[r*cols+c]) * float64(x[v*cols+c]))
			}
			out[v*rows+r] = s
		}
	}
	return out
}

// inputAsCPU is x as the CPU's kernels see it for weights of type t: the
// quantized activations, dequantized.
func inputAsCPU(t tensor.Type, x []float32) []float32 {
	out := make([]float32, len(x))
	switch kernelOf[t].input {
	case floats:
		copy(out, x)
	case quants32:
		q, d := make([]int8, len(x)), make([]float32, len(x)/32)
		tensor.QuantizeQ32(x, q, d)
		for i := range out {
			out[i] = float32(q[i]) * d[i/32]
		}
	case quantsK:
		q, d, s := make([]int8, len(x)), make([]float32, len(x)/256), make([]int16, len(x)/16)
		tensor.QuantizeQ8K(x, q, d, s)
		for i := range out {
			out[i] = float32(q[i]) * d[i/256]
		}
	}
	return out
}

// TestMatMul: every weight type with a kernel agrees with the CPU's
// tensor.MatMulAct on the same quantized activations. The block dots
// are exact integers on both; the floats that sum them run in another
// order (64 strided partial sums and a tree), so each output may differ
// by float32 rounding of the sums behind it: a few units of 2^-24 per
// addition, relative to |W||x| (and, for Q4_K, whose scaled dots and
// mins are summed apart and then subtracted, to both sums).
func TestMatMul(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []tensor.Type{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K} {
		k := kernelOf[typ]
		for _, s := range matmulShapes(k.block) {
			wf := randVec(r, s.rows*s.cols)
			x := randVec(r, s.n*s.cols)
			raw, err := tensor.Quantize(typ, wf)
			if err != nil {
				t.Fatal(err)
			}
			m, err := tensor.NewMatrix(typ, s.rows, s.cols, raw)
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

			deq := make([]float32, len(wf))
			if err := tensor.Dequantize(typ, raw, deq); err != nil {
				t.Fatal(err)
			}
			scale := absProducts(deq, inputAsCPU(typ, x), s.rows, s.cols, s.n)
			adds := float64(s.cols/k.block + 64)
			if typ == tensor.Q4_K {
				adds *= 4 // the mins' sum as large as the dots'
			}
			for i := range want {
				diff := math.Abs(float64(got[i] - want[i]))
				if allowed := adds * 0x1p-24 * scale[i]; diff > allowed || math.IsNaN(float64(got[i])) {
					t.Fatalf("%v %dx%d, %d vectors: element %d: %g, want %g (difference %g, allowed %g)",
						typ, s.rows, s.cols, s.n, i, got[i], want[i], diff, allowed)
				}
			}
		}
	}
}

// TestMatMulIntegerDotsExact: with every scale a power of two and
// integer activations whose blocks reach ±127 (so their quants are the
// values themselves and their scales 1), every product and sum is exact
// in float32 whatever the order, so the device must give the CPU's
// results bit for bit: an integer block dot off by one shows. The blocks
// are random bytes with the scale fields set.
func TestMatMulIntegerDotsExact(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(5, 6))
	scales := map[tensor.Type]struct {
		bytes   int
		offsets []int // of the f16 scales in a block
	}{
		tensor.Q8_0: {34, []int{0}}, tensor.Q4_0: {18, []int{0}},
		tensor.Q4_K: {144, []int{0, 2}}, tensor.Q6_K: {210, []int{208}},
	}
	for typ, sc := range scales {
		k := kernelOf[typ]
		rows, cols, n := 33, 2*max(k.block, 32), 3
		raw := make([]byte, rows*cols/max(k.block, 32)*sc.bytes)
		for i := range raw {
			raw[i] = byte(r.Uint32())
		}
		for b := 0; b < len(raw); b += sc.bytes {
			for _, off := range sc.offsets {
				raw[b+off], raw[b+off+1] = 0x00, 0x24 // f16 2^-6
			}
		}
		m, err := tensor.NewMatrix(typ, rows, cols, raw)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(r.IntN(255) - 127)
			if i%32 == 5 {
				x[i] = 127
			}
		}
		a := tensor.NewActivations(n, cols)
		a.Set(x, n)
		want := make([]float32, rows*n)
		tensor.MatMulAct(nil, want, m, a)
		dm, err := d.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(want))
		if err := d.MatMul(got, dm, x, n); err != nil {
			t.Fatal(err)
		}
		dm.Free()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%v: element %d: %g, want %g exactly", typ, i, got[i], want[i])
			}
		}
	}
}

// A weight type without a kernel is refused, so the caller keeps it on
// the CPU.
func TestUploadRefusesOtherTypes(t *testing.T) {
	d := openDevice(t)
	raw, err := tensor.Quantize(tensor.Q5_K, make([]float32, 256))
	if err != nil {
		t.Fatal(err)
	}
	m, err := tensor.NewMatrix(tensor.Q5_K, 1, 256, raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Upload(m); err == nil {
		t.Error("Q5_K uploaded; no kernel for it yet")
	}
}

// Weights the device cannot bind where they lie (here: at an odd
// address) are copied, and multiply the same as weights read in place.
func TestUploadCopiesWhatItCannotImport(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(7, 8))
	rows, cols := 9, 64
	raw, err := tensor.Quantize(tensor.Q8_0, randVec(r, rows*cols))
	if err != nil {
		t.Fatal(err)
	}
	odd := make([]byte, len(raw)+1)[1:]
	copy(odd, raw)
	x := randVec(r, cols)
	var outs [2][]float32
	for i, data := range [][]byte{raw, odd} {
		m, err := tensor.NewMatrix(tensor.Q8_0, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		dm, err := d.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && dm.Imported() {
			t.Errorf("weights at an odd address imported (binding offsets of %d)", d.offsetAlign)
		}
		outs[i] = make([]float32, rows)
		if err := d.MatMul(outs[i], dm, x, 1); err != nil {
			t.Fatal(err)
		}
		dm.Free()
	}
	for i := range outs[0] {
		if outs[0][i] != outs[1][i] {
			t.Fatalf("row %d: %g copied, %g in place", i, outs[1][i], outs[0][i])
		}
	}
}

// A matrix larger than the device binds stays on the CPU; the others
// are offloaded.
func TestOffloadSkipsWhatTheDeviceCannotBind(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(15, 16))
	small, err := tensor.NewMatrix(tensor.F32, 2, 32, mustQuantize(t, tensor.F32, randVec(r, 64)))
	if err != nil {
		t.Fatal(err)
	}
	big, err := tensor.NewMatrix(tensor.F32, 4, 32, mustQuantize(t, tensor.F32, randVec(r, 128)))
	if err != nil {
		t.Fatal(err)
	}
	limit := d.maxRange
	d.maxRange = uint64(len(small.Data)) // as if the device bound no more
	defer func() { d.maxRange = limit }()
	o, err := d.Offload([]tensor.Matrix{small, big})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Free()
	if held, _ := o.Held(); held != 1 {
		t.Fatalf("%d matrices offloaded, want the small one", held)
	}
	if ok, _ := o.MatMul(make([]float32, 4), big, randVec(r, 32), 1); ok {
		t.Error("the big matrix was multiplied on the device")
	}
}

func mustQuantize(t *testing.T, typ tensor.Type, v []float32) []byte {
	t.Helper()
	raw, err := tensor.Quantize(typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

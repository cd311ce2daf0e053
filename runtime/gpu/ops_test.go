package gpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"strata/runtime/tensor"
)

// near checks got against want element by element, to rel of |want|.
func near(t *testing.T, what string, got, want []float32, rel float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > rel*math.Abs(float64(want[i]))+1e-30 || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: element %d: %g, want %g (relative %g, allowed %g)", what, i, got[i], want[i], d/math.Abs(float64(want[i])), rel)
		}
	}
}

// RMSNorm agrees with tensor.RMSNorm within float32 rounding (the squares
// summed in float32 in a tree there, in float64 here): rows shorter and
// longer than a workgroup's stride.
func TestRMSNorm(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range []struct{ rows, n int }{{1, 7}, {3, 288}, {5, 2048}} {
		x, w := randVec(r, s.rows*s.n), randVec(r, s.n)
		want := make([]float32, len(x))
		for i := range s.rows {
			tensor.RMSNorm(want[i*s.n:(i+1)*s.n], x[i*s.n:(i+1)*s.n], w, 1e-5)
		}
		got := make([]float32, len(x))
		if err := d.RMSNorm(got, x, w, 1e-5); err != nil {
			t.Fatal(err)
		}
		near(t, "RMSNorm", got, want, 1e-6)
	}
}

// SwiGLU agrees with tensor.SwiGLU within float32 rounding (each exp is
// the device's), also past 65535 workgroups.
func TestSwiGLU(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 1000, 65535*64 + 100} {
		gate, up := randVec(r, n), randVec(r, n)
		for i := range gate {
			gate[i] *= 8 // the saturated tails too
		}
		want := make([]float32, n)
		tensor.SwiGLU(want, gate, up)
		got := make([]float32, n)
		if err := d.SwiGLU(got, gate, up); err != nil {
			t.Fatal(err)
		}
		near(t, "SwiGLU", got, want, 4e-6)
	}
}

// RoPE turns the heads as tensor.RoPEFactors: the same angles
// (tensor.RoPETable) and unfused products, so on amd64, where Go fuses
// nothing, bit for bit; normal and NeoX pairs, partial rotation, Llama
// 3.1's frequency factors, positions up to 100000.
func TestRoPE(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(13, 14))
	const heads, headDim = 4, 64
	factors := make([]float32, 32)
	for i := range factors {
		factors[i] = 1 + float32(i)/4
	}
	for _, c := range []struct {
		ropeDim int
		neox    bool
		factors []float32
	}{{64, false, nil}, {64, true, nil}, {32, true, nil}, {64, false, factors}} {
		positions := []int{0, 1, 17, 4095, 100000}
		x := randVec(r, len(positions)*heads*headDim)
		want := append([]float32(nil), x...)
		for i, pos := range positions {
			tensor.RoPEFactors(want[i*heads*headDim:(i+1)*heads*headDim], heads, headDim, c.ropeDim, pos, 10000, 1, c.neox, c.factors)
		}
		if err := d.RoPE(x, heads, headDim, c.ropeDim, positions, 10000, 1, c.neox, c.factors); err != nil {
			t.Fatal(err)
		}
		rel := 0.0
		if runtime.GOARCH != "amd64" {
			rel = 1e-6 // Go may fuse a*cos - b*sin there
		}
		near(t, "RoPE", x, want, rel)
	}
}

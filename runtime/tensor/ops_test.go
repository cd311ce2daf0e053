package tensor

import (
	"math"
	"testing"
)

func TestRMSNorm(t *testing.T) {
	for _, n := range []int{1, 7, 64, 1000} {
		x := testData("uniform", n, uint64(n))
		w := testData("positive", n, uint64(n)+1)
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		const eps = 1e-5
		scale := 1 / math.Sqrt(ss/float64(n)+eps)
		out := make([]float32, n)
		RMSNorm(out, x, w, eps)
		for i := range x {
			want := float64(x[i]) * scale * float64(w[i])
			if math.Abs(float64(out[i])-want) > 1e-6*math.Abs(want)+1e-7 {
				t.Fatalf("n=%d: out[%d] = %g, want %g", n, i, out[i], want)
			}
		}
		RMSNorm(x, x, w, eps) // aliasing
		for i := range x {
			if x[i] != out[i] {
				t.Fatalf("aliased RMSNorm differs at %d", i)
			}
		}
	}
}

// TestRMSNormRoundsAsGGML pins RMSNorm's scale to the roundings of ggml's
// rms_norm (ggml-cpu ops.cpp): each square rounded to float32 and summed in
// float64, the mean narrowed to float32, then sqrt and reciprocal in
// float32; out = x*scale*weight, multiplied in that order. Computing the
// scale in float64 throughout is as accurate but lands an ulp away for
// some vectors, and the next matrix product quantizes its input to 8 bits:
// where the input has exact ties at half a step (a row of a Q3_K or IQ4_XS
// embedding does), an ulp decides the rounding, and whole-model logits of
// such a model moved by 2% against llama.cpp's.
func TestRMSNormRoundsAsGGML(t *testing.T) {
	const eps = 1e-5
	differs := 0 // vectors where the all-float64 scale is another float32
	for seed := range uint64(200) {
		n := 256
		x := testData("uniform", n, 1000+seed)
		w := testData("positive", n, 2000+seed)
		var ss, ss64 float64
		for _, v := range x {
			ss += float64(float32(v * v))
			ss64 += float64(v) * float64(v)
		}
		mean := float32(ss / float64(n))
		scale := 1 / float32(math.Sqrt(float64(mean+eps)))
		if float32(1/math.Sqrt(ss64/float64(n)+eps)) != scale {
			differs++
		}
		out := make([]float32, n)
		RMSNorm(out, x, w, eps)
		for i := range x {
			if want := x[i] * scale * w[i]; out[i] != want {
				t.Fatalf("seed %d: out[%d] = %g, want %g (ggml's roundings)", seed, i, out[i], want)
			}
		}
	}
	// Without such vectors this test could not tell the two apart.
	if differs == 0 {
		t.Fatal("no vector where the roundings matter: the test checks nothing")
	}
	t.Logf("%d of 200 vectors have another scale in all-float64 arithmetic", differs)
}

func TestSoftmax(t *testing.T) {
	tests := []struct {
		name string
		x    []float32
	}{
		{"one", []float32{3}},
		{"small", []float32{1, 2, 3}},
		{"large values", []float32{1000, 1001, 999, -50}},
		{"masked", []float32{0.5, float32(math.Inf(-1)), 2, float32(math.Inf(-1))}},
		{"random", testData("normal", 500, 3)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mx := math.Inf(-1)
			for _, v := range tc.x {
				mx = math.Max(mx, float64(v))
			}
			var sum float64
			for _, v := range tc.x {
				sum += math.Exp(float64(v) - mx)
			}
			got := append([]float32(nil), tc.x...)
			Softmax(got)
			var total float64
			for i, v := range tc.x {
				want := math.Exp(float64(v)-mx) / sum
				if math.Abs(float64(got[i])-want) > 1e-6*want+1e-9 {
					t.Errorf("[%d] = %g, want %g", i, got[i], want)
				}
				total += float64(got[i])
			}
			if math.Abs(total-1) > 1e-5 {
				t.Errorf("sum %g", total)
			}
		})
	}
	Softmax(nil)
}

func TestRoPE(t *testing.T) {
	// Two heads of 6 dims, rotating the first 4 (ropeDim 4, so 2 pairs),
	// pos 1, base 10000, scale 1: theta_0 = 1 rad, theta_1 = 1*10000^(-2/4)
	// = 0.01 rad. Each pair (a, b) -> (a cos - b sin, a sin + b cos).
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	c0, s0 := math.Cos(1), math.Sin(1)
	c1, s1 := math.Cos(0.01), math.Sin(0.01)
	rot := func(a, b, c, s float64) (float64, float64) { return a*c - b*s, a*s + b*c }
	var normal, neox [12]float64
	for h := range 2 {
		o := 6 * h
		v := func(i int) float64 { return float64(x[o+i]) }
		// normal: pairs (0,1) with theta_0, (2,3) with theta_1.
		normal[o+0], normal[o+1] = rot(v(0), v(1), c0, s0)
		normal[o+2], normal[o+3] = rot(v(2), v(3), c1, s1)
		// neox: pairs (0,2) with theta_0, (1,3) with theta_1.
		neox[o+0], neox[o+2] = rot(v(0), v(2), c0, s0)
		neox[o+1], neox[o+3] = rot(v(1), v(3), c1, s1)
		for _, i := range []int{4, 5} { // beyond ropeDim: unchanged
			normal[o+i], neox[o+i] = v(i), v(i)
		}
	}
	// First head, worked by hand: normal (1,2) by 1 rad is
	// (cos1 - 2 sin1, sin1 + 2 cos1) = (-1.1426, 1.9220).
	if math.Abs(normal[0]+1.14264)+math.Abs(normal[1]-1.92208) > 1e-4 {
		t.Fatalf("hand check: %v %v", normal[0], normal[1])
	}
	for _, tc := range []struct {
		name string
		neox bool
		want [12]float64
	}{{"normal", false, normal}, {"neox", true, neox}} {
		t.Run(tc.name, func(t *testing.T) {
			got := append([]float32(nil), x...)
			RoPE(got, 2, 6, 4, 1, 10000, 1, tc.neox)
			for i := range got {
				if math.Abs(float64(got[i])-tc.want[i]) > 1e-5*math.Max(1, math.Abs(tc.want[i])) {
					t.Errorf("[%d] = %g, want %g", i, got[i], tc.want[i])
				}
			}
		})
	}
	// freqScale scales the position: pos 4 at scale 0.25 equals pos 1.
	a := append([]float32(nil), x...)
	b := append([]float32(nil), x...)
	RoPE(a, 2, 6, 4, 4, 10000, 0.25, false)
	RoPE(b, 2, 6, 4, 1, 10000, 1, false)
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6 {
			t.Errorf("freqScale: [%d] %g vs %g", i, a[i], b[i])
		}
	}
	// Position 0 is the identity.
	c := append([]float32(nil), x...)
	RoPE(c, 2, 6, 6, 0, 10000, 1, true)
	for i := range c {
		if c[i] != x[i] {
			t.Errorf("pos 0 changed [%d]", i)
		}
	}
}

func TestActivations(t *testing.T) {
	for _, v := range []float32{-100, -5, -1, -0.5, 0, 0.5, 1, 3, 20, 100} {
		want := float64(v) / (1 + math.Exp(-float64(v)))
		if got := SiLU(v); math.Abs(float64(got)-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("SiLU(%g) = %g, want %g", v, got, want)
		}
	}
	gate := []float32{-1, 0, 1, 2}
	up := []float32{2, 3, 4, -1}
	out := make([]float32, 4)
	SwiGLU(out, gate, up)
	for i := range out {
		if want := SiLU(gate[i]) * up[i]; out[i] != want {
			t.Errorf("SwiGLU[%d] = %g, want %g", i, out[i], want)
		}
	}
	SwiGLU(gate, gate, up) // aliasing
	for i := range out {
		if gate[i] != out[i] {
			t.Errorf("aliased SwiGLU[%d]", i)
		}
	}
	dst := []float32{1, 2, 3}
	Add(dst, []float32{0.5, -2, 10})
	if dst[0] != 1.5 || dst[1] != 0 || dst[2] != 13 {
		t.Errorf("Add = %v", dst)
	}
}

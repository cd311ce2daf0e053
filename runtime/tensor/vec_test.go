package tensor

import (
	"math"
	"testing"
)

// Dot, Axpy and SwiGLU feed the activation quantizer in a forward pass,
// where a difference in the last bit can move a value across a rounding
// step and change the logits by a quantization step: so every
// implementation must equal the generic one bit for bit, over every
// length 0..n (the 32-, 8- and 1-element tails).
func TestFloatOpsBitExact(t *testing.T) {
	const n = 200
	a := testData("normal", n, 21)
	b := testData("uniform", n, 22)
	gate := testData("normal", n, 23)
	for i := range gate {
		gate[i] *= 8 // SiLU's curved part and both tails
	}
	// exp's clamp (±88.376, where 2^n overflows), zeros, tiny values.
	copy(gate, []float32{-100, 100, -88.5, 88.5, -88.37, 88.37, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, -87, 87})
	for m := 0; m <= n; m++ {
		var dotWant float32
		axpyWant := append([]float32(nil), b[:m]...)
		swiWant := make([]float32, m)
		withGeneric(func() {
			dotWant = Dot(a[:m], b[:m])
			Axpy(axpyWant, -0.37, a[:m])
			SwiGLU(swiWant, gate[:m], b[:m])
		})
		eachImpl(t, func(t *testing.T) {
			if got := Dot(a[:m], b[:m]); math.Float32bits(got) != math.Float32bits(dotWant) {
				t.Fatalf("Dot n=%d: %g, generic %g", m, got, dotWant)
			}
			got := append([]float32(nil), b[:m]...)
			Axpy(got, -0.37, a[:m])
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(axpyWant[i]) {
					t.Fatalf("Axpy n=%d [%d]: %g, generic %g", m, i, got[i], axpyWant[i])
				}
			}
			SwiGLU(got, gate[:m], b[:m])
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(swiWant[i]) {
					t.Fatalf("SwiGLU n=%d [%d]: SwiGLU(%g, %g) = %g, generic %g", m, i, gate[i], b[i], got[i], swiWant[i])
				}
			}
		})
	}
}

// expf32 stays within 2 ulp-ish (3e-7 relative) of the exact exponential
// over the range where it does not clamp.
func TestExpF32(t *testing.T) {
	var worst float64
	for x := -87.0; x <= 88; x += 0.0137 {
		got := float64(expf32(float32(x)))
		want := math.Exp(float64(float32(x)))
		worst = max(worst, math.Abs(got-want)/want)
	}
	if worst > 3e-7 {
		t.Fatalf("expf32: worst relative error %.3g", worst)
	}
}

// BenchmarkFloatOps times Dot (a head of 128), Axpy (the same) and SwiGLU
// (an FFN row of 5632) with each kernel set.
func BenchmarkFloatOps(b *testing.B) {
	x, y := testData("normal", 5632, 1), testData("normal", 5632, 2)
	out := make([]float32, 5632)
	for _, im := range implementations {
		im.use(true)
		b.Run("Dot128/"+im.name, func(b *testing.B) {
			for b.Loop() {
				Dot(x[:128], y[:128])
			}
		})
		b.Run("Axpy128/"+im.name, func(b *testing.B) {
			for b.Loop() {
				Axpy(out[:128], 0.5, x[:128])
			}
		})
		b.Run("SwiGLU5632/"+im.name, func(b *testing.B) {
			for b.Loop() {
				SwiGLU(out, x, y)
			}
		})
		im.use(false)
	}
}

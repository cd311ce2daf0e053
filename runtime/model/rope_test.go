package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"strata/runtime/tensor"
)

// tensor.RoPEFactors turns each pair by pos*scale*base^(-2i/d)/factors[i], the
// angle llama.cpp's ggml_rope_ext gives with freq_factors (theta/ff, then
// times freq_scale), at positions past Llama 3.1's original context
// included; with factors of 1 it is tensor.RoPE exactly.
func TestRopeFactorsFormula(t *testing.T) {
	const heads, hd, rd = 3, 16, 12
	r := rand.New(rand.NewPCG(1, 2))
	factors := make([]float32, rd/2)
	for i := range factors {
		factors[i] = 1 + 7*r.Float32()
	}
	ones := make([]float32, rd/2)
	for i := range ones {
		ones[i] = 1
	}
	for _, neox := range []bool{false, true} {
		for _, pos := range []int{0, 1, 8191, 8192, 8299, 131071} {
			x := make([]float32, heads*hd)
			for i := range x {
				x[i] = r.Float32()*2 - 1
			}
			got := append([]float32(nil), x...)
			tensor.RoPEFactors(got, heads, hd, rd, pos, 500000, 0.5, neox, factors)
			for h := 0; h < heads; h++ {
				for i := 0; i < rd/2; i++ {
					theta := float64(pos) * 0.5 * math.Pow(500000, -float64(2*i)/rd) / float64(factors[i])
					ia, ib := h*hd+2*i, h*hd+2*i+1
					if neox {
						ia, ib = h*hd+i, h*hd+i+rd/2
					}
					a, b := float64(x[ia]), float64(x[ib])
					wa, wb := a*math.Cos(theta)-b*math.Sin(theta), a*math.Sin(theta)+b*math.Cos(theta)
					if math.Abs(float64(got[ia])-wa) > 1e-5 || math.Abs(float64(got[ib])-wb) > 1e-5 {
						t.Fatalf("neox %v pos %d head %d pair %d: (%v, %v), want (%v, %v)", neox, pos, h, i, got[ia], got[ib], wa, wb)
					}
				}
				for i := rd; i < hd; i++ { // past the rotated dimensions: untouched
					if got[h*hd+i] != x[h*hd+i] {
						t.Fatalf("element %d of head %d changed", i, h)
					}
				}
			}
			plain, one := append([]float32(nil), x...), append([]float32(nil), x...)
			tensor.RoPE(plain, heads, hd, rd, pos, 500000, 0.5, neox)
			tensor.RoPEFactors(one, heads, hd, rd, pos, 500000, 0.5, neox, ones)
			for i := range plain {
				if plain[i] != one[i] {
					t.Fatalf("neox %v pos %d: factors of 1 give %v, tensor.RoPE %v at %d", neox, pos, one[i], plain[i], i)
				}
			}
		}
	}
}

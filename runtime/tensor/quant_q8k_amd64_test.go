//go:build !purego

package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The AVX-512 Q8_K quantizer equals quantizeQ8KGeneric bit for bit (quants,
// scales, 16-sums) for 1 to 9 blocks of many kinds: normal values at many
// scales, ties of +m and -m (first one first, either sign), zeros and
// negative zeros, subnormals, and blocks with an Inf or a NaN (which the
// kernel leaves to Go), mixed in one call.
func TestQuantizeQ8KAVX512(t *testing.T) {
	if !hasAVX512 {
		t.Log("no AVX-512 here: the assembly Q8_K quantizer not run")
		return
	}
	r := rand.New(rand.NewPCG(7, 8))
	kinds := []func(x []float32){
		func(x []float32) { // normal, random scale
			s := float32(math.Pow(10, r.Float64()*8-4))
			for i := range x {
				x[i] = float32(r.NormFloat64()) * s
			}
		},
		func(x []float32) { // a tie: +m and -m, in random order
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			i, j := r.IntN(qkK), r.IntN(qkK)
			if i != j {
				x[i], x[j] = 9, -9
			}
		},
		func(x []float32) { clear(x) },
		func(x []float32) {
			for i := range x {
				x[i] = float32(math.Copysign(0, -1))
			}
			x[r.IntN(qkK)] = 0
		},
		func(x []float32) { // subnormals
			for i := range x {
				x[i] = math.Float32frombits(uint32(r.IntN(1 << 20)))
				if r.IntN(2) == 0 {
					x[i] = -x[i]
				}
			}
		},
		func(x []float32) { // small integers: many equal magnitudes
			for i := range x {
				x[i] = float32(r.IntN(7) - 3)
			}
		},
		func(x []float32) {
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			x[r.IntN(qkK)] = float32(math.Inf(1 - 2*r.IntN(2)))
		},
		func(x []float32) {
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			x[r.IntN(qkK)] = float32(math.NaN())
		},
	}
	for trial := range 400 {
		nb := 1 + trial%9
		x := make([]float32, nb*qkK)
		for b := range nb {
			k := r.IntN(len(kinds))
			if trial%4 == 0 {
				k = 0
			}
			kinds[k](x[b*qkK : (b+1)*qkK])
		}
		q, d, bs := make([]int8, len(x)), make([]float32, nb), make([]int16, nb*16)
		wq, wd, wbs := make([]int8, len(x)), make([]float32, nb), make([]int16, nb*16)
		quantizeQ8K(x, q, d, bs)
		quantizeQ8KGeneric(x, wq, wd, wbs)
		for b := range nb {
			if math.Float32bits(d[b]) != math.Float32bits(wd[b]) {
				t.Fatalf("trial %d block %d: d = %g, want %g", trial, b, d[b], wd[b])
			}
		}
		for i := range q {
			if q[i] != wq[i] {
				t.Fatalf("trial %d: q[%d] = %d, want %d", trial, i, q[i], wq[i])
			}
		}
		for i := range bs {
			if bs[i] != wbs[i] {
				t.Fatalf("trial %d: bsums[%d] = %d, want %d", trial, i, bs[i], wbs[i])
			}
		}
	}
}

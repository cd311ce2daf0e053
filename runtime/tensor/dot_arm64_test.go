//go:build !purego

package tensor

import (
	"math"
	"testing"
)

// The multi-vector kernels (dot4) equal dotAct for each of the four
// vectors, bit for bit for the quantized types and within dotRelTol for
// the float types, for every block count up to a few unrolled rounds and
// for both groups of four of eight vectors.
func TestDot4Implementations(t *testing.T) {
	cases := []struct {
		t     Type
		blk   int
		maxNB int
	}{{Q8_0, 32, 40}, {Q4_0, 32, 40}, {Q4_K, 256, 6}, {Q5_K, 256, 6}, {Q6_K, 256, 6}, {Q2_K, 256, 6}, {Q3_K, 256, 6}, {IQ4_XS, 256, 6}, {F32, 1, 70}, {F16, 1, 70}, {BF16, 1, 70}}
	for _, c := range cases {
		t.Run(c.t.String(), func(t *testing.T) {
			for nb := 1; nb <= c.maxNB; nb++ {
				cols := nb * c.blk
				w, deq := randomMatrix(t, c.t, 1, cols, uint64(nb)+3)
				x := testData("normal", 8*cols, uint64(nb)+7)
				a := NewActivations(8, cols)
				a.Set(x, 8)
				var want [8]float32
				withGeneric(func() {
					a.prepare(c.t)
					for v := range 8 {
						want[v] = dotAct(c.t, w.Data, a, v, cols)
					}
				})
				eachImpl(t, func(t *testing.T) {
					for i := 0; i < 8; i += 4 {
						var out [4]float32
						if !dot4(c.t, w.Data, a, i, cols, &out) {
							return
						}
						for v := range 4 {
							got, w0 := out[v], want[i+v]
							if c.blk == 1 {
								if e, mag := dotErr(got, deq, x[(i+v)*cols:(i+v+1)*cols]); e > dotRelTol*mag+1e-30 {
									t.Fatalf("%d elements, vector %d: %g, error %.3g", cols, i+v, got, e)
								}
							} else if math.Float32bits(got) != math.Float32bits(w0) {
								t.Fatalf("%d blocks, vector %d: %g, generic %g", nb, i+v, got, w0)
							}
						}
					}
				})
			}
		})
	}
}

//go:build !purego

package tensor

import (
	"math"
	"testing"
)

// The two-vector F32 kernel (dotRowsPair, AVX-512) gives each vector the
// bits dotRows gives it alone, for widths around its 16- and 8-float
// steps and its tail, row ranges with and without a last partial group
// of four, and writes nothing past the rows it is given.
func TestDotRowsPairF32(t *testing.T) {
	if !useAVX512 {
		t.Skip("the two-vector F32 kernel needs AVX-512; this CPU has none")
	}
	const rows = 13
	widths := []int{1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 63, 64, 65, 172, 200}
	for _, cols := range widths {
		w, _ := randomMatrix(t, F32, rows, cols, uint64(cols)+3)
		a := NewActivations(3, cols)
		a.Set(testData("normal", 3*cols, uint64(cols)+5), 3)
		a.prepare(F32)
		for v := range 2 { // vectors 0,1 and 1,2
			for lo := range 5 {
				for hi := lo + 4; hi <= rows; hi++ {
					want := make([][]float32, 2)
					for k := range 2 {
						want[k] = make([]float32, hi-lo)
						if !dotRows(w, a, v+k, lo, hi, want[k]) {
							t.Fatal("dotRows does not take F32 here")
						}
					}
					buf := make([]float32, 2*(hi-lo+1))
					for i := range buf {
						buf[i] = -7
					}
					o0, o1 := buf[:hi-lo], buf[hi-lo+1:2*(hi-lo)+1]
					if !dotRowsPair(w, a, v, lo, hi, o0, o1) {
						t.Fatalf("cols %d rows [%d,%d): dotRowsPair declined", cols, lo, hi)
					}
					if buf[hi-lo] != -7 || buf[len(buf)-1] != -7 {
						t.Fatalf("cols %d rows [%d,%d): wrote past its rows", cols, lo, hi)
					}
					for k, o := range [][]float32{o0, o1} {
						for r := range o {
							if math.Float32bits(o[r]) != math.Float32bits(want[k][r]) {
								t.Fatalf("cols %d rows [%d,%d), vector %d, row %d: %g, alone %g", cols, lo, hi, v+k, lo+r, o[r], want[k][r])
							}
						}
					}
				}
			}
		}
	}
}

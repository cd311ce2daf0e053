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

// The four- and eight-vector Q8_0 kernels in 64-byte registers
// (dotQ8_0x4Z, dotQ8_0x8Z, chosen on AMD's CPUs) give the 32-byte
// kernel's bits, which are the generic ones: every block count 1..21
// (pairs and a lone last block), weights of -128 and 127, both groups of
// four of eight vectors.
func TestDot4Q8_0Wide(t *testing.T) {
	if !hasAVX512 {
		t.Skip("the 64-byte Q8_0 kernel needs AVX-512; this CPU has none")
	}
	for nb := 1; nb <= 21; nb++ {
		cols := 32 * nb
		w, _ := randomMatrix(t, Q8_0, 1, cols, uint64(nb)+41)
		w.Data[2], w.Data[3] = 0x80, 0x7f // -128 and 127
		w.Data[q80Bytes*(nb-1)+33] = 0x80
		a := NewActivations(8, cols)
		a.Set(testData("normal", 8*cols, uint64(nb)+43), 8)
		var want [8]float32
		withGeneric(func() {
			a.prepare(Q8_0)
			for v := range 8 {
				want[v] = dotAct(Q8_0, w.Data, a, v, cols)
			}
		})
		a.prepare(Q8_0)
		for i := 0; i < 8; i += 4 {
			var narrow, wide [4]float32
			dotQ8_0x4AVX512(&w.Data[0], &a.q32[i*cols], &a.d32x4[i*nb], nb, cols, &narrow[0])
			dotQ8_0x4Z(&w.Data[0], &a.q32[i*cols], &a.d32x4[i*nb], nb, cols, &wide[0])
			for v := range 4 {
				if math.Float32bits(wide[v]) != math.Float32bits(narrow[v]) || math.Float32bits(wide[v]) != math.Float32bits(want[i+v]) {
					t.Fatalf("%d blocks, vector %d: 64-byte kernel %g, 32-byte %g, generic %g", nb, i+v, wide[v], narrow[v], want[i+v])
				}
			}
		}
		var eight [8]float32
		dotQ8_0x8Z(&w.Data[0], &a.q32[0], &a.d32x4[0], nb, cols, 4*4*nb, &eight[0])
		for v := range 8 {
			if math.Float32bits(eight[v]) != math.Float32bits(want[v]) {
				t.Fatalf("%d blocks, vector %d: eight-vector kernel %g, generic %g", nb, v, eight[v], want[v])
			}
		}
	}
}

// flipQ8Form switches the Q8_0 lane dots between their 64- and 32-byte
// forms (eachImpl runs the avx512 set with both).
func flipQ8Form() { q8x4Wide = !q8x4Wide }

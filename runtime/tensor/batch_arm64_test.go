//go:build !purego

package tensor

import (
	"math"
	"testing"
)

// The NEON interleaved batch kernels (SDOT: one-vector and four-vector,
// each alone; i8mm: SMMLA, four vectors at a time) equal the generic
// row-sequential form bit for bit, for block counts within one tile, at
// its edge and past it, batches of 8 to 13 vectors and a partial group of
// rows. Each kernel set runs (eachImpl): on a CPU with i8mm the SDOT
// kernels are still tested as "neon".
func TestBatchX8Implementations(t *testing.T) {
	if !hasNEON {
		t.Skip("no NEON dot-product instructions")
	}
	const rows, maxN = 19, 13
	defer func(x4 bool) { batchX4 = x4 }(batchX4)
	for _, typ := range []Type{Q8_0, Q4_0} {
		for _, nb := range []int{1, 2, 7, batchKC, batchKC + 1, 2*batchKC + 3} {
			cols := 32 * nb
			w, _ := randomMatrix(t, typ, rows, cols, uint64(nb)+11)
			x := testData("normal", maxN*cols, uint64(nb)+5)
			a := NewActivations(maxN, cols)
			wants := make([][]float32, maxN+1)
			for n := batchMin; n <= maxN; n++ {
				wants[n] = make([]float32, n*rows)
				withGeneric(func() {
					a.Set(x[:n*cols], n)
					MatMulAct(nil, wants[n], w, a)
				})
			}
			eachImpl(t, func(t *testing.T) {
				for n := batchMin; n <= maxN; n++ {
					want := wants[n]
					for _, x4 := range []bool{false, true} {
						batchX4 = x4
						a.Set(x[:n*cols], n)
						got := make([]float32, n*rows)
						MatMulAct(nil, got, w, a)
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v nb=%d n=%d x4=%v: out[%d] = %g, generic %g", typ, nb, n, x4, i, got[i], want[i])
							}
						}
					}
				}
			})
		}
	}
}

// The repack kernels write repackX8's tile byte for byte, for tiles of 1
// to batchKC blocks at an offset along the rows.
func TestRepackX8Implementations(t *testing.T) {
	if !hasNEON {
		t.Skip("no NEON dot-product instructions")
	}
	const rows, nb = 11, batchKC + 3
	for _, typ := range []Type{Q8_0, Q4_0} {
		w, _ := randomMatrix(t, typ, rows, 32*nb, 7)
		rb := w.RowBytes()
		for r := 0; r+8 <= rows; r += 3 {
			for k0 := 0; k0 < 3; k0++ {
				for kc := 1; kc <= batchKC; kc++ {
					var want, got [batchKC * batchTileBlock]byte
					repackX8(want[:], w, r, k0, kc)
					src := w.Data[r*rb+k0*rb/nb:]
					if typ == Q8_0 {
						repackQ8_0x8NEON(&got[0], &src[0], rb, kc)
					} else {
						repackQ4_0x8NEON(&got[0], &src[0], rb, kc)
					}
					if got != want {
						t.Fatalf("%v r=%d k0=%d kc=%d: tiles differ", typ, r, k0, kc)
					}
				}
			}
		}
	}
}

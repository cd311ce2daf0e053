//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// needI8MM skips a test of the i8mm kernels on a CPU without them, unless
// STRATA_WANT_I8MM is set (make test-arm64 sets it and runs qemu with
// -cpu max): then a missing i8mm fails the test instead of hiding it.
func needI8MM(t *testing.T) {
	t.Helper()
	if hasI8MM {
		return
	}
	if os.Getenv("STRATA_WANT_I8MM") != "" {
		t.Fatal("STRATA_WANT_I8MM is set but this CPU has no i8mm (run qemu-aarch64 with -cpu max)")
	}
	t.Skip("no i8mm instructions")
}

// The i8mm repack kernels write repackMM8's tile byte for byte, for tiles
// of 1 to batchKC blocks at an offset along the rows; and repackMM8 puts
// every row's quants and scale where batchMM8x4I8MM reads them (checked
// against the dequantized row).
func TestRepackMM8Implementations(t *testing.T) {
	needI8MM(t)
	const rows, nb = 11, batchKC + 3
	for _, typ := range []Type{Q8_0, Q4_0} {
		w, _ := randomMatrix(t, typ, rows, 32*nb, 7)
		rb := w.RowBytes()
		for r := 0; r+8 <= rows; r += 3 {
			for k0 := 0; k0 < 3; k0++ {
				for kc := 1; kc <= batchKC; kc++ {
					var want, got [batchKC * batchMMBlock]byte
					repackMM8(want[:], w, r, k0, kc)
					src := w.Data[r*rb+k0*rb/nb:]
					if typ == Q8_0 {
						repackQ8_0x8MM(&got[0], &src[0], rb, kc)
					} else {
						repackQ4_0x8MM(&got[0], &src[0], rb, kc)
					}
					if got != want {
						t.Fatalf("%v r=%d k0=%d kc=%d: tiles differ", typ, r, k0, kc)
					}
				}
			}
		}
		// The tile's meaning: quant k of row i, times its scale, is the
		// dequantized element.
		var tile [batchKC * batchMMBlock]byte
		repackMM8(tile[:], w, 0, 0, batchKC)
		row := make([]float32, w.Cols)
		for i := range 8 {
			w.EmbedRow(i, row)
			for b := range batchKC {
				blk := tile[b*batchMMBlock : (b+1)*batchMMBlock]
				p, h := i/2, i%2
				s := math.Float32frombits(binary.LittleEndian.Uint32(blk[256+16*p+8*h:]))
				s2 := math.Float32frombits(binary.LittleEndian.Uint32(blk[256+16*p+8*h+4:]))
				if s != s2 {
					t.Fatalf("%v row %d block %d: scale lanes %g, %g", typ, i, b, s, s2)
				}
				for k := range 32 {
					q := int8(blk[64*p+16*(k/8)+8*h+k%8])
					if got, want := float32(q)*s, row[32*b+k]; got != want {
						t.Fatalf("%v row %d element %d: tile gives %g, row %g", typ, i, 32*b+k, got, want)
					}
				}
			}
		}
	}
}

// The i8mm batch kernels equal the generic row-sequential form and the
// SDOT kernels bit for bit: every vector count from batchMin to 21 (all
// remainders of the groups of four) and across the 128-vector pass
// (batchVecs), block counts within a tile, at its edge and past it, rows
// that leave a partial group of 8, and rows of random bytes (every quant
// -128..127 and nibble, scales of every magnitude).
func TestBatchMMMatchesGeneric(t *testing.T) {
	needI8MM(t)
	defer func() { useI8MM = hasI8MM }()
	type tcase struct {
		w    Matrix
		ns   []int
		seed uint64
	}
	var cases []tcase
	for _, typ := range []Type{Q8_0, Q4_0} {
		for _, nb := range []int{1, 3, batchKC, batchKC + 1, 2*batchKC + 5} {
			w, _ := randomMatrix(t, typ, 21, 32*nb, uint64(nb)+31)
			ns := []int{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}
			if nb == 3 {
				ns = append(ns, batchVecs-1, batchVecs, batchVecs+1, batchVecs+6, 2*batchVecs+3)
			}
			cases = append(cases, tcase{w, ns, uint64(nb)})
		}
		// Random bytes with finite scales.
		r := rand.New(rand.NewPCG(3, uint64(typ)))
		const rows, nb = 16, 5
		_, bb, _ := layout(typ)
		data := make([]byte, rows*nb*bb)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		for b := 0; b < rows*nb; b++ {
			e := r.IntN(25) - 12
			binary.LittleEndian.PutUint16(data[b*bb:], FP32ToFP16(float32(math.Ldexp(r.Float64()*2-1, e))))
		}
		w, err := NewMatrix(typ, rows, 32*nb, data)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tcase{w, []int{8, 11, 13}, 77})
	}
	for _, c := range cases {
		cols, rows := c.w.Cols, c.w.Rows
		maxN := c.ns[len(c.ns)-1]
		x := testData("normal", maxN*cols, c.seed+5)
		a := NewActivations(maxN, cols)
		for _, n := range c.ns {
			want := make([]float32, n*rows)
			withGeneric(func() {
				a.Set(x[:n*cols], n)
				MatMulAct(nil, want, c.w, a)
			})
			for _, mm := range []bool{false, true} {
				useI8MM = mm
				a.Set(x[:n*cols], n)
				got := make([]float32, n*rows)
				MatMulAct(nil, got, c.w, a)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v %dx%d n=%d i8mm=%v: out[%d] (vector %d, row %d) = %g, generic %g",
							c.w.Type, rows, cols, n, mm, i, i/rows, i%rows, got[i], want[i])
					}
				}
			}
		}
	}
}

// The i8mm kernels are the default where the CPU has them, and Kernels
// says so.
func TestI8MMDefault(t *testing.T) {
	needI8MM(t)
	if !useI8MM || Kernels() != "i8mm" {
		t.Fatalf("useI8MM=%v, Kernels()=%q on a CPU with i8mm", useI8MM, Kernels())
	}
}

//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// With the row-sequential K-quant form turned on, the i8mm Q4_K and Q6_K
// batch kernels equal the generic dotQ4_KSeq and dotQ6_KSeq bit for bit:
// every vector count
// from batchMin to 13 (odd ones repeat their last vector) and across the
// 128-vector pass, super-block counts within a tile, at its edge and past
// it, rows that leave a partial group of 8, and rows of random bytes
// (every scale, min and nibble; activations at ±127).
func TestBatchKMMMatchesGeneric(t *testing.T) {
	needI8MM(t)
	defer func(on bool) { batchKQuants = on }(batchKQuants)
	batchKQuants = true
	for _, typ := range []Type{Q4_K, Q6_K} {
		t.Run(typ.String(), func(t *testing.T) { testBatchKMM(t, typ) })
	}
}

func testBatchKMM(t *testing.T, typ Type) {
	type tcase struct {
		w  Matrix
		x  []float32
		ns []int
	}
	var cases []tcase
	for _, nb := range []int{1, 2, kMMKC, kMMKC + 1, 2*kMMKC + 3} {
		w, _ := randomMatrix(t, typ, 19, qkK*nb, uint64(nb)+41)
		ns := []int{8, 9, 10, 11, 12, 13}
		if nb == 2 {
			ns = append(ns, batchVecs-1, batchVecs+3)
		}
		cases = append(cases, tcase{w, testData("normal", ns[len(ns)-1]*qkK*nb, uint64(nb)+9), ns})
	}
	r := rand.New(rand.NewPCG(5, 6))
	const rows, nb = 16, 3
	_, bb, _ := layout(typ)
	data := make([]byte, rows*nb*bb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for b := range rows * nb {
		if typ == Q6_K {
			binary.LittleEndian.PutUint16(data[b*bb+208:], FP32ToFP16(0.002))
			continue
		}
		binary.LittleEndian.PutUint16(data[b*bb:], FP32ToFP16(0.005))
		binary.LittleEndian.PutUint16(data[b*bb+2:], FP32ToFP16(-0.03))
	}
	w, err := NewMatrix(typ, rows, qkK*nb, data)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 11*qkK*nb)
	for i := range x {
		x[i] = float32(1 - 2*int(r.Uint32()&1))
	}
	cases = append(cases, tcase{w, x, []int{8, 11}})
	for _, c := range cases {
		cols, rows := c.w.Cols, c.w.Rows
		a := NewActivations(c.ns[len(c.ns)-1], cols)
		for _, n := range c.ns {
			want := make([]float32, n*rows)
			withGeneric(func() {
				a.Set(c.x[:n*cols], n)
				MatMulAct(nil, want, c.w, a)
			})
			a.Set(c.x[:n*cols], n)
			got := make([]float32, n*rows)
			MatMulAct(nil, got, c.w, a)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%dx%d n=%d: out[%d] (vector %d, row %d) = %g, generic %g",
						rows, cols, n, i, i/rows, i%rows, got[i], want[i])
				}
			}
		}
	}
}

// The generic comparison above is the row-sequential form: check that the
// kernels did run (a wrong dispatch would compare Go with Go).
func TestBatchKMMRuns(t *testing.T) {
	needI8MM(t)
	for _, typ := range []Type{Q4_K, Q6_K} {
		w, _ := randomMatrix(t, typ, 8, 2*qkK, 3)
		a := NewActivations(8, 2*qkK)
		a.Set(testData("normal", 8*2*qkK, 4), 8)
		a.prepare(typ)
		out := make([]float32, 8*8)
		if got := matMulBatchKMM(out, w, a, 0, 8); got != 8 {
			t.Fatalf("%v: matMulBatchKMM computed rows up to %d, want 8", typ, got)
		}
		rb, cols := w.RowBytes(), w.Cols
		for v := range 8 {
			x, d, bs := a.qK[v*cols:(v+1)*cols], a.dK[2*v:2*v+2], a.bsumsK[v*cols/16:(v+1)*cols/16]
			for r := range 8 {
				row := w.Data[r*rb : (r+1)*rb]
				want := dotQ4_KSeq(row, x, d, bs)
				if typ == Q6_K {
					want = dotQ6_KSeq(row, x, d, bs)
				}
				if got := out[v*8+r]; math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%v vector %d row %d: %g, row-sequential %g", typ, v, r, got, want)
				}
			}
		}
	}
}

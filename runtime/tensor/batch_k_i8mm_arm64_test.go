//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// With the row-sequential K-quant form turned on, the i8mm Q4_K batch
// kernel equals the generic dotQ4_KSeq bit for bit: every vector count
// from batchMin to 13 (odd ones repeat their last vector) and across the
// 128-vector pass, super-block counts within a tile, at its edge and past
// it, rows that leave a partial group of 8, and rows of random bytes
// (every scale, min and nibble; activations at ±127).
func TestBatchQ4KMMMatchesGeneric(t *testing.T) {
	needI8MM(t)
	defer func(on bool) { batchKQuants = on }(batchKQuants)
	batchKQuants = true
	type tcase struct {
		w  Matrix
		x  []float32
		ns []int
	}
	var cases []tcase
	for _, nb := range []int{1, 2, q4KMMKC, q4KMMKC + 1, 2*q4KMMKC + 3} {
		w, _ := randomMatrix(t, Q4_K, 19, qkK*nb, uint64(nb)+41)
		ns := []int{8, 9, 10, 11, 12, 13}
		if nb == 2 {
			ns = append(ns, batchVecs-1, batchVecs+3)
		}
		cases = append(cases, tcase{w, testData("normal", ns[len(ns)-1]*qkK*nb, uint64(nb)+9), ns})
	}
	r := rand.New(rand.NewPCG(5, 6))
	const rows, nb = 16, 3
	data := make([]byte, rows*nb*q4KBytes)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for b := range rows * nb {
		binary.LittleEndian.PutUint16(data[b*q4KBytes:], FP32ToFP16(0.005))
		binary.LittleEndian.PutUint16(data[b*q4KBytes+2:], FP32ToFP16(-0.03))
	}
	w, err := NewMatrix(Q4_K, rows, qkK*nb, data)
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
// kernel did run (a wrong dispatch would compare Go with Go).
func TestBatchQ4KMMRuns(t *testing.T) {
	needI8MM(t)
	w, _ := randomMatrix(t, Q4_K, 8, qkK, 3)
	a := NewActivations(8, qkK)
	a.Set(testData("normal", 8*qkK, 4), 8)
	a.prepare(Q4_K)
	out := make([]float32, 8*8)
	if got := matMulBatchQ4KMM(out, w, a, 0, 8); got != 8 {
		t.Fatalf("matMulBatchQ4KMM computed rows up to %d, want 8", got)
	}
	for v := range 8 {
		for r := range 8 {
			want := dotQ4_KSeq(w.Data[r*w.RowBytes():(r+1)*w.RowBytes()], a.qK[v*qkK:(v+1)*qkK], a.dK[v:v+1], a.bsumsK[16*v:16*v+16])
			if got := out[v*8+r]; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("vector %d row %d: %g, dotQ4_KSeq %g", v, r, got, want)
			}
		}
	}
}

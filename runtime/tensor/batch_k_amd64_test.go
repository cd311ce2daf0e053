//go:build !purego

package tensor

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// The assembly K-quant and IQ4_XS tile repacks write exactly what the Go ones
// do, for blocks of random bytes (every scale, min and quant value;
// finite fp16 scales, as NaN payloads may differ).
func TestRepackKx8(t *testing.T) {
	if !hasAVX2 {
		t.Log("no AVX2 here: the assembly repacks not run")
		return
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		t        Type
		bb, tsb  int
		fp16     []int // offsets of fp16 scales in a block
		asm      func(dst, w *byte, rs, nb int)
		goRepack func(dst, w []byte, rs, nb int)
		avx512   bool // the AVX-512 forms; the others need AVX2 only
		rows     int  // rows a repack takes (8 or 16)
	}{
		{Q4_K, q4KBytes, q4KTileSB, []int{0, 2}, repackQ4_Kx8V, repackQ4_Kx8Go, false, 8},
		{Q5_K, q5KBytes, q4KTileSB, []int{0, 2}, repackQ5_Kx8V, repackQ5_Kx8Go, false, 8},
		{Q6_K, q6KBytes, q6KTileSB, []int{208}, repackQ6_Kx8V, repackQ6_Kx8Go, false, 8},
		{IQ4_XS, iq4XSBytes, q6KTileSB, []int{0}, repackIQ4_XSx8V, repackIQ4_XSx8Go, false, 8},
		{Q3_K, q3KBytes, q6KTileSB, []int{108}, repackQ3_Kx8V, repackQ3_Kx8Go, false, 8},
		{Q2_K, q2KBytes, q2KTileSB, []int{80, 82}, repackQ2_Kx8V, repackQ2_Kx8Go, false, 8},
		{Q4_K, q4KBytes, q4KTileSB, []int{0, 2}, repackQ4_Kx8Asm, repackQ4_Kx8Go, true, 8},
		{Q5_K, q5KBytes, q4KTileSB, []int{0, 2}, repackQ5_Kx8Asm, repackQ5_Kx8Go, true, 8},
		{Q6_K, q6KBytes, q6KTileSB, []int{208}, repackQ6_Kx8Asm, repackQ6_Kx8Go, true, 8},
		{IQ4_XS, iq4XSBytes, q6KTileSB, []int{0}, repackIQ4_XSx8Asm, repackIQ4_XSx8Go, true, 8},
		{Q3_K, q3KBytes, q6KTileSB, []int{108}, repackQ3_Kx8Asm, repackQ3_Kx8Go, true, 8},
		{Q2_K, q2KBytes, q2KTileSB, []int{80, 82}, repackQ2_Kx8Asm, repackQ2_Kx8Go, true, 8},
		{Q4_K, q4KBytes, 2 * q4KTileSB, []int{0, 2}, repackQ4_Kx16iAsm, repackQ4_Kx16iGo, true, 16}, // a 16-row tile
		{Q4_K, q4KBytes, q4KTile32p, []int{0, 2}, repackQ4_Kx16pAsm, repackQ4_Kx16pGo, true, 16},    // half of a packed 32-row tile
	} {
		if c.avx512 && !hasAVX512 {
			continue
		}
		for _, nb := range []int{1, 2, 5, 8} {
			const extra = 3 // rows further apart than a row's blocks
			rows := c.rows
			rs := (nb + extra) * c.bb
			w := make([]byte, rows*rs)
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			for i := 0; i+c.bb <= len(w); i += c.bb {
				for _, o := range c.fp16 {
					binary.LittleEndian.PutUint16(w[i+o:], FP32ToFP16(float32(r.NormFloat64())))
				}
			}
			want := make([]byte, nb*c.tsb)
			got := make([]byte, nb*c.tsb)
			c.goRepack(want, w, rs, nb)
			c.asm(&got[0], &w[0], rs, nb)
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("%v, %d blocks: byte %d (block %d, offset %d) = %d, want %d", c.t, nb, i, i/c.tsb, i%c.tsb, got[i], want[i])
			}
		}
	}
}

// BenchmarkRepackQ4_K: 32 rows of two super-blocks from L1 into four
// 8-row tiles, two unpacked 16-row ones and a packed 32-row one.
func BenchmarkRepackQ4_K(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 here")
	}
	const kc, rows = 2, 32
	rs := 8 * q4KBytes
	w := make([]byte, rows*rs)
	for i := range w {
		w[i] = byte(i * 7)
	}
	tile := make([]byte, 4*kc*q4KTileSB)
	b.Run("8-row", func(b *testing.B) {
		for b.Loop() {
			for h := range 4 { // the 8-row tile: the same work
				repackQ4_Kx8Asm(&tile[q4KTileSB*kc*h], &w[8*h*rs], rs, kc)
			}
		}
	})
	b.Run("16-row", func(b *testing.B) {
		for b.Loop() {
			for h := range 2 {
				repackQ4_Kx16iAsm(&tile[2*q4KTileSB*kc*h], &w[16*h*rs], rs, kc)
			}
		}
	})
	b.Run("32-row-packed", func(b *testing.B) {
		for b.Loop() {
			for h := range 2 {
				repackQ4_Kx16pAsm(&tile[64*h], &w[16*h*rs], rs, kc)
			}
		}
	})
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// The 32-row (Q4_K), 16-row and 8-row batch kernels (batchK32, batchK16
// off) all equal the generic batch form bit for bit, on rows of random
// bytes (56 rows: 32, 16 and 8, or three groups of 16 and one of 8)
// against 13 vectors (groups of four or eight and the rest alone).
func TestBatchK16(t *testing.T) {
	if !hasAVX512 {
		t.Log("no AVX-512 here: the K-quant batch kernels not run")
		return
	}
	defer func() { batchK16, batchK32 = true, true }()
	const rows, n, nb = 56, 13, 9 // nb super-blocks: 2304 columns
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []Type{Q8_0, Q4_0, Q4_K, Q5_K} {
		bs, bb, _ := layout(typ)
		w := Matrix{Type: typ, Rows: rows, Cols: nb * qkK, Data: make([]byte, rows*nb*qkK/bs*bb)}
		for i := range w.Data {
			w.Data[i] = byte(r.Uint32())
		}
		for i := 0; i < len(w.Data); i += bb {
			binary.LittleEndian.PutUint16(w.Data[i:], FP32ToFP16(float32(r.NormFloat64())*0.01))
			if bs == qkK {
				binary.LittleEndian.PutUint16(w.Data[i+2:], FP32ToFP16(float32(r.NormFloat64())*0.01))
			}
		}
		x := make([]float32, n*w.Cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		a := NewActivations(n, w.Cols)
		want := make([]float32, n*rows)
		withGeneric(func() {
			a.Set(x, n)
			MatMulAct(nil, want, w, a)
		})
		for _, k := range [][2]bool{{true, true}, {true, false}, {false, false}} {
			batchK16, batchK32 = k[0], k[1]
			k16 := k
			a.Set(x, n)
			got := make([]float32, n*rows)
			MatMulAct(nil, got, w, a)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v, (16, 32 rows) %v: out[%d] = %g, generic %g", typ, k16, i, got[i], want[i])
				}
			}
		}
	}
}

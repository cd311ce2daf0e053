//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
)

// batchKQuants: K-quant batches use the row-sequential form only where it
// is turned on, and on arm64 that is off: the i8mm Q4_K kernel below is
// tested bit-exact under qemu but has not been timed on an Apple M2 or
// later, and the other K-quants and IQ4_XS have no batch kernels here
// (their row-sequential form would run in Go). Tests turn it on.
var batchKQuants = false

const (
	q4KMMTileSB = 512 + 8*320 + 128 // bytes per super-block of 8 rows in an i8mm Q4_K tile
	q4KMMKC     = 4                 // super-blocks per tile: 12.5 KB
)

// batchQ4KMM8x2I8MM adds to acc the row-sequential Q4_K dots (dotQ4_KSeq,
// before its final subtraction) of the tile's 8 rows with two vectors
// over nb > 0 super-blocks: quants x0, x1, scales d0, d1, 16-sums b0, b1.
// acc holds 16 float32 of scale sums, then 16 of mins sums, each in
// SMMLA's order: row pair p at 4p, lane 2i+j for row 2p+i and vector j.
// The two vectors may be the same (a batch's last, odd one).
//
//go:noescape
func batchQ4KMM8x2I8MM(tile *byte, x0, x1 *int8, d0, d1 *float32, b0, b1 *int16, nb int, acc *float32)

// repackQ4KMM writes the i8mm tile of super-blocks k0..k0+kc-1 of rows
// r..r+7 of the Q4_K matrix w into dst (layout in
// batch_k_i8mm_arm64.s).
func repackQ4KMM(dst []byte, w Matrix, r, k0, kc int) {
	le := binary.LittleEndian
	rb := w.RowBytes()
	for b := range kc {
		t := dst[b*q4KMMTileSB : (b+1)*q4KMMTileSB]
		for i := range 8 {
			off := (r+i)*rb + (k0+b)*q4KBytes
			blk := w.Data[off : off+q4KBytes]
			sc, m := k4ScalesMins(blk[4:16])
			p, h := i/2, i%2
			dw := math.Float32bits(FP16ToFP32(u16le(blk)))
			dmin := math.Float32bits(FP16ToFP32(u16le(blk[2:])))
			for j := range 2 {
				le.PutUint32(t[512+8*320+16*p+4*(2*h+j):], dw)
				le.PutUint32(t[512+8*320+64+16*p+4*(2*h+j):], dmin)
			}
			qs := blk[16:144]
			for j := range 8 {
				sub := t[512+320*j : 512+320*(j+1)]
				for v := range 2 {
					le.PutUint32(t[64*j+16*p+4*(2*h+v):], uint32(m[j]))
					le.PutUint32(sub[256+16*p+4*(2*h+v):], uint32(sc[j]))
				}
				for k := range 32 {
					sub[64*p+16*(k/8)+8*h+k%8] = qs[32*(j/2)+k] >> (4 * (j & 1)) & 15
				}
			}
		}
	}
}

// matMulBatchQ4KMM computes the whole groups of 8 rows of a Q4_K matrix
// from lo (a multiple of 8) up to hi in the row-sequential form with the
// i8mm kernel, two vectors at a time, and returns the first row it did
// not compute.
func matMulBatchQ4KMM(out []float32, w Matrix, a *Activations, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	nk := cols / qkK
	var tile [q4KMMKC * q4KMMTileSB]byte
	var acc [batchVecs / 2][32]float32
	_, _, _ = a.qK[n*cols-1], a.dK[n*nk-1], a.bsumsK[n*cols/16-1]
	r := lo
	for ; r+8 <= hi; r += 8 {
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			np := (nv + 1) / 2
			clear(acc[:np])
			for k0 := 0; k0 < nk; k0 += q4KMMKC {
				kc := min(q4KMMKC, nk-k0)
				repackQ4KMM(tile[:], w, r, k0, kc)
				for g := range np {
					t0 := v0 + 2*g
					t1 := min(t0+1, v0+nv-1)
					batchQ4KMM8x2I8MM(&tile[0], &a.qK[t0*cols+qkK*k0], &a.qK[t1*cols+qkK*k0],
						&a.dK[t0*nk+k0], &a.dK[t1*nk+k0],
						&a.bsumsK[t0*cols/16+16*k0], &a.bsumsK[t1*cols/16+16*k0], kc, &acc[g][0])
				}
			}
			for v := v0; v < v0+nv; v++ {
				g, j := (v-v0)/2, (v-v0)%2
				for i := range 8 {
					l := 4*(i/2) + 2*(i%2) + j
					out[v*rows+r+i] = acc[g][l] - acc[g][16+l]
				}
			}
		}
	}
	return r
}

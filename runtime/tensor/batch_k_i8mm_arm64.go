//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
)

// batchKQuants: K-quant batches use the row-sequential form only where it
// is turned on, and on arm64 that is off: the i8mm Q4_K and Q6_K kernels
// below are tested bit-exact under qemu but have not been timed on an
// Apple M2 or later, and the other K-quants and IQ4_XS have no batch
// kernels here (their row-sequential form would run in Go). Tests turn it
// on.
var batchKQuants = false

const (
	q4KMMTileSB = 512 + 8*320 + 128 // bytes per super-block of 8 rows in an i8mm Q4_K tile
	q6KMMTileSB = 8*384 + 64        // and in a Q6_K tile
	kMMKC       = 4                 // super-blocks per tile: about 12.5 KB
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

// batchQ6KMM8x2I8MM is batchQ4KMM8x2I8MM for Q6_K rows (dotQ6_KSeq): acc
// holds the 16 float32 of the scale sums only.
//
//go:noescape
func batchQ6KMM8x2I8MM(tile *byte, x0, x1 *int8, d0, d1 *float32, nb int, acc *float32)

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

// repackQ6KMM writes the i8mm tile of super-blocks k0..k0+kc-1 of rows
// r..r+7 of the Q6_K matrix w into dst (layout in
// batch_k_i8mm_arm64.s): the quants minus 32, the scales as int32.
func repackQ6KMM(dst []byte, w Matrix, r, k0, kc int) {
	le := binary.LittleEndian
	rb := w.RowBytes()
	for b := range kc {
		t := dst[b*q6KMMTileSB : (b+1)*q6KMMTileSB]
		for i := range 8 {
			off := (r+i)*rb + (k0+b)*q6KBytes
			blk := w.Data[off : off+q6KBytes]
			ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
			p, h := i/2, i%2
			dw := math.Float32bits(FP16ToFP32(u16le(blk[208:])))
			for v := range 2 {
				le.PutUint32(t[8*384+16*p+4*(2*h+v):], dw)
			}
			for sb := range 16 { // sub-block of 16 elements
				pair := t[384*(sb/2) : 384*(sb/2+1)]
				for v := range 2 {
					le.PutUint32(pair[256+32*p+16*(sb%2)+4*(2*h+v):], uint32(int32(int8(sc[sb]))))
				}
				hh, k, e0 := sb/8, sb%8/2, 16*(sb%2)
				for m := range 16 {
					e := e0 + m
					lo := ql[64*hh+32*(k&1)+e] >> (4 * (k >> 1)) & 15
					hi := qh[32*hh+e] >> (2 * k) & 3
					c := 2*(sb%2) + m/8 // chunk within the pair's 32 elements
					pair[64*p+16*c+8*h+m%8] = byte(int8(lo|hi<<4) - 32)
				}
			}
		}
	}
}

// matMulBatchKMM computes the whole groups of 8 rows of a Q4_K or Q6_K
// matrix from lo (a multiple of 8) up to hi in the row-sequential form
// with the i8mm kernels, two vectors at a time, and returns the first row
// it did not compute.
func matMulBatchKMM(out []float32, w Matrix, a *Activations, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	nk := cols / qkK
	sb := q4KMMTileSB
	if w.Type == Q6_K {
		sb = q6KMMTileSB
	}
	var buf [kMMKC * q4KMMTileSB]byte
	tile := buf[:kMMKC*sb]
	var acc [batchVecs / 2][32]float32
	_, _, _ = a.qK[n*cols-1], a.dK[n*nk-1], a.bsumsK[n*cols/16-1]
	r := lo
	for ; r+8 <= hi; r += 8 {
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			np := (nv + 1) / 2
			clear(acc[:np])
			for k0 := 0; k0 < nk; k0 += kMMKC {
				kc := min(kMMKC, nk-k0)
				if w.Type == Q6_K {
					repackQ6KMM(tile, w, r, k0, kc)
				} else {
					repackQ4KMM(tile, w, r, k0, kc)
				}
				for g := range np {
					t0 := v0 + 2*g
					t1 := min(t0+1, v0+nv-1)
					x0, x1 := &a.qK[t0*cols+qkK*k0], &a.qK[t1*cols+qkK*k0]
					d0, d1 := &a.dK[t0*nk+k0], &a.dK[t1*nk+k0]
					if w.Type == Q6_K {
						batchQ6KMM8x2I8MM(&tile[0], x0, x1, d0, d1, kc, &acc[g][0])
						continue
					}
					batchQ4KMM8x2I8MM(&tile[0], x0, x1, d0, d1,
						&a.bsumsK[t0*cols/16+16*k0], &a.bsumsK[t1*cols/16+16*k0], kc, &acc[g][0])
				}
			}
			for v := v0; v < v0+nv; v++ {
				g, j := (v-v0)/2, (v-v0)%2
				for i := range 8 {
					l := 4*(i/2) + 2*(i%2) + j
					out[v*rows+r+i] = acc[g][l] - acc[g][16+l] // Q6_K: no mins sums (zero)
				}
			}
		}
	}
	return r
}

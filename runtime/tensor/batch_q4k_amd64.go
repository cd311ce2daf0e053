//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
)

// batchQ4K: Q4_K batches use the row-sequential form where the AVX-512
// kernels run (usesBatchForm).
var batchQ4K = hasAVX512

const (
	q4KTileSB  = 2496 // bytes per super-block of 8 rows in a Q4_K tile
	q4KBatchKC = 8    // super-blocks per tile: 20 KB, in L1
)

// batchQ4Kx8x4 adds to acc[t] (t = 0..3; 16 float32 each: the 8 rows'
// accumulators, then their mins accumulators) the row-sequential Q4_K dot
// (dotQ4_KSeq) of the tile's 8 rows with vector t over nb super-blocks:
// quants x + t*xs, scales d + t*ds, sub-block sums b2 + t*bs (byte
// strides).
//
//go:noescape
func batchQ4Kx8x4(tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32)

// batchQ4Kx8x1 is batchQ4Kx8x4 for one vector.
//
//go:noescape
func batchQ4Kx8x1(tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32)

// repackQ4_Kx8Asm is repackQ4_Kx8Go in assembly (batch_amd64.s).
//
//go:noescape
func repackQ4_Kx8Asm(dst *byte, w *byte, rs int, nb int)

// repackQ4_Kx8Go writes the tile (batch_q4k_amd64.s) of nb super-blocks
// of the 8 rows at w, w+rs, ..., w+7*rs into dst: the reference for
// repackQ4_Kx8Asm.
func repackQ4_Kx8Go(dst, w []byte, rs, nb int) {
	le := binary.LittleEndian
	for b := range nb {
		t := dst[b*q4KTileSB : (b+1)*q4KTileSB]
		for r := range 8 {
			blk := w[r*rs+b*q4KBytes : r*rs+(b+1)*q4KBytes]
			sc, m := k4ScalesMins(blk[4:16])
			qs := blk[16:144]
			for j := range 8 {
				sh := uint(4 * (j & 1))
				for g := range 8 {
					q := le.Uint32(qs[32*(j/2)+4*g:]) >> sh & 0x0f0f0f0f
					le.PutUint32(t[256*j+32*g+4*r:], q)
				}
				le.PutUint32(t[2048+32*j+4*r:], uint32(sc[j]))
			}
			for k := range 4 {
				le.PutUint32(t[2304+32*k+4*r:], uint32(m[2*k])|uint32(m[2*k+1])<<16)
			}
			le.PutUint32(t[2432+4*r:], math.Float32bits(FP16ToFP32(u16le(blk))))
			le.PutUint32(t[2464+4*r:], math.Float32bits(FP16ToFP32(u16le(blk[2:]))))
		}
	}
}

// prepareQ4KBatch fills a.bK2: per vector and super-block the 8 sums of
// each sub-block's quants (pairs of 16-sums; they fit int16).
func (a *Activations) prepareQ4KBatch() {
	if a.okB2 {
		return
	}
	if len(a.bK2) < a.Cap*a.Cols/32 {
		a.bK2 = make([]int16, a.Cap*a.Cols/32)
	}
	m := a.n * a.Cols / 32
	for i := range m {
		a.bK2[i] = a.bsumsK[2*i] + a.bsumsK[2*i+1]
	}
	a.okB2 = true
}

// matMulBatchQ4K computes the whole groups of 8 rows from lo (a multiple
// of 8) up to hi with the Q4_K batch kernels and returns the first row it
// did not compute.
func matMulBatchQ4K(out []float32, w Matrix, a *Activations, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nk := w.RowBytes(), cols/qkK
	_, _, _ = a.qK[n*cols-1], a.dK[n*nk-1], a.bK2[n*cols/32-1]
	var tile [q4KBatchKC * q4KTileSB]byte
	var acc [batchVecs][16]float32
	r := lo
	for ; r+8 <= hi; r += 8 {
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:nv])
			for k0 := 0; k0 < nk; k0 += q4KBatchKC {
				kc := min(q4KBatchKC, nk-k0)
				src := w.Data[r*rb+k0*q4KBytes : (r+7)*rb+(k0+kc)*q4KBytes]
				_ = tile[kc*q4KTileSB-1]
				repackQ4_Kx8Asm(&tile[0], &src[0], rb, kc)
				v := v0
				for ; v+4 <= v0+nv; v += 4 {
					batchQ4Kx8x4(&tile[0], &a.qK[v*cols+qkK*k0], cols, &a.dK[v*nk+k0], 4*nk,
						&a.bK2[v*cols/32+8*k0], 2*(cols/32), kc, &acc[v-v0][0])
				}
				for ; v < v0+nv; v++ {
					batchQ4Kx8x1(&tile[0], &a.qK[v*cols+qkK*k0], &a.dK[v*nk+k0], &a.bK2[v*cols/32+8*k0], kc, &acc[v-v0][0])
				}
			}
			for v := v0; v < v0+nv; v++ {
				o := out[v*rows+r : v*rows+r+8]
				for i := range o {
					o[i] = acc[v-v0][i] - acc[v-v0][8+i]
				}
			}
		}
	}
	return r
}

//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// The interleaved batch kernels work on a repacked tile of 8 rows by
// batchKC blocks. Both Q8_0 and Q4_0 rows repack to the same tile, of
// signed 8-bit quants (Q4_0's nibbles minus 8, in element order), so one
// kernel serves both: for each block, rows 0-3 and then rows 4-7 (128
// bytes each) with, in each half, group g (elements 4g..4g+3) of its four
// rows side by side as 16 bytes at 16g (row r in bytes 4(r%4)..4(r%4)+3),
// then the 8 rows' fp16 scales as float32.
const (
	batchKC        = 16       // blocks per tile: 4.5 KB, in L1
	batchTileBlock = 256 + 32 // bytes per block in a tile
	batchVecs      = 128      // vectors whose accumulators are kept per tile pass (4 KB)
)

// batchX8NEON adds to acc[r] (r = 0..7) the row-sequential dot of tile
// row r with one vector's nb > 0 blocks (quants x, scales d): for each
// block b in order, with isum the exact integer dot of the block,
//
//	acc[r] = fma32(float32(isum), dw[r]*d[b], acc[r])
//
// which is dotQ8_0Seq / dotQ4_0Seq step by step.
//
//go:noescape
func batchX8NEON(tile *byte, x *int8, d *float32, nb int, acc *float32)

// batchX8x4NEON is batchX8NEON for four vectors at once: x[t], d[t] into
// acc[t], each weight group loaded once.
//
//go:noescape
func batchX8x4NEON(tile *byte, x *[4]*int8, d *[4]*float32, nb int, acc *[4]*float32)

// batchX4 enables the four-vector kernel (tests compare).
var batchX4 = true

// repackQ8_0x8NEON is repackX8 for the nb > 0 Q8_0 blocks of the 8 rows
// at w, w+rs, ..., w+7*rs.
//
//go:noescape
func repackQ8_0x8NEON(dst *byte, w *byte, rs int, nb int)

// repackQ4_0x8NEON is repackQ8_0x8NEON for Q4_0 rows.
//
//go:noescape
func repackQ4_0x8NEON(dst *byte, w *byte, rs int, nb int)

// repackX8 writes the tile of blocks k0..k0+kc-1 of rows r..r+7 of w
// (Q8_0 or Q4_0) into dst: the pure-Go meaning of the repack kernels.
func repackX8(dst []byte, w Matrix, r, k0, kc int) {
	rb := w.RowBytes()
	bb := q80Bytes
	if w.Type == Q4_0 {
		bb = q40Bytes
	}
	dst = dst[:kc*batchTileBlock]
	for i := range 8 {
		src := w.Data[(r+i)*rb+k0*bb : (r+i)*rb+(k0+kc)*bb]
		for b := range kc {
			blk, out := src[b*bb:(b+1)*bb], dst[b*batchTileBlock:(b+1)*batchTileBlock]
			binary.LittleEndian.PutUint32(out[256+4*i:], math.Float32bits(FP16ToFP32(u16le(blk))))
			if w.Type == Q8_0 {
				for g := range 8 {
					copy(out[128*(i/4)+16*g+4*(i%4):], blk[2+4*g:6+4*g])
				}
				continue
			}
			for j, q := range blk[2:18] {
				k := j + 16
				out[128*(i/4)+16*(j/4)+4*(i%4)+j%4] = byte(int8(q&15) - 8)
				out[128*(i/4)+16*(k/4)+4*(i%4)+k%4] = byte(int8(q>>4) - 8)
			}
		}
	}
}

// matMulBatchX8 computes the whole groups of 8 rows from lo (a multiple
// of 8) up to hi with the interleaved kernels, and returns the first row
// it did not compute.
func matMulBatchX8(out []float32, w Matrix, a *Activations, lo, hi int) int {
	if !useNEON {
		return lo
	}
	if w.Type == Q4_K || w.Type == Q6_K {
		if !useI8MM {
			return lo
		}
		return matMulBatchKMM(out, w, a, lo, hi)
	}
	if w.Type != Q8_0 && w.Type != Q4_0 {
		return lo
	}
	if useI8MM {
		return matMulBatchMM(out, w, a, lo, hi)
	}
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nb := w.RowBytes(), cols/32
	var tile [batchKC * batchTileBlock]byte
	var acc [batchVecs][8]float32
	r := lo
	for ; r+8 <= hi; r += 8 {
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:nv])
			for k0 := 0; k0 < nb; k0 += batchKC {
				kc := min(batchKC, nb-k0)
				src := w.Data[r*rb+k0*rb/nb:]
				_ = src[7*rb+kc*rb/nb-1]
				if w.Type == Q8_0 {
					repackQ8_0x8NEON(&tile[0], &src[0], rb, kc)
				} else {
					repackQ4_0x8NEON(&tile[0], &src[0], rb, kc)
				}
				v := v0
				for ; batchX4 && v+4 <= v0+nv; v += 4 {
					var xs [4]*int8
					var ds [4]*float32
					var accs [4]*float32
					for t := range 4 {
						xs[t] = &a.q32[(v+t)*cols+32*k0]
						ds[t] = &a.d32[(v+t)*nb+k0]
						accs[t] = &acc[v+t-v0][0]
					}
					_, _ = a.q32[(v+3)*cols+32*(k0+kc)-1], a.d32[(v+3)*nb+k0+kc-1]
					batchX8x4NEON(&tile[0], &xs, &ds, kc, &accs)
				}
				for ; v < v0+nv; v++ {
					x := a.q32[v*cols+32*k0 : v*cols+32*(k0+kc)]
					d := a.d32[v*nb+k0 : v*nb+k0+kc]
					batchX8NEON(&tile[0], unsafe.SliceData(x), unsafe.SliceData(d), kc, &acc[v-v0][0])
				}
			}
			for v := v0; v < v0+nv; v++ {
				copy(out[v*rows+r:v*rows+r+8], acc[v-v0][:])
			}
		}
	}
	return r
}

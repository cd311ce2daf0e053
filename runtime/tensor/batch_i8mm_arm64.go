//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
)

// The i8mm batch kernels (SMMLA, ARMv8.6; Apple M2 and later, Graviton 3,
// Neoverse V1/N2) compute the same row-sequential form as the SDOT ones
// (batch_arm64.go), bit for bit, on a tile of 8 rows by batchKC blocks
// arranged for SMMLA's 2x8 by 8x2 products: for each block, four row
// pairs of 64 bytes (pair p: chunk c of 8 elements of rows 2p and 2p+1,
// side by side, at 16c), then each pair's two fp16 scales as float32,
// each twice (dw[2p], dw[2p], dw[2p+1], dw[2p+1]), for the 2x2 lanes.
const batchMMBlock = 256 + 64 // bytes per block in an i8mm tile

// batchMM8x4I8MM adds to acc the row-sequential dots of the tile's 8 rows
// with four vectors' nb > 0 blocks (quants x[t], scales d[t]): for each
// block b in order, with isum the exact integer dot of the block,
//
//	acc[r][t] = fma32(float32(isum), dw[r]*d[t][b], acc[r][t])
//
// acc holds 32 float32 in SMMLA's order: the 2x2 block of row pair p and
// vector pair q at 4(2p+q), lane 2i+j for row 2p+i and vector 2q+j
// (mmAccIndex). The four vectors may repeat (a batch's last group).
//
//go:noescape
func batchMM8x4I8MM(tile *byte, x *[4]*int8, d *[4]*float32, nb int, acc *float32)

// repackQ8_0x8MM is repackMM8 for the nb > 0 Q8_0 blocks of the 8 rows
// at w, w+rs, ..., w+7*rs.
//
//go:noescape
func repackQ8_0x8MM(dst *byte, w *byte, rs int, nb int)

// repackQ4_0x8MM is repackQ8_0x8MM for Q4_0 rows.
//
//go:noescape
func repackQ4_0x8MM(dst *byte, w *byte, rs int, nb int)

// mmAccIndex is where batchMM8x4I8MM keeps row r (0..7) and vector t
// (0..3) of its accumulators.
func mmAccIndex(r, t int) int { return 4*(2*(r/2)+t/2) + 2*(r%2) + t%2 }

// repackMM8 writes the i8mm tile of blocks k0..k0+kc-1 of rows r..r+7 of
// w (Q8_0 or Q4_0) into dst: the pure-Go meaning of the repack kernels.
func repackMM8(dst []byte, w Matrix, r, k0, kc int) {
	rb := w.RowBytes()
	bb := q80Bytes
	if w.Type == Q4_0 {
		bb = q40Bytes
	}
	dst = dst[:kc*batchMMBlock]
	for i := range 8 {
		src := w.Data[(r+i)*rb+k0*bb : (r+i)*rb+(k0+kc)*bb]
		for b := range kc {
			blk, out := src[b*bb:(b+1)*bb], dst[b*batchMMBlock:(b+1)*batchMMBlock]
			s := math.Float32bits(FP16ToFP32(u16le(blk)))
			binary.LittleEndian.PutUint32(out[256+16*(i/2)+8*(i%2):], s)
			binary.LittleEndian.PutUint32(out[256+16*(i/2)+8*(i%2)+4:], s)
			var q [32]int8
			for k := range 32 {
				if w.Type == Q8_0 {
					q[k] = int8(blk[2+k])
				} else if k < 16 {
					q[k] = int8(blk[2+k]&15) - 8
				} else {
					q[k] = int8(blk[2+k-16]>>4) - 8
				}
			}
			for k, v := range q {
				out[64*(i/2)+16*(k/8)+8*(i%2)+k%8] = byte(v)
			}
		}
	}
}

// matMulBatchMM is matMulBatchX8 with the i8mm kernels: whole groups of 8
// rows from lo (a multiple of 8) up to hi, returning the first row it did
// not compute. Vectors go four at a time; the last group repeats its last
// vector, and the repeats' sums are dropped.
func matMulBatchMM(out []float32, w Matrix, a *Activations, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nb := w.RowBytes(), cols/32
	var tile [batchKC * batchMMBlock]byte
	var acc [batchVecs / 4][32]float32
	r := lo
	for ; r+8 <= hi; r += 8 {
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			ng := (nv + 3) / 4
			clear(acc[:ng])
			for k0 := 0; k0 < nb; k0 += batchKC {
				kc := min(batchKC, nb-k0)
				src := w.Data[r*rb+k0*rb/nb:]
				_ = src[7*rb+kc*rb/nb-1]
				if w.Type == Q8_0 {
					repackQ8_0x8MM(&tile[0], &src[0], rb, kc)
				} else {
					repackQ4_0x8MM(&tile[0], &src[0], rb, kc)
				}
				_, _ = a.q32[(v0+nv-1)*cols+32*(k0+kc)-1], a.d32[(v0+nv-1)*nb+k0+kc-1]
				for g := range ng {
					var xs [4]*int8
					var ds [4]*float32
					for t := range 4 {
						v := min(v0+4*g+t, v0+nv-1)
						xs[t] = &a.q32[v*cols+32*k0]
						ds[t] = &a.d32[v*nb+k0]
					}
					batchMM8x4I8MM(&tile[0], &xs, &ds, kc, &acc[g][0])
				}
			}
			for v := v0; v < v0+nv; v++ {
				g, t := (v-v0)/4, (v-v0)%4
				for i := range 8 {
					out[v*rows+r+i] = acc[g][mmAccIndex(i, t)]
				}
			}
		}
	}
	return r
}

//go:build !purego

package tensor

import (
	"encoding/binary"
	"math"
)

// batchKQuants: K-quant and IQ4_XS batches use the row-sequential form where
// the AVX-512 kernels or the AVX-VNNI ones (batch_kv_amd64.s) run
// (usesBatchForm). With AVX-VNNI the batch kernels took 2 to 4 times less
// time than the one- and four-vector dots they replace, for every type
// (BenchmarkBatchKVNNI).
var batchKQuants = hasAVX512 || hasAVXVNNI

// batchK16 selects the 16-row batch kernels (64-byte registers: Q8_0,
// Q4_0, Q4_K, Q5_K) before the 8-row ones; tests turn it off to run both.
var batchK16 = true

// batchK32 selects the 32-row Q4_K kernels before the 16-row ones (with
// batchK16); tests turn it off to run both.
var batchK32 = true

const (
	q4KTileSB = 2496 // bytes per super-block of 8 rows in a Q4_K tile
	q6KTileSB = 2592 // and in a Q6_K tile
	q2KTileSB = 2880 // and in a Q2_K tile
	kBatchKC  = 8    // super-blocks per tile: about 20 KB, in L1
	// kBatchKC16: super-blocks per 16-row tile: 20 KB again. With 8 (40 KB)
	// the tile and the four vectors' quants overflowed the 48 KB L1 and
	// products with 5632 columns took ~20% more CPU time (measured).
	kBatchKC16 = 4
	// kc32: super-blocks per packed 32-row tile (11.5 KB). Tiles of 3 and 4
	// (18 and 24 KB) took 5-30 % longer at 4 and 8 vectors, 1 as long or
	// longer (measured 2026-12-07).
	kc32 = 2
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

// repackQ4_Kx8Go writes the tile (batch_k_amd64.s) of nb super-blocks
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
	if len(a.bK2) < a.capK()*a.Cols/32 {
		a.bK2 = make([]int16, a.capK()*a.Cols/32)
	}
	m := a.n * a.Cols / 32
	for i := range m {
		a.bK2[i] = a.bsumsK[2*i] + a.bsumsK[2*i+1]
	}
	a.okB2 = true
}

// matMulBatchK computes the whole groups of 8 rows from lo (a multiple
// of 8) up to hi with the Q2_K, Q4_K (also Q5_K's) or Q6_K (also Q3_K's
// and IQ4_XS's) batch kernels and returns the first
// row it did not compute.
func matMulBatchK(out []float32, w Matrix, a *Activations, lo, hi int) int {
	if w.Type == Q4_K && batchK16 && useAVX512 {
		if batchK32 {
			lo = matMulBatchQ4K32(out, w, a, lo, hi)
		}
		lo = matMulBatchQ4K16i(out, w, a, lo, hi)
	} else if w.Type == Q5_K && batchK16 && useAVX512 {
		lo = matMulBatchQ4K16(out, w, a, lo, hi)
	}
	vnni := !useAVX512 // the AVX-VNNI kernels (batch_kv_amd64.go)
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nk := w.RowBytes(), cols/qkK
	bb, tsb := q4KBytes, q4KTileSB
	switch w.Type {
	case Q5_K:
		bb = q5KBytes
	case Q2_K:
		bb, tsb = q2KBytes, q2KTileSB
	}
	q6 := w.Type == Q6_K || w.Type == Q3_K || w.Type == IQ4_XS // the Q6_K kernels
	if q6 {
		bb, tsb = q6KBytes, q6KTileSB
		switch w.Type {
		case IQ4_XS:
			bb = iq4XSBytes
		case Q3_K:
			bb = q3KBytes
		}
		_ = a.cK[n*cols/16-1]
	} else if w.Type != Q2_K {
		_ = a.bK2[n*cols/32-1]
	}
	_, _ = a.qK[n*cols-1], a.dK[n*nk-1]
	var tile [kBatchKC * q2KTileSB]byte
	var acc [batchVecs][16]float32
	// The AVX-512 Q6_K-form kernel hints the next 8 rows in while it
	// computes (as matMulBatchQ4K32): only a chunk's first group is
	// loaded before its repack.
	hints := q6 && !vnni
	r := lo
	for ; r+8 <= hi; r += 8 {
		if !hints || r == lo {
			touchRows(w, r, 8)
		}
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:min(len(acc), (nv+3)&^3)]) // a padded four's too
			for k0 := 0; k0 < nk; k0 += kBatchKC {
				kc := min(kBatchKC, nk-k0)
				src := w.Data[r*rb+k0*bb : (r+7)*rb+(k0+kc)*bb]
				_ = tile[kc*tsb-1]
				repackKx8(w.Type, vnni, &tile[0], &src[0], rb, kc)
				// Fours, and a short last four whole on the padding (its
				// rows of acc are not read).
				v, fours := v0, v0+nv&^3
				if nv%4 >= padFoursX8 {
					fours = v0 + (nv+3)&^3
				}
				var nx []byte
				var share int
				if hints && v0 == 0 {
					nx, share = nextGroupShare(w, r, 8, k0, kc, bb, (fours-v)/4)
				}
				for ; v < fours; v += 4 {
					x, d := &a.qK[v*cols+qkK*k0], &a.dK[v*nk+k0]
					if q6 {
						pf, pfEnd := hintRange(&nx, share, &tile[0])
						batchQ6Kx8x4K(vnni, &tile[0], x, cols, d, 4*nk, &a.cK[v*cols/16+16*k0], 4*(cols/16), kc, &acc[v-v0][0], pf, pfEnd)
					} else if w.Type == Q2_K {
						batchQ2Kx8x4K(vnni, &tile[0], x, cols, d, 4*nk, &a.bsumsK[v*cols/16+16*k0], 2*(cols/16), kc, &acc[v-v0][0])
					} else {
						batchQ4Kx8x4K(vnni, &tile[0], x, cols, d, 4*nk, &a.bK2[v*cols/32+8*k0], 2*(cols/32), kc, &acc[v-v0][0])
					}
				}
				for ; v < v0+nv; v++ {
					x, d := &a.qK[v*cols+qkK*k0], &a.dK[v*nk+k0]
					if q6 {
						batchQ6Kx8x1K(vnni, &tile[0], x, d, &a.cK[v*cols/16+16*k0], kc, &acc[v-v0][0])
					} else if w.Type == Q2_K {
						batchQ2Kx8x1K(vnni, &tile[0], x, d, &a.bsumsK[v*cols/16+16*k0], kc, &acc[v-v0][0])
					} else {
						batchQ4Kx8x1K(vnni, &tile[0], x, d, &a.bK2[v*cols/32+8*k0], kc, &acc[v-v0][0])
					}
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

// batchQ6Kx8x4 is batchQ4Kx8x4 for a Q6_K tile (dotQ6_KSeq): c + t*cs
// holds vector t's offset corrections (-32 * each 16-sum, int32); only
// the first 8 of each vector's 16 accumulators are used. Between its
// 16-weight steps it hints the bytes from pf to pfEnd into the cache, two
// lines a step (32 a super-block: the next 8 rows of Q6_K take 27), as
// batchQ4Kx32px4 does.
//
//go:noescape
func batchQ6Kx8x4(tile *byte, x *int8, xs int, d *float32, ds int, c *int32, cs int, nb int, acc *float32, pf, pfEnd *byte)

// batchQ6Kx8x1 is batchQ6Kx8x4 for one vector.
//
//go:noescape
func batchQ6Kx8x1(tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32)

// repackQ6_Kx8Asm is repackQ6_Kx8Go in assembly (batch_amd64.s).
//
//go:noescape
func repackQ6_Kx8Asm(dst *byte, w *byte, rs int, nb int)

// repackQ6_Kx8Go writes the Q6_K tile (see repackQ6_Kx8Asm in
// batch_amd64.s) of nb super-blocks of the 8 rows at w, w+rs, ...: the
// reference for repackQ6_Kx8Asm.
func repackQ6_Kx8Go(dst, w []byte, rs, nb int) {
	le := binary.LittleEndian
	for b := range nb {
		t := dst[b*q6KTileSB : (b+1)*q6KTileSB]
		for r := range 8 {
			blk := w[r*rs+b*q6KBytes : r*rs+(b+1)*q6KBytes]
			ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
			for c := range 8 {
				h, k := c/4, c%4
				for e := range 32 {
					lo := ql[64*h+32*(k&1)+e] >> (4 * (k >> 1)) & 15
					hi := qh[32*h+e] >> (2 * k) & 3
					t[256*c+32*(e/4)+4*r+e%4] = lo | hi<<4
				}
			}
			for i := range 16 {
				le.PutUint32(t[2048+32*i+4*r:], uint32(int32(int8(sc[i]))))
			}
			le.PutUint32(t[2560+4*r:], math.Float32bits(FP16ToFP32(u16le(blk[208:]))))
		}
	}
}

// prepareCBatch fills a.cK with the corrections of the kernels of
// batchQ6Kx8x4 for weights whose quants are offset by off (Q6_K 32,
// Q3_K 4, IQ4_XS 128): -off times each 16-sum, as int32.
func (a *Activations) prepareCBatch(off int32) {
	if a.cKOff == off {
		return
	}
	if len(a.cK) < a.capK()*a.Cols/16 {
		a.cK = make([]int32, a.capK()*a.Cols/16)
	}
	for i, s := range a.bsumsK[:a.n*a.Cols/16] {
		a.cK[i] = -off * int32(s)
	}
	a.cKOff = off
}

// cBatchOff is the offset of t's quants in a Q6_K-form tile.
func cBatchOff(t Type) int32 {
	switch t {
	case IQ4_XS:
		return 128
	case Q3_K:
		return 4
	}
	return 32
}

// repackQ5_Kx8Asm is repackQ5_Kx8Go in assembly (batch_amd64.s).
//
//go:noescape
func repackQ5_Kx8Asm(dst *byte, w *byte, rs int, nb int)

// repackQ5_Kx8Go writes the tile of nb Q5_K super-blocks of the 8 rows at
// w, w+rs, ...: the Q4_K tile with 5-bit quants (the Q4_K kernels take
// it as it is). The reference for repackQ5_Kx8Asm.
func repackQ5_Kx8Go(dst, w []byte, rs, nb int) {
	le := binary.LittleEndian
	for b := range nb {
		t := dst[b*q4KTileSB : (b+1)*q4KTileSB]
		for r := range 8 {
			blk := w[r*rs+b*q5KBytes : r*rs+(b+1)*q5KBytes]
			sc, m := k4ScalesMins(blk[4:16])
			qh, qs := blk[16:48], blk[48:176]
			for j := range 8 {
				for k := range 32 {
					q := qs[32*(j/2)+k]
					if j&1 == 1 {
						q >>= 4
					}
					t[256*j+32*(k/4)+4*r+k%4] = q&15 | (qh[k]>>j&1)<<4
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

// repackIQ4_XSx8Asm is repackIQ4_XSx8Go in assembly (batch_amd64.s).
//
//go:noescape
func repackIQ4_XSx8Asm(dst *byte, w *byte, rs int, nb int)

// repackIQ4_XSx8Go writes the tile of nb IQ4_XS super-blocks of the 8 rows
// at w, w+rs, ... in the Q6_K tile's layout: the levels plus 128, each
// scale minus 32 for both halves of its sub-block, d. The reference for
// repackIQ4_XSx8Asm.
func repackIQ4_XSx8Go(dst, w []byte, rs, nb int) {
	le := binary.LittleEndian
	for b := range nb {
		t := dst[b*q6KTileSB : (b+1)*q6KTileSB]
		for r := range 8 {
			blk := w[r*rs+b*iq4XSBytes : r*rs+(b+1)*iq4XSBytes]
			for j := range 8 {
				qs := blk[8+16*j : 8+16*j+16]
				for e := range 32 {
					q := qs[e%16] >> (4 * (e / 16)) & 15
					t[256*j+32*(e/4)+4*r+e%4] = byte(int(iq4nlValues[q]) + 128)
				}
				ls := uint32(int32(iq4XSScale(blk, j) - 32))
				le.PutUint32(t[2048+32*(2*j)+4*r:], ls)
				le.PutUint32(t[2048+32*(2*j+1)+4*r:], ls)
			}
			le.PutUint32(t[2560+4*r:], math.Float32bits(FP16ToFP32(u16le(blk))))
		}
	}
}

// repackQ3_Kx8Asm is repackQ3_Kx8Go in assembly (batch_amd64.s).
//
//go:noescape
func repackQ3_Kx8Asm(dst *byte, w *byte, rs int, nb int)

// repackQ3_Kx8Go writes the tile of nb Q3_K super-blocks of the 8 rows at
// w, w+rs, ... in the Q6_K tile's layout: the quants plus 4 (0..7), the
// scales minus 32, d. The reference for repackQ3_Kx8Asm.
func repackQ3_Kx8Go(dst, w []byte, rs, nb int) {
	le := binary.LittleEndian
	for b := range nb {
		t := dst[b*q6KTileSB : (b+1)*q6KTileSB]
		for r := range 8 {
			blk := w[r*rs+b*q3KBytes : r*rs+(b+1)*q3KBytes]
			hm, qs, sc := blk[0:32], blk[32:96], q3KScales(blk[96:108])
			for c := range 8 {
				for l := range 32 {
					t[256*c+32*(l/4)+4*r+l%4] = qs[32*(c/4)+l]>>(2*(c%4))&3 | (hm[l]>>c&1)<<2
				}
			}
			for i := range 16 {
				le.PutUint32(t[2048+32*i+4*r:], uint32(int32(sc[i])-32))
			}
			le.PutUint32(t[2560+4*r:], math.Float32bits(FP16ToFP32(u16le(blk[108:]))))
		}
	}
}

// batchQ2Kx8x4 is batchQ4Kx8x4 for a Q2_K tile (dotQ2_KSeq): b + t*bs holds
// vector t's 16-sums.
//
//go:noescape
func batchQ2Kx8x4(tile *byte, x *int8, xs int, d *float32, ds int, b *int16, bs int, nb int, acc *float32)

// batchQ2Kx8x1 is batchQ2Kx8x4 for one vector.
//
//go:noescape
func batchQ2Kx8x1(tile *byte, x *int8, d *float32, b *int16, nb int, acc *float32)

// repackQ2_Kx8Asm is repackQ2_Kx8Go in assembly (batch_amd64.s).
//
//go:noescape
func repackQ2_Kx8Asm(dst *byte, w *byte, rs int, nb int)

// repackQ2_Kx8Go writes the Q2_K tile (see repackQ2_Kx8Asm in
// batch_amd64.s) of nb super-blocks of the 8 rows at w, w+rs, ...: the
// reference for repackQ2_Kx8Asm.
func repackQ2_Kx8Go(dst, w []byte, rs, nb int) {
	le := binary.LittleEndian
	for b := range nb {
		t := dst[b*q2KTileSB : (b+1)*q2KTileSB]
		for r := range 8 {
			blk := w[r*rs+b*q2KBytes : r*rs+(b+1)*q2KBytes]
			sc, qs := blk[0:16], blk[16:80]
			for c := range 8 {
				for l := range 32 {
					t[256*c+32*(l/4)+4*r+l%4] = qs[32*(c/4)+l] >> (2 * (c % 4)) & 3
				}
			}
			for i := range 16 {
				le.PutUint32(t[2048+32*i+4*r:], uint32(sc[i]&15))
			}
			for k := range 8 {
				le.PutUint32(t[2560+32*k+4*r:], uint32(sc[2*k]>>4)|uint32(sc[2*k+1]>>4)<<16)
			}
			le.PutUint32(t[2816+4*r:], math.Float32bits(FP16ToFP32(u16le(blk[80:]))))
			le.PutUint32(t[2848+4*r:], math.Float32bits(FP16ToFP32(u16le(blk[82:]))))
		}
	}
}

// batchQ4Kx16x4 is batchQ4Kx8x4 for 16 rows: two tiles of 8 rows, the
// second t bytes after the first; acc holds 32 float32 per vector (the 16
// rows' accumulators, then their mins accumulators).
//
//go:noescape
func batchQ4Kx16x4(tile *byte, t int, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32)

// matMulBatchQ4K16 computes the whole groups of 16 rows from lo up to hi
// of a Q4_K or Q5_K matrix with batchQ4Kx16x4 (the vectors in fours; the
// rest of them one by one on each tile of 8) and returns the first row
// it did not compute.
func matMulBatchQ4K16(out []float32, w Matrix, a *Activations, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nk := w.RowBytes(), cols/qkK
	bb := q4KBytes
	if w.Type == Q5_K {
		bb = q5KBytes
	}
	_, _, _ = a.qK[n*cols-1], a.dK[n*nk-1], a.bK2[n*cols/32-1]
	const half = kBatchKC16 * q4KTileSB
	var tile [2 * half]byte
	var acc [batchVecs][32]float32
	var acc1 [16]float32
	r := lo
	for ; r+16 <= hi; r += 16 {
		touchRows(w, r, 16)
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:nv])
			for k0 := 0; k0 < nk; k0 += kBatchKC16 {
				kc := min(kBatchKC16, nk-k0)
				for h := range 2 {
					src := w.Data[(r+8*h)*rb+k0*bb : (r+8*h+7)*rb+(k0+kc)*bb]
					_ = tile[h*half+kc*q4KTileSB-1]
					if w.Type == Q5_K {
						repackQ5_Kx8Asm(&tile[h*half], &src[0], rb, kc)
					} else {
						repackQ4_Kx8Asm(&tile[h*half], &src[0], rb, kc)
					}
				}
				v := v0
				for ; v+4 <= v0+nv; v += 4 {
					batchQ4Kx16x4(&tile[0], half, &a.qK[v*cols+qkK*k0], cols, &a.dK[v*nk+k0], 4*nk,
						&a.bK2[v*cols/32+8*k0], 2*(cols/32), kc, &acc[v-v0][0])
				}
				for ; v < v0+nv; v++ {
					x, d, b2 := &a.qK[v*cols+qkK*k0], &a.dK[v*nk+k0], &a.bK2[v*cols/32+8*k0]
					for h := range 2 { // acc[v]: rows 0-15, then mins 0-15; the kernel's: 8 and 8
						c := &acc[v-v0]
						copy(acc1[:8], c[8*h:8*h+8])
						copy(acc1[8:], c[16+8*h:16+8*h+8])
						batchQ4Kx8x1(&tile[h*half], x, d, b2, kc, &acc1[0])
						copy(c[8*h:8*h+8], acc1[:8])
						copy(c[16+8*h:16+8*h+8], acc1[8:])
					}
				}
			}
			for v := v0; v < v0+nv; v++ {
				o := out[v*rows+r : v*rows+r+16]
				for i := range o {
					o[i] = acc[v-v0][i] - acc[v-v0][16+i]
				}
			}
		}
	}
	return r
}

// repackQ4_Kx16iGo writes the interleaved 16-row Q4_K tile of nb
// super-blocks of the 16 rows at w, w+rs, ..., w+15*rs: the 8-row tiles
// (repackQ4_Kx8Go) of rows 0-7 and of rows 8-15, each 32-byte piece at
// twice its offset and rows 8-15's piece 32 bytes after rows 0-7's, so
// that a 64-byte load takes a piece of all 16 rows. The reference for
// repackQ4_Kx16iAsm.
func repackQ4_Kx16iGo(dst, w []byte, rs, nb int) { repackQ4_Kx16mGo(dst, w, rs, nb, 2) }

// repackQ4_Kx16qGo is repackQ4_Kx16iGo into half of an unpacked 32-row
// tile (each piece at four times its offset; rows 16-31 go 64 bytes
// further): what repackQ4_Kx16pGo packs.
func repackQ4_Kx16qGo(dst, w []byte, rs, nb int) { repackQ4_Kx16mGo(dst, w, rs, nb, 4) }

func repackQ4_Kx16mGo(dst, w []byte, rs, nb, m int) {
	repackQ4_Kx8mGo(dst, w, rs, nb, m)
	repackQ4_Kx8mGo(dst[32:], w[8*rs:], rs, nb, m)
}

// repackQ4_Kx8mGo writes the 8-row tile with each 32-byte piece at m
// times its offset.
func repackQ4_Kx8mGo(dst, w []byte, rs, nb, m int) {
	t := make([]byte, q4KTileSB)
	for b := range nb {
		repackQ4_Kx8Go(t, w[b*q4KBytes:], rs, 1)
		for i := 0; i < q4KTileSB; i += 32 {
			copy(dst[m*(b*q4KTileSB+i):m*(b*q4KTileSB+i)+32], t[i:i+32])
		}
	}
}

// batchQ4Kx16ix4 is batchQ4Kx16x4 on an interleaved tile (repackQ4_Kx16iAsm);
// where out is not nil it writes vector t's 16 results (accumulator minus
// mins accumulator) to out + t*os bytes instead of acc: the last
// super-blocks of the rows, without a pass of Go over acc (which cost a
// quarter of the kernel's time, measured).
//
//go:noescape
func batchQ4Kx16ix4(tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32, out *float32, os int)

// batchQ4Kx16ix1 is batchQ4Kx16ix4 for one vector.
//
//go:noescape
func batchQ4Kx16ix1(tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32, out *float32)

// repackQ4_Kx16iAsm is repackQ4_Kx16iGo in assembly (batch_amd64.s): the
// quants of the 16 rows transposed together in 64-byte registers, and
// their scales and mins taken apart together.
//
//go:noescape
func repackQ4_Kx16iAsm(dst *byte, w *byte, rs int, nb int)

// q4KTile32p is the bytes per super-block of the packed 32-row Q4_K tile
// (repackQ4_Kx16pAsm): the 32-row tile's 8192 bytes of quants packed in
// 4096, then its scales, mins, d and dmin as they are.
const q4KTile32p = 4*q4KTileSB - 4096

// repackQ4_Kx16pGo is repackQ4_Kx16qGo into half of a packed 32-row tile:
// the byte of group g of sub-blocks 2p and 2p+1 at 1024p+128g (and on)
// holds the low tile's quant in its low nibble and the high's in its high
// one. The reference for repackQ4_Kx16pAsm at dst (rows 0-15): unlike it,
// it writes all nb*q4KTile32p bytes, the other half's slots as zeros.
func repackQ4_Kx16pGo(dst, w []byte, rs, nb int) {
	q := make([]byte, nb*4*q4KTileSB)
	repackQ4_Kx16qGo(q, w, rs, nb)
	for b := range nb {
		t, u := dst[b*q4KTile32p:(b+1)*q4KTile32p], q[b*4*q4KTileSB:(b+1)*4*q4KTileSB]
		for p := range 4 {
			for i := range 1024 {
				t[1024*p+i] = u[2048*p+i] | u[2048*p+1024+i]<<4
			}
		}
		copy(t[4096:], u[8192:])
	}
}

// batchQ4Kx32px4 is batchQ4Kx16ix4 for 32 rows, on a packed tile (two
// repackQ4_Kx16pAsm): acc holds per vector 32 row accumulators, then 32
// mins accumulators. Between its sub-blocks it hints the bytes from pf to
// pfEnd into the cache, nine 64-byte lines a sub-block (what the next
// group's share of the same super-blocks takes at one call a chunk: 32
// rows x 144 bytes a super-block over its 8 sub-blocks), and past pfEnd
// the line of pfEnd again (pf = pfEnd: nothing new).
//
//go:noescape
func batchQ4Kx32px4(tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32, out *float32, os int, pf, pfEnd *byte)

// batchQ4Kx32px1 is batchQ4Kx32px4 for one vector.
//
//go:noescape
func batchQ4Kx32px1(tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32, out *float32)

// repackQ4_Kx16pAsm is repackQ4_Kx16pGo in assembly (batch_amd64.s).
//
//go:noescape
func repackQ4_Kx16pAsm(dst *byte, w *byte, rs int, nb int)

// padFours is the fewest vectors of a short last four (Activations.capK)
// that the Q4_K batch kernels of 16 and 32 rows run whole, padded, rather
// than one by one: BenchmarkMatMulActStream (5632x2048 from memory, AMD
// EPYC, AVX-512, one thread, 2026-12-06) took 0.58-0.60 ms a matrix at 3
// vectors padded against 0.73-0.75 one by one, 0.55-0.56 at 2 against
// 0.61-0.63 for the one-vector kernel twice, and at 6 and 7 0.75 against
// 0.80 and 0.95; a single vector left costs less alone (5: 0.72 against
// 0.75 padded). The 8-row kernels (Q6_K's, Q2_K's, AVX-VNNI's Q4_K) pad
// from three (padFoursX8): Q6_K took 1.07-1.10 ms at 3 padded against
// 1.14-1.22, 1.43 at 7 against 1.65-1.82, but at 2 padded 1.06-1.12
// against 0.98-1.02.
const (
	padFours   = 2
	padFoursX8 = 3
)

// padFour runs the four-vector Q4_K kernel of g-row tiles (32:
// batchQ4Kx32px4, 16: batchQ4Kx16ix4) over the super-blocks [k0, k0+kc)
// of a short last four: the m < 4 vectors from v and the padding after
// them (Activations.capK). At the last super-blocks its outputs go to a
// scratch and the m real ones on to out (rows r..r+g of each vector's
// rows outputs). The kernels are called directly, not as a func value,
// so that the scratch stays on the stack.
func padFour(g int, tile *byte, a *Activations, v, m, k0, kc int, acc *float32, last bool, out []float32, rows, r int, pf, pfEnd *byte) {
	cols, nk := a.Cols, a.Cols/qkK
	var part [4][32]float32
	var o *float32
	if last {
		o = &part[0][0]
	}
	x, d, b2 := &a.qK[v*cols+qkK*k0], &a.dK[v*nk+k0], &a.bK2[v*cols/32+8*k0]
	if g == 32 {
		batchQ4Kx32px4(tile, x, cols, d, 4*nk, b2, 2*(cols/32), kc, acc, o, 4*32, pf, pfEnd)
	} else {
		batchQ4Kx16ix4(tile, x, cols, d, 4*nk, b2, 2*(cols/32), kc, acc, o, 4*32)
	}
	if last {
		for t := range m {
			copy(out[(v+t)*rows+r:(v+t)*rows+r+g], part[t][:g])
		}
	}
}

// touchRows reads rows [r, r+k) of w into the cache in one pass, in
// memory order, before a batch kernel repacks them. The repacks read a
// group's rows a few super-blocks (or blocks) at a time, row after row,
// and memory delivers that order far slower than one pass: on the AMD
// EPYC of 2026-12-06, 32 rows of 5632x2048 Q4_K read in the repack's
// order came at 5-6.5 GB/s, in order at 22-26 GB/s (the hardware
// prefetchers follow the in-order stream; the prefetch hints the 32-row
// kernel issued for its next tile did not close the gap, nor did hints
// for the whole next group). A group is at most 32 rows (about 100 KB at
// 5632 Q4_K columns, 340 KB at 18944), so it stays in L2 for the repack.
// The pass is memory the core waits for, not overlapped with arithmetic;
// the 32-row Q4_K form (matMulBatchQ4K32) touches only a chunk's first
// group and hints the others in while it computes the one before.
func touchRows(w Matrix, r, k int) {
	rb := w.RowBytes()
	g := w.Data[r*rb : (r+k)*rb]
	touchLines(&g[0], len(g))
}

// touchLines loads a byte every 64 of the n bytes (n > 0) at p, in
// order, and the last one: every 64-byte line they touch.
//
//go:noescape
func touchLines(p *byte, n int)

// nextGroupShare returns the part of the g rows after row r (a group of
// rows is contiguous) in the same share as the super-blocks [k0, k0+kc)
// of bb bytes are of each row, for a chunk's calls four-vector kernel
// calls to hint into the cache while they compute rows r..r+g, and the
// bytes each call takes of it (whole lines; hintRange). Nothing when no
// whole group follows in w or there are no calls.
func nextGroupShare(w Matrix, r, g, k0, kc, bb, calls int) (next []byte, share int) {
	if calls <= 0 || r+2*g > w.Rows {
		return nil, 0
	}
	base := (r + g) * w.RowBytes()
	next = w.Data[base+g*k0*bb : base+g*(k0+kc)*bb]
	return next, (len(next)/calls + 63) &^ 63
}

// hintRange takes the first n bytes off *rest and returns the first and
// last of them, for a kernel that hints them into the cache as it computes
// (batchQ4Kx32px4's pf, pfEnd). When nothing is left it returns idle twice:
// a line already in L1 that the kernel may hint at no cost.
func hintRange(rest *[]byte, n int, idle *byte) (first, last *byte) {
	if len(*rest) == 0 {
		return idle, idle
	}
	p := (*rest)[:min(n, len(*rest))]
	*rest = (*rest)[len(p):]
	return &p[0], &p[len(p)-1]
}

// matMulBatchQ4K32 computes the whole groups of 32 rows from lo up to hi
// of a Q4_K matrix with the 32-row kernels and returns the first row it
// did not compute.
//
// Only the first group is loaded before its repack (touchRows); while the
// four-vector kernel computes a group, it hints the next 32 rows into the
// cache (past hi too: the pool hands a worker neighbouring chunks, Each),
// spread over its sub-blocks, so that memory and arithmetic overlap. The
// hints must come a few at a time: one pass of loads, or hints in a burst
// between tiles, stalled the core as long as the loads themselves (tried:
// docs/performance.md). 5632 x 2048 from memory, AMD EPYC (Zen 5) VM,
// 2026-12-07: one thread 4 vectors 0.54-0.58 -> 0.40-0.41 ms, 8 vectors
// 0.71 -> 0.57-0.58; two threads 0.36-0.41 -> 0.28-0.31, 0.46-0.47 ->
// 0.39-0.42. The packed tile (both nibbles a byte: half the repack's
// stores) then took 4 vectors 0.40-0.43 -> 0.30-0.32 ms on one thread,
// 8 0.57-0.59 -> 0.46-0.47; two threads 0.24-0.25 -> 0.20-0.21 and
// 0.34-0.36 -> 0.28 (2026-12-07, alternated in one process).
func matMulBatchQ4K32(out []float32, w Matrix, a *Activations, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nk := w.RowBytes(), cols/qkK
	_, _, _ = a.qK[n*cols-1], a.dK[n*nk-1], a.bK2[n*cols/32-1]
	var tile [kc32 * q4KTile32p]byte
	var acc [batchVecs][64]float32
	r := lo
	for ; r+32 <= hi; r += 32 {
		if r == lo {
			touchRows(w, r, 32) // the later groups come in on hints (below)
		}
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:min(len(acc), (nv+3)&^3)]) // a padded four's too
			for k0 := 0; k0 < nk; k0 += kc32 {
				kc := min(kc32, nk-k0)
				_ = tile[kc*q4KTile32p-1]
				for h := range 2 {
					src := w.Data[(r+16*h)*rb+k0*q4KBytes : (r+16*h+15)*rb+(k0+kc)*q4KBytes]
					repackQ4_Kx16pAsm(&tile[64*h], &src[0], rb, kc)
				}
				last := k0+kc == nk
				var nx []byte
				var share int
				if v0 == 0 {
					nx, share = nextGroupShare(w, r, 32, k0, kc, q4KBytes, nv/4+min(1, nv%4/padFours))
				}
				v := v0
				for ; v+4 <= v0+nv; v += 4 {
					var o *float32
					if last {
						_ = out[(v+3)*rows+r+31]
						o = &out[v*rows+r]
					}
					pf, pfEnd := hintRange(&nx, share, &tile[0])
					batchQ4Kx32px4(&tile[0], &a.qK[v*cols+qkK*k0], cols, &a.dK[v*nk+k0], 4*nk,
						&a.bK2[v*cols/32+8*k0], 2*(cols/32), kc, &acc[v-v0][0], o, 4*rows, pf, pfEnd)
				}
				if m := v0 + nv - v; m >= padFours {
					pf, pfEnd := hintRange(&nx, share, &tile[0])
					padFour(32, &tile[0], a, v, m, k0, kc, &acc[v-v0][0], last, out, rows, r, pf, pfEnd)
					v = v0 + nv
				}
				for ; v < v0+nv; v++ {
					var o *float32
					if last {
						_ = out[v*rows+r+31]
						o = &out[v*rows+r]
					}
					batchQ4Kx32px1(&tile[0], &a.qK[v*cols+qkK*k0], &a.dK[v*nk+k0], &a.bK2[v*cols/32+8*k0], kc, &acc[v-v0][0], o)
				}
			}
		}
	}
	return r
}

// matMulBatchQ4K16i is matMulBatchQ4K16 for Q4_K with the interleaved tile
// (repackQ4_Kx16iAsm): each weight group is one 64-byte load.
func matMulBatchQ4K16i(out []float32, w Matrix, a *Activations, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nk := w.RowBytes(), cols/qkK
	_, _, _ = a.qK[n*cols-1], a.dK[n*nk-1], a.bK2[n*cols/32-1]
	var tile [2 * kBatchKC16 * q4KTileSB]byte
	var acc [batchVecs][32]float32
	r := lo
	for ; r+16 <= hi; r += 16 {
		touchRows(w, r, 16)
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:min(len(acc), (nv+3)&^3)]) // a padded four's too
			for k0 := 0; k0 < nk; k0 += kBatchKC16 {
				kc := min(kBatchKC16, nk-k0)
				_ = tile[2*kc*q4KTileSB-1]
				src := w.Data[r*rb+k0*q4KBytes : (r+15)*rb+(k0+kc)*q4KBytes]
				repackQ4_Kx16iAsm(&tile[0], &src[0], rb, kc)
				last := k0+kc == nk
				v := v0
				for ; v+4 <= v0+nv; v += 4 {
					var o *float32
					if last {
						_ = out[(v+3)*rows+r+15]
						o = &out[v*rows+r]
					}
					batchQ4Kx16ix4(&tile[0], &a.qK[v*cols+qkK*k0], cols, &a.dK[v*nk+k0], 4*nk,
						&a.bK2[v*cols/32+8*k0], 2*(cols/32), kc, &acc[v-v0][0], o, 4*rows)
				}
				if m := v0 + nv - v; m >= padFours {
					padFour(16, &tile[0], a, v, m, k0, kc, &acc[v-v0][0], last, out, rows, r, &tile[0], &tile[0])
					v = v0 + nv
				}
				for ; v < v0+nv; v++ {
					var o *float32
					if last {
						_ = out[v*rows+r+15]
						o = &out[v*rows+r]
					}
					batchQ4Kx16ix1(&tile[0], &a.qK[v*cols+qkK*k0], &a.dK[v*nk+k0], &a.bK2[v*cols/32+8*k0], kc, &acc[v-v0][0], o)
				}
			}
		}
	}
	return r
}

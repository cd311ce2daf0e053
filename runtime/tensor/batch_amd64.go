//go:build !purego

package tensor

import "unsafe"

// The interleaved batch kernels work on a repacked tile of 8 rows by
// batchKC blocks: for each block, group g (elements 4g..4g+3) of the 8
// rows side by side as 32 bytes (row r in bytes 4r..4r+3), then the 8
// rows' scales as float32. Q8_0 tiles hold the quants' magnitudes and then
// the signed quants (the sign source); Q4_0 tiles the unsigned nibbles.
const (
	batchKC      = 16             // blocks per tile: a Q8_0 tile is 8.5 KB, in L1
	q80TileBlock = 256 + 256 + 32 // bytes per block in a Q8_0 tile
	q40TileBlock = 256 + 32       // bytes per block in a Q4_0 tile
	batchVecs    = 128            // vectors whose accumulators are kept per tile pass (4 KB)
)

// repackQ8_0x8 writes the tile of nb blocks of the 8 rows at w, w+rs, ...,
// w+7*rs into dst (nb*q80TileBlock bytes).
//
//go:noescape
func repackQ8_0x8(dst *byte, w *byte, rs int, nb int)

// repackQ4_0x8 is repackQ8_0x8 for Q4_0 rows (nb*q40TileBlock bytes).
//
//go:noescape
func repackQ4_0x8(dst *byte, w *byte, rs int, nb int)

// batchQ8_0x8 adds to acc[r] (r = 0..7) the row-sequential dot of tile
// row r with one vector's nb blocks (quants x, scales d): for each block,
// acc[r] = fma(float32(isum), dw[r]*d[b], acc[r]).
//
//go:noescape
func batchQ8_0x8(tile *byte, x *int8, d *float32, nb int, acc *float32)

// batchQ4_0x8 is batchQ8_0x8 for a Q4_0 tile; s8 holds 8*(sum of the
// vector's quants) per block, subtracted for the nibbles' offset of 8.
//
//go:noescape
func batchQ4_0x8(tile *byte, x *int8, d *float32, s8 *int32, nb int, acc *float32)

// batchQ8_0x8x2 is batchQ8_0x8 for two vectors at once (x0, d0 into
// acc0; x1, d1 into acc1), loading each weight group once.
//
//go:noescape
func batchQ8_0x8x2(tile *byte, x0, x1 *int8, d0, d1 *float32, nb int, acc0, acc1 *float32)

// batchQ4_0x8x2 is batchQ4_0x8 for two vectors at once.
//
//go:noescape
func batchQ4_0x8x2(tile *byte, x0, x1 *int8, d0, d1 *float32, s0, s1 *int32, nb int, acc0, acc1 *float32)

// batchQ8_0x8x4 is batchQ8_0x8 for four vectors at once: x[t], d[t] into
// acc[t].
//
//go:noescape
func batchQ8_0x8x4(tile *byte, x *[4]*int8, d *[4]*float32, nb int, acc *[4]*float32)

// batchQ4_0x8x4 is batchQ4_0x8 for four vectors at once.
//
//go:noescape
func batchQ4_0x8x4(tile *byte, x *[4]*int8, d *[4]*float32, s *[4]*int32, nb int, acc *[4]*float32)

// batchX4 enables the four-vector kernels (tests and benchmarks compare).
var batchX4 = true

// repackQ8_0x8U is repackQ8_0x8 for the AVX-512 kernels: the quants
// plus 128 as unsigned bytes, in blocks of q40TileBlock bytes.
//
//go:noescape
func repackQ8_0x8U(dst *byte, w *byte, rs int, nb int)

// batchU8x8x8 adds to acc[t][r] (r, t = 0..7) the row-sequential dot of
// row r of an unsigned tile (Q4_0's, or repackQ8_0x8U's) with vector t
// (quants x + t*xs bytes) over nb blocks: d[8b+t] is the vector's scale of
// block b, c[8b+t] its offset correction (batchX8Acts).
//
//go:noescape
func batchU8x8x8(tile *byte, x *int8, xs int, d *float32, c *int32, nb int, acc *float32)

// batchU8x8x1 is batchU8x8x8 for one vector: d[b], c[b] for block b.
//
//go:noescape
func batchU8x8x1(tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32)

// batchU8x16x4 is batchU8x8x8 for 16 rows (two tiles, the second t bytes
// after the first) and four vectors (d and c as for batchU8x8x8, this
// call's four first); acc holds 16 float32 per vector.
//
//go:noescape
func batchU8x16x4(tile *byte, t int, x *int8, xs int, d *float32, c *int32, nb int, acc *float32)

// batchU8x8x4V is batchU8x8x8 for four vectors with AVX-VNNI (VEX): d and
// c as for batchU8x8x8 (8 entries per block, this call's four first).
//
//go:noescape
func batchU8x8x4V(tile *byte, x *int8, xs int, d *float32, c *int32, nb int, acc *float32)

// batchU8x8x1V is batchU8x8x1 with AVX-VNNI.
//
//go:noescape
func batchU8x8x1V(tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32)

// allocBatch allocates what prepareBatch fills, for the kernels this CPU
// runs, so that MatMulAct allocates nothing (tests that switch kernel sets
// may still allocate on first use).
func (a *Activations) allocBatch() {
	if a.hasQ32 && (useAVX512 || useAVXVNNI) {
		for k := range a.x8 {
			a.x8[k].d, a.x8[k].c = make([]float32, a.Cap*a.Cols/32), make([]int32, a.Cap*a.Cols/32)
		}
	}
	if a.hasQK && (useAVX512 || useAVXVNNI) {
		a.bK2, a.cK = make([]int16, a.capK()*a.Cols/32), make([]int32, a.capK()*a.Cols/16)
	}
}

// prepareBatch fills what the VNNI batch kernels that will run for t
// read besides the quants: a.x8 for Q4_0 and Q8_0 (AVX-512 or AVX-VNNI),
// the sub-block sums or the offset corrections for the K-quants and
// IQ4_XS (AVX-512 or AVX-VNNI).
func (a *Activations) prepareBatch(t Type) {
	if !useAVX512 && !useAVXVNNI {
		return
	}
	switch t {
	case Q4_K, Q5_K:
		a.prepareQ4KBatch()
		return
	case Q3_K, Q6_K, IQ4_XS:
		a.prepareCBatch(cBatchOff(t))
		return
	case Q2_K:
		return
	}
	off := int32(8) // Q4_0: nibbles are the quants plus 8
	if t == Q8_0 {
		off = 128
	}
	x := &a.x8[x8Index(t)]
	if x.ok {
		return
	}
	nb := a.Cols / 32
	if len(x.d) < a.Cap*nb {
		x.d, x.c = make([]float32, a.Cap*nb), make([]int32, a.Cap*nb)
	}
	n8 := a.n &^ 7
	for v := range a.n {
		for b := range nb {
			var s int32
			for _, q := range a.q32[(v*nb+b)*32 : (v*nb+b+1)*32] {
				s += int32(q)
			}
			i := v*nb + b
			if v < n8 {
				i = (v&^7)*nb + 8*b + v&7
			}
			x.d[i], x.c[i] = a.d32[v*nb+b], -off*s
		}
	}
	x.ok = true
}

// x8Index is where a.x8 keeps t's inputs: Q4_0 0, Q8_0 1.
func x8Index(t Type) int {
	if t == Q8_0 {
		return 1
	}
	return 0
}

// matMulBatchX8 computes the whole groups of 8 rows from lo (a multiple
// of 8) up to hi with the interleaved kernels, and returns the first row
// it did not compute.
func matMulBatchX8(out []float32, w Matrix, a *Activations, lo, hi int) int {
	switch w.Type {
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS:
		q6 := w.Type == Q6_K || w.Type == Q3_K || w.Type == IQ4_XS
		if (useAVX512 || useAVXVNNI) && (w.Type == Q2_K || !q6 && a.okB2 || q6 && a.cKOff == cBatchOff(w.Type)) {
			return matMulBatchK(out, w, a, lo, hi)
		}
		return lo
	}
	if (useAVX512 || useAVXVNNI) && a.x8[x8Index(w.Type)].ok {
		return matMulBatchX8U(out, w, a, lo, hi)
	}
	if !useAVX2 {
		return lo
	}
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nb := w.RowBytes(), cols/32
	tileBlock := q80TileBlock
	if w.Type == Q4_0 {
		tileBlock = q40TileBlock
	}
	var tile [batchKC * q80TileBlock]byte
	var acc [batchVecs][8]float32
	r := lo
	for ; r+8 <= hi; r += 8 {
		touchRows(w, r, 8)
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:nv])
			for k0 := 0; k0 < nb; k0 += batchKC {
				kc := min(batchKC, nb-k0)
				src := w.Data[r*rb+k0*rb/nb:]
				_ = src[7*rb+kc*rb/nb-1]
				if w.Type == Q8_0 {
					repackQ8_0x8(&tile[0], &src[0], rb, kc)
				} else {
					repackQ4_0x8(&tile[0], &src[0], rb, kc)
				}
				_ = tile[kc*tileBlock-1]
				v := v0
				for ; batchX4 && v+4 <= v0+nv; v += 4 {
					var xs [4]*int8
					var ds [4]*float32
					var ss [4]*int32
					var accs [4]*float32
					for t := range 4 {
						xs[t] = &a.q32[(v+t)*cols+32*k0]
						ds[t] = &a.d32[(v+t)*nb+k0]
						ss[t] = &a.s32[(v+t)*nb+k0]
						accs[t] = &acc[v+t-v0][0]
					}
					_, _, _ = a.q32[(v+3)*cols+32*(k0+kc)-1], a.d32[(v+3)*nb+k0+kc-1], a.s32[(v+3)*nb+k0+kc-1]
					if w.Type == Q8_0 {
						batchQ8_0x8x4(&tile[0], &xs, &ds, kc, &accs)
					} else {
						batchQ4_0x8x4(&tile[0], &xs, &ds, &ss, kc, &accs)
					}
				}
				for ; v+2 <= v0+nv; v += 2 {
					x0 := a.q32[v*cols+32*k0 : v*cols+32*(k0+kc)]
					x1 := a.q32[(v+1)*cols+32*k0 : (v+1)*cols+32*(k0+kc)]
					d0 := a.d32[v*nb+k0 : v*nb+k0+kc]
					d1 := a.d32[(v+1)*nb+k0 : (v+1)*nb+k0+kc]
					if w.Type == Q8_0 {
						batchQ8_0x8x2(&tile[0], unsafe.SliceData(x0), unsafe.SliceData(x1), unsafe.SliceData(d0), unsafe.SliceData(d1),
							kc, &acc[v-v0][0], &acc[v+1-v0][0])
					} else {
						s0 := a.s32[v*nb+k0 : v*nb+k0+kc]
						s1 := a.s32[(v+1)*nb+k0 : (v+1)*nb+k0+kc]
						batchQ4_0x8x2(&tile[0], unsafe.SliceData(x0), unsafe.SliceData(x1), unsafe.SliceData(d0), unsafe.SliceData(d1),
							unsafe.SliceData(s0), unsafe.SliceData(s1), kc, &acc[v-v0][0], &acc[v+1-v0][0])
					}
				}
				for ; v < v0+nv; v++ {
					x := a.q32[v*cols+32*k0 : v*cols+32*(k0+kc)]
					d := a.d32[v*nb+k0 : v*nb+k0+kc]
					if w.Type == Q8_0 {
						batchQ8_0x8(&tile[0], unsafe.SliceData(x), unsafe.SliceData(d), kc, &acc[v-v0][0])
					} else {
						s8 := a.s32[v*nb+k0 : v*nb+k0+kc]
						batchQ4_0x8(&tile[0], unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(s8), kc, &acc[v-v0][0])
					}
				}
			}
			for v := v0; v < v0+nv; v++ {
				copy(out[v*rows+r:v*rows+r+8], acc[v-v0][:])
			}
		}
	}
	return r
}

// matMulBatchX8U is matMulBatchX8 with the VNNI kernels (AVX-512, else
// AVX-VNNI): tiles of unsigned bytes, eight vectors at a time (AVX-VNNI:
// two calls of four), then one by one.
func matMulBatchX8U(out []float32, w Matrix, a *Activations, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nb := w.RowBytes(), cols/32
	x := &a.x8[x8Index(w.Type)]
	n8 := n &^ 7
	_, _ = x.d[n*nb-1], x.c[n*nb-1]
	if useAVX512 && batchK16 {
		lo = matMulBatchU16(out, w, a, x, lo, hi)
	}
	var tile [batchKC * q40TileBlock]byte
	var acc [batchVecs][8]float32
	r := lo
	for ; r+8 <= hi; r += 8 {
		touchRows(w, r, 8)
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:nv])
			for k0 := 0; k0 < nb; k0 += batchKC {
				kc := min(batchKC, nb-k0)
				src := w.Data[r*rb+k0*rb/nb:]
				_ = src[7*rb+kc*rb/nb-1]
				if w.Type == Q8_0 {
					repackQ8_0x8U(&tile[0], &src[0], rb, kc)
				} else {
					repackQ4_0x8(&tile[0], &src[0], rb, kc)
				}
				_ = tile[kc*q40TileBlock-1]
				v := v0
				for ; v+8 <= min(v0+nv, n8); v += 8 {
					_ = a.q32[(v+7)*cols+32*(k0+kc)-1]
					i := v*nb + 8*k0
					if useAVX512 {
						batchU8x8x8(&tile[0], &a.q32[v*cols+32*k0], cols, &x.d[i], &x.c[i], kc, &acc[v-v0][0])
					} else {
						batchU8x8x4V(&tile[0], &a.q32[v*cols+32*k0], cols, &x.d[i], &x.c[i], kc, &acc[v-v0][0])
						batchU8x8x4V(&tile[0], &a.q32[(v+4)*cols+32*k0], cols, &x.d[i+4], &x.c[i+4], kc, &acc[v+4-v0][0])
					}
				}
				for ; v < v0+nv; v++ {
					_ = a.q32[v*cols+32*(k0+kc)-1]
					i := v*nb + k0 // past the groups of 8: plain rows
					if useAVX512 {
						batchU8x8x1(&tile[0], &a.q32[v*cols+32*k0], &x.d[i], &x.c[i], kc, &acc[v-v0][0])
					} else {
						batchU8x8x1V(&tile[0], &a.q32[v*cols+32*k0], &x.d[i], &x.c[i], kc, &acc[v-v0][0])
					}
				}
			}
			for v := v0; v < v0+nv; v++ {
				copy(out[v*rows+r:v*rows+r+8], acc[v-v0][:])
			}
		}
	}
	return r
}

// matMulBatchU16 is matMulBatchX8U for whole groups of 16 rows with
// batchU8x16x4 (the vectors in groups of eight, the rest one by one on
// each tile of 8); it returns the first row it did not compute.
func matMulBatchU16(out []float32, w Matrix, a *Activations, x *batchX8Acts, lo, hi int) int {
	rows, cols, n := w.Rows, w.Cols, a.n
	rb, nb := w.RowBytes(), cols/32
	n8 := n &^ 7
	const half = batchKC * q40TileBlock
	var tile [2 * half]byte
	var acc [batchVecs][16]float32
	r := lo
	for ; r+16 <= hi; r += 16 {
		touchRows(w, r, 16)
		for v0 := 0; v0 < n; v0 += batchVecs {
			nv := min(batchVecs, n-v0)
			clear(acc[:nv])
			for k0 := 0; k0 < nb; k0 += batchKC {
				kc := min(batchKC, nb-k0)
				for h := range 2 {
					src := w.Data[(r+8*h)*rb+k0*rb/nb:]
					_ = src[7*rb+kc*rb/nb-1]
					_ = tile[h*half+kc*q40TileBlock-1]
					if w.Type == Q8_0 {
						repackQ8_0x8U(&tile[h*half], &src[0], rb, kc)
					} else {
						repackQ4_0x8(&tile[h*half], &src[0], rb, kc)
					}
				}
				v := v0
				for ; v+8 <= min(v0+nv, n8); v += 8 {
					_ = a.q32[(v+7)*cols+32*(k0+kc)-1]
					i := v*nb + 8*k0
					batchU8x16x4(&tile[0], half, &a.q32[v*cols+32*k0], cols, &x.d[i], &x.c[i], kc, &acc[v-v0][0])
					batchU8x16x4(&tile[0], half, &a.q32[(v+4)*cols+32*k0], cols, &x.d[i+4], &x.c[i+4], kc, &acc[v+4-v0][0])
				}
				for ; v < v0+nv; v++ {
					_ = a.q32[v*cols+32*(k0+kc)-1]
					i := v*nb + k0 // past the groups of 8: plain rows
					for h := range 2 {
						batchU8x8x1(&tile[h*half], &a.q32[v*cols+32*k0], &x.d[i], &x.c[i], kc, &acc[v-v0][8*h])
					}
				}
			}
			for v := v0; v < v0+nv; v++ {
				copy(out[v*rows+r:v*rows+r+16], acc[v-v0][:])
			}
		}
	}
	return r
}

package tensor

import (
	"encoding/binary"
	"math"
)

// The generic (pure Go) dot products of one encoded weight row with one
// quantized activation vector. They are the reference for the assembly
// kernels, which must match them bit for bit, so they follow the assembly's
// arithmetic exactly: integer partial sums over the same groups of four
// elements (eight "lanes" per 32 elements), a float32 fused multiply-add
// per lane and block (fma32), and the same final reduction (hsum8) —
// except Q4_K, Q5_K and Q6_K, which sum row-sequentially (one FMA per
// super-block of its exact integer sum: seqEverywhere in batch.go).

// fma32 returns a*b + c rounded once to float32, as the FMA instructions
// do. The product of two float32s is exact in float64; the float64 sum may
// round, and when it lands exactly halfway between two float32s its
// rounding error decides the direction (otherwise rounding twice could
// differ from rounding once). Results in float32's subnormal range may
// still round twice; the kernels never produce them from real data.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact, so fusing it into a sum changes nothing
	s := p + float64(c)
	bits := math.Float64bits(s)
	if bits&(1<<29-1) == 1<<28 { // halfway between two float32s
		bv := s - p
		if e := (p - (s - bv)) + (float64(c) - bv); e != 0 {
			if (e > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
		}
	}
	return float32(math.Float64frombits(bits))
}

// hsum8 is the horizontal sum of eight lanes in the order the assembly
// reduces a vector register: halves, then pairs, then the last two.
func hsum8(a *[8]float32) float32 {
	s0, s1, s2, s3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (s0 + s2) + (s1 + s3)
}

func u16le(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// dotQ8_0Generic is the dot of a Q8_0 row with 32-block activations
// (quants x, scales d). Blocks alternate between two accumulators.
func dotQ8_0Generic(w []byte, x []int8, d []float32) float32 {
	nb := len(d)
	w, x = w[:nb*q80Bytes], x[:nb*32]
	var acc [2][8]float32
	for b := range nb {
		blk := w[b*q80Bytes : (b+1)*q80Bytes]
		s := FP16ToFP32(u16le(blk)) * d[b]
		qs, xs := blk[2:34], x[32*b:32*b+32]
		a := &acc[b&1]
		for l := range 8 {
			var is int32
			for k := 4 * l; k < 4*l+4; k++ {
				is += int32(int8(qs[k])) * int32(xs[k])
			}
			a[l] = fma32(float32(is), s, a[l])
		}
	}
	for l := range 8 {
		acc[0][l] += acc[1][l]
	}
	return hsum8(&acc[0])
}

// dotQ4_0Generic is the dot of a Q4_0 row with 32-block activations
// arranged in pairs of blocks (xp, see arrangeQ4Pairs). Blocks go in pairs:
// block b's integer sums land in lanes 4(b&1)..4(b&1)+3, lane l holding
// elements 4l..4l+3 and 16+4l..16+4l+3; pair j accumulates into acc[j&1].
// The quants are taken unsigned (nibble q) and the offset of 8 is taken
// off through s8[b] = 8 * (sum of block b's activation quants): with s the
// block's scale product, the corrections s * s8[b] go to lane b%8 of a
// second vector for blocks in whole groups of 8, then to a scalar for the
// rest. A lone last block is paired with a zero block of its scale. The
// result is hsum8(acc[0]+acc[1]) - (hsum8(corrections) + scalar).
func dotQ4_0Generic(w []byte, xp []int8, d, s8 []float32) float32 {
	nb := len(d)
	w, xp, s8 = w[:nb*q40Bytes], xp[:(nb+1)/2*64], s8[:nb]
	var acc [2][8]float32
	var corr [8]float32
	var corrT float32
	whole := nb &^ 7
	for b := range nb {
		blk := w[b*q40Bytes : (b+1)*q40Bytes]
		s := FP16ToFP32(u16le(blk)) * d[b]
		qs := blk[2:18]
		j, h := b/2, b&1
		lo, hi := xp[64*j+16*h:64*j+16*h+16], xp[64*j+32+16*h:64*j+32+16*h+16]
		a := &acc[j&1]
		for l := range 4 {
			var is int32
			for k := 4 * l; k < 4*l+4; k++ {
				is += int32(qs[k]&15)*int32(lo[k]) + int32(qs[k]>>4)*int32(hi[k])
			}
			a[4*h+l] = fma32(float32(is), s, a[4*h+l])
		}
		if b == nb-1 && h == 0 { // the lone block's zero partner
			for l := 4; l < 8; l++ {
				a[l] = fma32(0, s, a[l])
			}
		}
		if b < whole {
			corr[b&7] = fma32(s, s8[b], corr[b&7])
		} else {
			corrT = fma32(s, s8[b], corrT)
		}
	}
	for l := range 8 {
		acc[0][l] += acc[1][l]
	}
	return hsum8(&acc[0]) - (hsum8(&corr) + corrT)
}

// arrangeQ4Pairs copies one vector's 32-block quants q (nb blocks) into xp
// ((nb+1)/2*64 bytes) as the Q4_0 kernels read them: for each pair of
// blocks (b, b+1), the first 16 quants of b, then of b+1, then the last 16
// of b, then of b+1; a missing b+1 is zeros.
func arrangeQ4Pairs(q, xp []int8) {
	nb := len(q) / 32
	for j := 0; j < (nb+1)/2; j++ {
		p := xp[64*j : 64*j+64]
		b := 2 * j
		copy(p[0:16], q[32*b:32*b+16])
		copy(p[32:48], q[32*b+16:32*b+32])
		if b+1 < nb {
			copy(p[16:32], q[32*b+32:32*b+48])
			copy(p[48:64], q[32*b+48:32*b+64])
		} else {
			clear(p[16:32])
			clear(p[48:64])
		}
	}
}

// k4ScalesMins unpacks the 8 scales and 8 mins of a Q4_K/Q5_K block.
func k4ScalesMins(scales []byte) (sc, m [8]int32) {
	for j := range 8 {
		s, mm := scaleMinK4(j, scales)
		sc[j], m[j] = int32(s), int32(mm)
	}
	return sc, m
}

// dotQ4_KGeneric is the dot of a Q4_K row with Q8_K activations (quants x,
// scales d, 16-sums bsums), in the row-sequential form (dotQ4_KSeq): per
// super-block, the exact integer sums of the scaled sub-block dots and of
// the mins terms, each added by one FMA to its own accumulator, in block
// order. Every kernel set computes Q4_K this way for one vector, four and
// a batch, so a row's result does not depend on how many vectors share
// the call (seqEverywhere).
func dotQ4_KGeneric(w []byte, x []int8, d []float32, bsums []int16) float32 {
	return dotQ4_KSeq(w, x, d, bsums)
}

// dotQ5_KGeneric is dotQ4_KGeneric for Q5_K rows (a fifth bit from qh):
// row-sequential, dotQ5_KSeq.
func dotQ5_KGeneric(w []byte, x []int8, d []float32, bsums []int16) float32 {
	return dotQ5_KSeq(w, x, d, bsums)
}

// dotQ6_KGeneric is the dot of a Q6_K row with Q8_K activations in the
// row-sequential form (dotQ6_KSeq, without the 16-sums): per super-block
// the exact integer sum over its 16 sub-blocks of scale * (dot of the
// quants minus 32 with x), added by one FMA of d*dx, in block order. The
// assembly kernels compute the same integer in lanes and reduce it
// before the FMA (see seqEverywhere).
func dotQ6_KGeneric(w []byte, x []int8, d []float32) float32 {
	nb := len(d)
	w, x = w[:nb*q6KBytes], x[:nb*qkK]
	var acc float32
	for b := range nb {
		blk := w[b*q6KBytes : (b+1)*q6KBytes]
		dd := d[b] * FP16ToFP32(u16le(blk[208:]))
		ql, qh, sc, xs := blk[0:128], blk[128:192], blk[192:208], x[qkK*b:qkK*(b+1)]
		var sumi [8]int32
		for h := range 2 {
			for k := range 4 {
				for l := range 8 {
					var is int32
					for e := 4 * l; e < 4*l+4; e++ {
						lo := ql[64*h+32*(k&1)+e] >> (4 * (k >> 1)) & 15
						hi := qh[32*h+e] >> (2 * k) & 3
						is += (int32(lo|hi<<4) - 32) * int32(xs[128*h+32*k+e])
					}
					sumi[l] += int32(int8(sc[8*h+2*k+l/4])) * is
				}
			}
		}
		var isum int32
		for _, v := range sumi {
			isum += v
		}
		acc = fma32(float32(isum), dd, acc)
	}
	return acc
}

// The float weight types use the reference chunked dot (DotRow).
func dotF32Generic(w []byte, x []float32) float32  { return DotRow(F32, w, x) }
func dotF16Generic(w []byte, x []float32) float32  { return DotRow(F16, w, x) }
func dotBF16Generic(w []byte, x []float32) float32 { return DotRow(BF16, w, x) }

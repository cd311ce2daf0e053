package tensor

import (
	"encoding/binary"
	"math"
)

// The low-bit weight types that the popular GGUFs of big models use (the
// Q2_K/Q3_K mixes and IQ4_XS): super-blocks of 256 elements laid out
// exactly as ggml-common.h, decoded as ggml's dequantize_row_* loops do
// (the same products, rounded the same way), and encoded by fits of our own
// (a small search per sub-block, no importance matrix).

// Q2_K block (84 bytes), ggml's block_q2_K:
//
//	scales [16]byte  per 16 elements: scale in the low nibble, min in the high
//	qs     [64]byte  2-bit quants: for half h (128 elements), quarter k and
//	                 l < 32, element 128h+32k+l is (qs[32h+l] >> 2k) & 3
//	d      fp16      super-scale of the scales
//	dmin   fp16      super-scale of the mins
//
// Element e of sub-block s = e/16 is d*sc[s]*q - dmin*m[s].
const q2KBytes = 84

// Q3_K block (110 bytes), ggml's block_q3_K:
//
//	hmask  [32]byte  high bit of each quant: element e at bit e/32 of hmask[e%32]
//	qs     [64]byte  low 2 bits, placed as Q2_K's
//	scales [12]byte  16 6-bit scales (see q3KScales), stored with +32
//	d      fp16      super-scale
//
// Element e is d*(sc[e/16]-32)*(q - 4), q the 3-bit quant (low bits | high
// bit << 2): ggml writes it as q_low - (high bit set ? 0 : 4).
const q3KBytes = 110

// IQ4_XS block (136 bytes), ggml's block_iq4_xs:
//
//	d        fp16      super-scale
//	scales_h uint16    high 2 bits of the 8 6-bit scales (bits 2j, 2j+1)
//	scales_l [4]byte   low 4 bits of the scales (sub-block j: nibble j%2 of byte j/2)
//	qs       [128]byte 4-bit indices into iq4nlValues: sub-block j (32
//	                   elements) holds element l in the low nibble of
//	                   qs[16j+l] and element 16+l in the high nibble
//
// Element e of sub-block j is d*(ls[j]-32)*iq4nlValues[index].
const iq4XSBytes = 136

// iq4nlValues are the 16 non-uniform levels of IQ4_NL and IQ4_XS (ggml's
// kvalues_iq4nl), sorted.
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// q3KScales unpacks the 16 6-bit scales of a Q3_K block (still offset by
// 32): scale j has its low 4 bits in byte j (j < 8, low nibble) or j-8
// (high nibble) and its top 2 bits at bit 2*(j/4) of byte 8 + j%4.
func q3KScales(q []byte) (sc [16]int8) {
	q = q[:12]
	for j := range 16 {
		lo := q[j%8] >> (4 * (j / 8)) & 0xf
		hi := q[8+j%4] >> (2 * (j / 4)) & 3
		sc[j] = int8(lo | hi<<4)
	}
	return sc
}

// putQ3KScales is the inverse of q3KScales (ls already offset by 32, 0..63).
func putQ3KScales(q []byte, ls *[16]uint8) {
	q = q[:12]
	clear(q)
	for j := range 16 {
		q[j%8] |= (ls[j] & 0xf) << (4 * (j / 8))
		q[8+j%4] |= (ls[j] >> 4) << (2 * (j / 4))
	}
}

// iq4XSScale is the 6-bit scale of sub-block j (0..7) of an IQ4_XS block,
// offset by 32.
func iq4XSScale(b []byte, j int) int {
	h := binary.LittleEndian.Uint16(b[2:])
	return int(b[4+j/2]>>(4*(j%2))&0xf) | int(h>>(2*j)&3)<<4
}

func decodeQ2_K(src []byte, dst []float32) {
	for len(dst) >= qkK && len(src) >= q2KBytes {
		b := src[:q2KBytes]
		y := dst[:qkK]
		d := FP16ToFP32(binary.LittleEndian.Uint16(b[80:]))
		dmin := FP16ToFP32(binary.LittleEndian.Uint16(b[82:]))
		scales := b[0:16]
		for h := range 2 {
			q := b[16+32*h : 16+32*h+32]
			for k := range 4 {
				shift := uint(2 * k)
				yy := y[128*h+32*k : 128*h+32*k+32]
				for half := range 2 {
					sc := scales[8*h+2*k+half]
					dl, ml := d*float32(sc&0xf), dmin*float32(sc>>4)
					for l := 16 * half; l < 16*half+16; l++ {
						// Rounded before the subtraction, as ggml's
						// separate multiply and subtract (no fused
						// multiply-add, which Go may use on arm64).
						yy[l] = float32(dl*float32(q[l]>>shift&3)) - ml
					}
				}
			}
		}
		src, dst = src[q2KBytes:], dst[qkK:]
	}
}

func decodeQ3_K(src []byte, dst []float32) {
	for len(dst) >= qkK && len(src) >= q3KBytes {
		b := src[:q3KBytes]
		y := dst[:qkK]
		hm := b[0:32]
		d := FP16ToFP32(binary.LittleEndian.Uint16(b[108:]))
		sc := q3KScales(b[96:108])
		for h := range 2 {
			q := b[32+32*h : 32+32*h+32]
			for k := range 4 {
				shift := uint(2 * k)
				bit := uint(4*h + k)
				yy := y[128*h+32*k : 128*h+32*k+32]
				for half := range 2 {
					dl := d * float32(int(sc[8*h+2*k+half])-32)
					for l := 16 * half; l < 16*half+16; l++ {
						v := int(q[l]>>shift&3) - 4 + 4*int(hm[l]>>bit&1)
						yy[l] = dl * float32(v)
					}
				}
			}
		}
		src, dst = src[q3KBytes:], dst[qkK:]
	}
}

func decodeIQ4_XS(src []byte, dst []float32) {
	for len(dst) >= qkK && len(src) >= iq4XSBytes {
		b := src[:iq4XSBytes]
		y := dst[:qkK]
		d := FP16ToFP32(binary.LittleEndian.Uint16(b))
		for j := range 8 {
			dl := d * float32(iq4XSScale(b, j)-32)
			qs := b[8+16*j : 8+16*j+16]
			yy := y[32*j : 32*j+32]
			for l, v := range qs {
				yy[l] = dl * float32(iq4nlValues[v&0xf])
				yy[l+16] = dl * float32(iq4nlValues[v>>4])
			}
		}
		src, dst = src[iq4XSBytes:], dst[qkK:]
	}
}

// fitMinScale fits x ≈ scale*l + off with integer l in [0, nmax] and
// off <= 0 (the K-quants subtract a min), minimizing the squared error over
// a few candidate grids: each candidate places the range [min(x,0), max x]
// on nmax+delta steps, rounds, and refits scale and offset by least
// squares. It returns scale >= 0 and -off >= 0.
func fitMinScale(x []float32, nmax int) (scale, negOff float32) {
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	lo = min(lo, 0)
	if hi <= lo {
		return 0, -lo
	}
	n := float64(len(x))
	var sx float64
	for _, v := range x {
		sx += float64(v)
	}
	bestErr := math.Inf(1)
	scale, negOff = (hi-lo)/float32(nmax), -lo
	for t := -4; t <= 4; t++ {
		is := (float32(nmax) + 0.1*float32(t)) / (hi - lo)
		var sl, sl2, slx float64
		for _, v := range x {
			l := float64(max(0, min(nmax, nearest(is*(v-lo)))))
			sl += l
			sl2 += l * l
			slx += l * float64(v)
		}
		det := n*sl2 - sl*sl
		if det <= 0 {
			continue
		}
		a := (n*slx - sl*sx) / det
		c := (sl2*sx - sl*slx) / det
		if c > 0 { // no positive offsets: fit the scale alone
			c = 0
			a = slx / sl2
		}
		if a < 0 {
			continue
		}
		var e float64
		for _, v := range x {
			l := float64(max(0, min(nmax, nearest(is*(v-lo)))))
			r := a*l + c - float64(v)
			e += r * r
		}
		if e < bestErr {
			bestErr, scale, negOff = e, float32(a), float32(-c)
		}
	}
	return scale, negOff
}

// iq4Mids are twice the midpoints between neighbouring iq4nlValues: v
// is nearest level i when iq4Mids[i-1] <= 2v < iq4Mids[i].
var iq4Mids = func() (m [15]float32) {
	for i := range m {
		m[i] = float32(int(iq4nlValues[i]) + int(iq4nlValues[i+1]))
	}
	return m
}()

// nearestIQ4 returns the index of the IQ4_NL level nearest v (a binary
// search on the midpoints; ties go up, as ggml's best_index_int8).
func nearestIQ4(v float32) int {
	v2 := v + v
	i := 0
	if v2 >= iq4Mids[7] {
		i = 8
	}
	if v2 >= iq4Mids[i+3] {
		i += 4
	}
	if v2 >= iq4Mids[i+1] {
		i += 2
	}
	if v2 >= iq4Mids[i] {
		i++
	}
	return i
}

// q3Level returns the Q3_K quant (-4..3) nearest v.
func q3Level(v float32) int { return max(-4, min(3, nearest(v))) }

// fitLevels fits x ≈ s*level (signed s) over Q3_K's levels -4..3 or, when
// iq4 is set, the IQ4_NL levels, by trying candidate scales that put the
// element of largest magnitude at or near either end of the levels,
// assigning each element its nearest level and refitting s by least
// squares; it returns the best s (0 for a zero x).
func fitLevels(x []float32, iq4 bool, tries int) float32 {
	var amax, m float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, m = a, v
		}
	}
	if amax == 0 {
		return 0
	}
	lo, hi, step := float32(-4), float32(3), float32(0.25)
	if iq4 {
		lo, hi, step = -127, 113, 4
	}
	var sxx float64
	for _, v := range x {
		sxx += float64(v) * float64(v)
	}
	best, bestErr := m/lo, math.Inf(1)
	for _, end := range [2]float32{lo, hi} {
		for t := -tries; t <= tries; t++ {
			inv := (end + step*float32(t)) / m // 1/s
			var sxl, sll float32
			for _, v := range x {
				var l float32
				if iq4 {
					l = float32(iq4nlValues[nearestIQ4(v*inv)])
				} else {
					l = float32(q3Level(v * inv))
				}
				sxl += v * l
				sll += l * l
			}
			if sll == 0 {
				continue
			}
			if e := sxx - float64(sxl)*float64(sxl)/float64(sll); e < bestErr {
				bestErr, best = e, sxl/sll
			}
		}
	}
	return best
}

// signedSuperScale picks the fp16 super-scale d for signed sub-block scales
// stored in 6 bits as l in [-32, 31]: the scale of largest magnitude maps
// to -32 (the end with one more step), as ggml does.
func signedSuperScale(scales []float32) (hd uint16, d float32) {
	var amax, m float32
	for _, s := range scales {
		if a := abs32(s); a > amax {
			amax, m = a, s
		}
	}
	if amax == 0 {
		return 0, 0
	}
	hd = FP32ToFP16(-m / 32)
	return hd, FP16ToFP32(hd)
}

// level6 rounds s/d to a 6-bit signed scale level in [-32, 31].
func level6(s, d float32) int {
	if d == 0 {
		return 0
	}
	return max(-32, min(31, nearest(s/d)))
}

// encodeQ2_K fits each 16-element sub-block with fitMinScale (2-bit
// quants), stores the scales and mins in 4 bits under fp16 super-scales
// (the largest maps to 15) and requantizes against the stored values.
func encodeQ2_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for len(src) >= qkK && len(dst) >= q2KBytes {
		x := src[:qkK]
		b := dst[:q2KBytes]
		var scales, mins [16]float32
		var maxScale, maxMin float32
		for j := range 16 {
			scales[j], mins[j] = fitMinScale(x[16*j:16*j+16], 3)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		hd, hmin := FP32ToFP16(maxScale/15), FP32ToFP16(maxMin/15)
		d, dmin := FP16ToFP32(hd), FP16ToFP32(hmin)
		for j := range 16 {
			ls, lm := 0, 0
			if d > 0 {
				ls = max(0, min(15, nearest(scales[j]/d)))
			}
			if dmin > 0 {
				lm = max(0, min(15, nearest(mins[j]/dmin)))
			}
			b[j] = byte(ls | lm<<4)
			step, off := d*float32(ls), dmin*float32(lm)
			for i := 16 * j; i < 16*j+16; i++ {
				L[i] = 0
				if step != 0 {
					L[i] = uint8(max(0, min(3, nearest((x[i]+off)/step))))
				}
			}
		}
		binary.LittleEndian.PutUint16(b[80:], hd)
		binary.LittleEndian.PutUint16(b[82:], hmin)
		qs := b[16:80]
		for h := range 2 {
			for l := range 32 {
				e := 128*h + l
				qs[32*h+l] = L[e] | L[e+32]<<2 | L[e+64]<<4 | L[e+96]<<6
			}
		}
		src, dst = src[qkK:], dst[q2KBytes:]
	}
}

// encodeQ3_K fits each 16-element sub-block's signed scale with fitLevels,
// stores the scales in 6 bits under an fp16 super-scale and requantizes
// against the stored values.
func encodeQ3_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for len(src) >= qkK && len(dst) >= q3KBytes {
		x := src[:qkK]
		b := dst[:q3KBytes]
		var scales [16]float32
		for j := range 16 {
			scales[j] = fitLevels(x[16*j:16*j+16], false, 4)
		}
		hd, d := signedSuperScale(scales[:])
		var ls [16]uint8
		for j := range 16 {
			l := level6(scales[j], d)
			ls[j] = uint8(l + 32)
			step := d * float32(l)
			for i := 16 * j; i < 16*j+16; i++ {
				L[i] = 4 // zero
				if step != 0 {
					L[i] = uint8(max(-4, min(3, nearest(x[i]/step))) + 4)
				}
			}
		}
		hm, qs := b[0:32], b[32:96]
		clear(hm)
		for e, q := range L {
			hm[e%32] |= (q >> 2) << (e / 32)
		}
		for h := range 2 {
			for l := range 32 {
				e := 128*h + l
				qs[32*h+l] = L[e]&3 | (L[e+32]&3)<<2 | (L[e+64]&3)<<4 | (L[e+96]&3)<<6
			}
		}
		putQ3KScales(b[96:108], &ls)
		binary.LittleEndian.PutUint16(b[108:], hd)
		src, dst = src[qkK:], dst[q3KBytes:]
	}
}

// encodeIQ4_XS fits each 32-element sub-block's signed scale over the
// IQ4_NL levels with fitLevels, stores the scales in 6 bits under an fp16
// super-scale and picks each element's nearest level at the stored scale.
func encodeIQ4_XS(src []float32, dst []byte) {
	for len(src) >= qkK && len(dst) >= iq4XSBytes {
		x := src[:qkK]
		b := dst[:iq4XSBytes]
		var scales [8]float32
		for j := range 8 {
			scales[j] = fitLevels(x[32*j:32*j+32], true, 3)
		}
		hd, d := signedSuperScale(scales[:])
		binary.LittleEndian.PutUint16(b, hd)
		var sh uint16
		clear(b[4:8])
		for j := range 8 {
			l := level6(scales[j], d)
			u := uint8(l + 32)
			b[4+j/2] |= (u & 0xf) << (4 * (j % 2))
			sh |= uint16(u>>4) << (2 * j)
			dl := d * float32(l)
			var inv float32
			if dl != 0 {
				inv = 1 / dl
			}
			qs := b[8+16*j : 8+16*j+16]
			xs := x[32*j : 32*j+32]
			for i := range 16 {
				lo := nearestIQ4(xs[i] * inv)
				hi := nearestIQ4(xs[i+16] * inv)
				if dl == 0 { // index 8 (level 1) is the nearest to zero
					lo, hi = 8, 8
				}
				qs[i] = uint8(lo) | uint8(hi)<<4
			}
		}
		binary.LittleEndian.PutUint16(b[2:], sh)
		src, dst = src[qkK:], dst[iq4XSBytes:]
	}
}

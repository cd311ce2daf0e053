package tensor

import (
	"encoding/binary"
	"math"
)

// K-quants: super-blocks of 256 elements (ggml's QK_K), laid out exactly as
// ggml-common.h. The decoders follow ggml's dequantize_row_* loops
// literally; the encoders are simple fits of our own (no search), good
// enough for synthetic weights and tests.
const qkK = 256

// Q4_K block (144 bytes), ggml's block_q4_K:
//
//	d      fp16      super-scale of the 6-bit sub-block scales
//	dmin   fp16      super-scale of the 6-bit sub-block mins
//	scales [12]byte  8 scales and 8 mins, 6 bits each (see scaleMinK4)
//	qs     [128]byte 4-bit quants: 64-element group g holds elements
//	                 64g+l in the low nibble of qs[32g+l] and 64g+32+l in
//	                 the high nibble
//
// Element e of sub-block j = e/32 is d*sc[j]*q - dmin*m[j].
const q4KBytes = 144

// Q5_K block (176 bytes), ggml's block_q5_K: d, dmin, scales as Q4_K, then
// qh [32]byte (bit 2g of qh[l] is the fifth bit of element 64g+l, bit 2g+1
// that of element 64g+32+l) and qs [128]byte as Q4_K.
const q5KBytes = 176

// Q6_K block (210 bytes), ggml's block_q6_K:
//
//	ql     [128]byte low 4 bits
//	qh     [64]byte  high 2 bits
//	scales [16]int8  one per 16 elements
//	d      fp16
//
// For half h (128 elements), quarter k and l < 32, element 128h+32k+l has
// low bits from ql[64h+32(k&1)+l] (low nibble for k<2, high for k>=2),
// high bits (qh[32h+l] >> 2k) & 3, and value d*scales[e/16]*(q-32).
const q6KBytes = 210

// Q8_K block (292 bytes), ggml's block_q8_K: d float32, qs [256]int8,
// bsums [16]int16 (sums of each 16 quants, for dot products with K-quants).
const q8KBytes = 292

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0..7) from a
// K-quant scales array, as ggml's get_scale_min_k4: sub-blocks 0-3 use the
// low 6 bits of bytes j and j+4; sub-blocks 4-7 take their low 4 bits from
// byte j+4 (scale low nibble, min high nibble) and their top 2 bits from the
// top bits of bytes j-4 (scale) and j (min).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	q = q[:12]
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// putScaleMinK4 is the inverse of scaleMinK4 for all 8 sub-blocks.
func putScaleMinK4(q []byte, sc, m *[8]uint8) {
	q = q[:12]
	for j := 0; j < 4; j++ {
		q[j] = sc[j] | (sc[j+4]>>4)<<6
		q[j+4] = m[j] | (m[j+4]>>4)<<6
		q[j+8] = sc[j+4]&0xf | (m[j+4]&0xf)<<4
	}
}

func decodeQ4_K(src []byte, dst []float32) {
	for len(dst) >= qkK && len(src) >= q4KBytes {
		b := src[:q4KBytes]
		y := dst[:qkK]
		d := FP16ToFP32(binary.LittleEndian.Uint16(b[0:]))
		dmin := FP16ToFP32(binary.LittleEndian.Uint16(b[2:]))
		scales := b[4:16]
		q := b[16:144]
		is := 0
		for j := 0; j < qkK; j += 64 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			qq := q[:32]
			lo := y[j : j+32]
			hi := y[j+32 : j+64]
			for l, v := range qq {
				lo[l] = d1*float32(v&0xf) - m1
				hi[l] = d2*float32(v>>4) - m2
			}
			q = q[32:]
			is += 2
		}
		src, dst = src[q4KBytes:], dst[qkK:]
	}
}

func decodeQ5_K(src []byte, dst []float32) {
	for len(dst) >= qkK && len(src) >= q5KBytes {
		b := src[:q5KBytes]
		y := dst[:qkK]
		d := FP16ToFP32(binary.LittleEndian.Uint16(b[0:]))
		dmin := FP16ToFP32(binary.LittleEndian.Uint16(b[2:]))
		scales := b[4:16]
		qh := b[16:48]
		ql := b[48:176]
		is := 0
		// ggml tests qh[l] against masks u1 = 1<<s, u2 = 2<<s (s = 0, 2,
		// 4, 6); shifting the bit down instead keeps the loop branch-free.
		s := uint(0)
		for j := 0; j < qkK; j += 64 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			qq := ql[:32]
			hh := qh[:32]
			lo := y[j : j+32]
			hi := y[j+32 : j+64]
			for l, v := range qq {
				h := hh[l] >> s
				a := v&0xf | (h&1)<<4
				c := v>>4 | (h>>1&1)<<4
				lo[l] = d1*float32(a) - m1
				hi[l] = d2*float32(c) - m2
			}
			ql = ql[32:]
			is += 2
			s += 2
		}
		src, dst = src[q5KBytes:], dst[qkK:]
	}
}

func decodeQ6_K(src []byte, dst []float32) {
	for len(dst) >= qkK && len(src) >= q6KBytes {
		b := src[:q6KBytes]
		y := dst[:qkK]
		d := FP16ToFP32(binary.LittleEndian.Uint16(b[208:]))
		ql := b[0:128]
		qh := b[128:192]
		sc := b[192:208]
		for n := 0; n < qkK; n += 128 {
			yy := y[n : n+128]
			l0 := ql[:64]
			h0 := qh[:32]
			s := sc[:8]
			// ggml's loop runs l over 0..31 with is = l/16; d*scale is
			// hoisted per 16 (the same product, so the same rounding).
			for is := 0; is < 2; is++ {
				s1 := d * float32(int8(s[is]))
				s2 := d * float32(int8(s[is+2]))
				s3 := d * float32(int8(s[is+4]))
				s4 := d * float32(int8(s[is+6]))
				for l := 16 * is; l < 16*is+16; l++ {
					h := h0[l]
					q1 := int(l0[l]&0xf|(h>>0&3)<<4) - 32
					q2 := int(l0[l+32]&0xf|(h>>2&3)<<4) - 32
					q3 := int(l0[l]>>4|(h>>4&3)<<4) - 32
					q4 := int(l0[l+32]>>4|(h>>6&3)<<4) - 32
					yy[l] = s1 * float32(q1)
					yy[l+32] = s2 * float32(q2)
					yy[l+64] = s3 * float32(q3)
					yy[l+96] = s4 * float32(q4)
				}
			}
			ql = ql[64:]
			qh = qh[32:]
			sc = sc[8:]
		}
		src, dst = src[q6KBytes:], dst[qkK:]
	}
}

func decodeQ8_K(src []byte, dst []float32) {
	for len(dst) >= qkK && len(src) >= q8KBytes {
		b := src[:q8KBytes]
		y := dst[:qkK]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		qs := b[4:260]
		for j := range y {
			y[j] = d * float32(int8(qs[j]))
		}
		src, dst = src[q8KBytes:], dst[qkK:]
	}
}

// fp16Cover returns the fp16 encoding of the smallest half value h with
// h*levels >= v (v >= 0): a super-scale that lets every sub-block scale up
// to v be stored in `levels` steps without clipping.
func fp16Cover(v float32, levels float32) uint16 {
	h := FP32ToFP16(v / levels)
	for FP16ToFP32(h)*levels < v && h < 0x7bff {
		h++
	}
	return h
}

// ceilLevel is the smallest integer level in [0, maxLevel] with level*d >= v,
// or 0 when d is 0.
func ceilLevel(v, d float32, maxLevel int) int {
	if d == 0 {
		return 0
	}
	l := int(math.Ceil(float64(v / d)))
	return max(0, min(maxLevel, l))
}

// nearest rounds to the nearest integer, ties to even (ggml's nearest_int).
func nearest(v float32) int { return int(math.RoundToEven(float64(v))) }

// encodeMinScaleK fits one Q4_K/Q5_K super-block: per 32-element sub-block
// an affine map x ≈ d*sc*q - dmin*m with q in [0, nmax]. Mins are stored
// rounded up and scales chosen to cover the rest of the range, so nothing
// clips and the error is at most half a step. It writes d, dmin and scales
// into b[0:16] and the quants into L.
func encodeMinScaleK(x []float32, b []byte, L *[qkK]uint8, nmax int) {
	x = x[:qkK]
	var lo, hi, mins [8]float32
	var maxMin float32
	for j := range 8 {
		sub := x[32*j : 32*j+32]
		mn, mx := sub[0], sub[0]
		for _, v := range sub {
			mn = min(mn, v)
			mx = max(mx, v)
		}
		mn = min(mn, 0) // ggml's K-quants only subtract a min
		lo[j], hi[j] = mn, mx
		mins[j] = -mn
		maxMin = max(maxMin, -mn)
	}
	hmin := fp16Cover(maxMin, 63)
	dmin := FP16ToFP32(hmin)
	var lm, ls [8]uint8
	var scales [8]float32
	var maxScale float32
	for j := range 8 {
		lm[j] = uint8(ceilLevel(mins[j], dmin, 63))
		scales[j] = (hi[j] + dmin*float32(lm[j])) / float32(nmax)
		maxScale = max(maxScale, scales[j])
	}
	hd := fp16Cover(maxScale, 63)
	d := FP16ToFP32(hd)
	for j := range 8 {
		ls[j] = uint8(ceilLevel(scales[j], d, 63))
	}
	binary.LittleEndian.PutUint16(b[0:], hd)
	binary.LittleEndian.PutUint16(b[2:], hmin)
	putScaleMinK4(b[4:16], &ls, &lm)
	for j := range 8 {
		sc, m := scaleMinK4(j, b[4:16])
		step := d * float32(sc)
		off := dmin * float32(m)
		for i := 32 * j; i < 32*j+32; i++ {
			if step == 0 {
				L[i] = 0
				continue
			}
			L[i] = uint8(max(0, min(nmax, nearest((x[i]+off)/step))))
		}
	}
}

func encodeQ4_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for len(src) >= qkK && len(dst) >= q4KBytes {
		b := dst[:q4KBytes]
		encodeMinScaleK(src[:qkK], b, &L, 15)
		q := b[16:144]
		for j := 0; j < qkK; j += 64 {
			for l := 0; l < 32; l++ {
				q[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
		src, dst = src[qkK:], dst[q4KBytes:]
	}
}

func encodeQ5_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for len(src) >= qkK && len(dst) >= q5KBytes {
		b := dst[:q5KBytes]
		encodeMinScaleK(src[:qkK], b, &L, 31)
		qh := b[16:48]
		ql := b[48:176]
		clear(qh)
		for g := 0; g < 4; g++ {
			for l := 0; l < 32; l++ {
				a, c := L[64*g+l], L[64*g+32+l]
				qh[l] |= (a>>4)<<(2*g) | (c>>4)<<(2*g+1)
				ql[32*g+l] = a&0xf | (c&0xf)<<4
			}
		}
		src, dst = src[qkK:], dst[q5KBytes:]
	}
}

// encodeQ6_K gives each 16-element sub-block the scale amax/31 (rounded up
// to a multiple of the super-scale d), so quants lie in [-31, 31] without
// clipping.
func encodeQ6_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for len(src) >= qkK && len(dst) >= q6KBytes {
		x := src[:qkK]
		b := dst[:q6KBytes]
		var want [16]float32
		var maxScale float32
		for j := range 16 {
			var amax float32
			for _, v := range x[16*j : 16*j+16] {
				amax = max(amax, abs32(v))
			}
			want[j] = amax / 31
			maxScale = max(maxScale, want[j])
		}
		hd := fp16Cover(maxScale, 127)
		d := FP16ToFP32(hd)
		sc := b[192:208]
		for j := range 16 {
			s := ceilLevel(want[j], d, 127)
			sc[j] = byte(int8(s))
			step := d * float32(s)
			for i := 16 * j; i < 16*j+16; i++ {
				q := 0
				if step != 0 {
					q = max(-32, min(31, nearest(x[i]/step)))
				}
				L[i] = uint8(q + 32)
			}
		}
		binary.LittleEndian.PutUint16(b[208:], hd)
		ql := b[0:128]
		qh := b[128:192]
		for h := 0; h < 2; h++ {
			for l := 0; l < 32; l++ {
				e := 128*h + l
				q1, q2, q3, q4 := L[e], L[e+32], L[e+64], L[e+96]
				ql[64*h+l] = q1&0xf | (q3&0xf)<<4
				ql[64*h+l+32] = q2&0xf | (q4&0xf)<<4
				qh[32*h+l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
		src, dst = src[qkK:], dst[q6KBytes:]
	}
}

// encodeQ8_K is ggml's quantize_row_q8_K_ref: the element of largest
// magnitude maps to -127, d is a float32, and bsums hold the sums of each
// 16 quants. Activations quantized here match what ggml's K-quant dot
// products expect.
func encodeQ8_K(src []float32, dst []byte) {
	for len(src) >= qkK && len(dst) >= q8KBytes {
		x := src[:qkK]
		b := dst[:q8KBytes]
		var amax, m float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, m = a, v
			}
		}
		qs := b[4:260]
		if amax == 0 {
			clear(b)
		} else {
			iscale := -127 / m
			for j, v := range x {
				qs[j] = byte(int8(min(127, nearest(iscale*v))))
			}
			binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
			for j := range 16 {
				var s int16
				for _, q := range qs[16*j : 16*j+16] {
					s += int16(int8(q))
				}
				binary.LittleEndian.PutUint16(b[260+2*j:], uint16(s))
			}
		}
		src, dst = src[qkK:], dst[q8KBytes:]
	}
}

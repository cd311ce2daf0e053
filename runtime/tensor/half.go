package tensor

import "math"

// FP16ToFP32 converts an IEEE 754 half-precision value (binary16 bits) to
// float32. Every half value, subnormals included, is exactly representable;
// NaN payloads are kept.
func FP16ToFP32(h uint16) float32 {
	// Normal numbers (the common case) inline: rebias the exponent by
	// 127-15 = 112 and widen the mantissa.
	// The exponent field is in [0x0400, 0x7c00) exactly when it is neither
	// 0 (zero, subnormal) nor all ones (inf, NaN).
	if h&0x7c00-0x0400 < 0x7800 {
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23))
	}
	return fp16SpecialToFP32(h)
}

// fp16SpecialToFP32 converts zeros, subnormals, infinities and NaNs.
func fp16SpecialToFP32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	mant := uint32(h & 0x3ff)
	switch {
	case h&0x7c00 == 0x7c00: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case h&0x7c00 != 0: // normal (not reached from FP16ToFP32)
		return math.Float32frombits(sign | (uint32(h&0x7fff)<<13 + 112<<23))
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// Subnormal: mant * 2^-24. Normalise so the leading one becomes implicit.
	e := uint32(127 - 14)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// FP32ToFP16 converts f to IEEE 754 half precision, rounding to nearest with
// ties to even (as ggml's GGML_FP32_TO_FP16). Values too large for half
// become ±Inf, values too small become (signed) subnormals or zero, and NaN
// stays a quiet NaN with the top payload bits kept.
func FP32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Half subnormal: value = m * 2^-24 with m = M * 2^(exp-126),
		// M the 24-bit significand (float32 subnormals are far below 2^-25).
		shift := uint(14 - e)
		if shift > 24 {
			return sign
		}
		m := mant | 0x800000
		q := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && q&1 == 1 {
			q++ // may carry into the smallest normal, which is the right encoding
		}
		return sign | uint16(q)
	}
	h := uint16(e)<<10 | uint16(mant>>13)
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // a carry into the exponent is correct, up to and including Inf
	}
	return sign | h
}

// BF16ToFP32 converts bfloat16 bits to float32 (exact: bf16 is the top half
// of a float32).
func BF16ToFP32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// FP32ToBF16 converts f to bfloat16, rounding to nearest with ties to even
// (as ggml's GGML_FP32_TO_BF16). Subnormals are kept, overflow becomes ±Inf,
// and NaN becomes a quiet NaN.
func FP32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

package allreduce

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Wire is how a tensor-parallel group's partial sums travel between its
// members.
type Wire uint8

// Wire formats. F16 halves the bytes and Q8_0 (blocks of 32 values: an
// F16 scale and 32 signed bytes, as GGUF's Q8_0) takes 34/128 of them;
// both round the partial sums, which changes the model's output a little
// (measured in the all-reduce tests). Every member rounds its own partial
// the same way before summing, so all members still hold bit-identical
// sums.
const (
	WireF32  Wire = 0
	WireF16  Wire = 1
	WireQ8_0 Wire = 2
)

// q8Block is the number of values per Q8_0 block; a block is q8Bytes.
const (
	q8Block = 32
	q8Bytes = 2 + q8Block
)

// ParseWire reads a wire format's name: f32, f16 or q8_0.
func ParseWire(s string) (Wire, error) {
	switch s {
	case "f32", "F32", "":
		return WireF32, nil
	case "f16", "F16":
		return WireF16, nil
	case "q8_0", "Q8_0", "q8":
		return WireQ8_0, nil
	}
	return 0, fmt.Errorf("wire format %q: want f32, f16 or q8_0", s)
}

func (w Wire) String() string {
	switch w {
	case WireF32:
		return "f32"
	case WireF16:
		return "f16"
	case WireQ8_0:
		return "q8_0"
	}
	return fmt.Sprintf("wire(%d)", uint8(w))
}

func (w Wire) valid() bool { return w <= WireQ8_0 }

// bytes is the payload size of n values.
func (w Wire) bytes(n int) int {
	switch w {
	case WireF16:
		return 2 * n
	case WireQ8_0:
		return (n + q8Block - 1) / q8Block * q8Bytes
	}
	return 4 * n
}

// encode appends x in format w to dst. Values must be finite, and within
// F16's range for F16 (a partial sum past ±65504 is an error, not an
// infinity that would poison every member's hidden state).
func (w Wire) encode(dst []byte, x []float32) ([]byte, error) {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return dst, fmt.Errorf("value %d is %v", i, v)
		}
	}
	switch w {
	case WireF32:
		for _, v := range x {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
		}
	case WireF16:
		for i, v := range x {
			h := f32ToF16(v)
			if h&0x7c00 == 0x7c00 {
				return dst, fmt.Errorf("value %d (%g) is outside F16's range", i, v)
			}
			dst = binary.LittleEndian.AppendUint16(dst, h)
		}
	case WireQ8_0:
		for lo := 0; lo < len(x); lo += q8Block {
			b := x[lo:min(lo+q8Block, len(x))]
			var amax float32
			for _, v := range b {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			// The scale as stored (F16) is the one used to round, so a
			// value decodes to the nearest multiple of what the receiver
			// multiplies by.
			d := f32ToF16(amax / 127)
			if d&0x7c00 == 0x7c00 {
				return dst, fmt.Errorf("block at %d (largest %g) is outside Q8_0's range", lo, amax)
			}
			dst = binary.LittleEndian.AppendUint16(dst, d)
			df := f16ToF32(d)
			for j := range q8Block {
				var q int8
				if j < len(b) && df != 0 {
					q = int8(max(-127, min(127, math.Round(float64(b[j]/df)))))
				}
				dst = append(dst, byte(q))
			}
		}
	default:
		return dst, fmt.Errorf("unknown wire format %d", w)
	}
	return dst, nil
}

// decode fills x from p, which must be w.bytes(len(x)) bytes, and reports
// a non-finite value (a peer's claim is untrusted) as an error.
func (w Wire) decode(x []float32, p []byte) error {
	if len(p) != w.bytes(len(x)) {
		return fmt.Errorf("%d payload bytes for %d values in %s", len(p), len(x), w)
	}
	switch w {
	case WireF32:
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		}
	case WireF16:
		for i := range x {
			x[i] = f16ToF32(binary.LittleEndian.Uint16(p[2*i:]))
		}
	case WireQ8_0:
		for blk := 0; blk*q8Block < len(x); blk++ {
			q := p[blk*q8Bytes:]
			d := f16ToF32(binary.LittleEndian.Uint16(q))
			lo := blk * q8Block
			for j := range min(q8Block, len(x)-lo) {
				x[lo+j] = float32(int8(q[2+j])) * d
			}
		}
	default:
		return fmt.Errorf("unknown wire format %d", w)
	}
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("value %d is %v", i, v)
		}
	}
	return nil
}

// f32ToF16 rounds f to the nearest IEEE half (ties to even); the package
// keeps its own copy so that it needs nothing from runtime (tested equal
// to runtime/tensor's over every float32 bit pattern's neighbourhood).
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	e := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if e == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // a NaN stays a NaN
		}
		return sign | 0x7c00
	}
	exp := e - 127 + 15
	if exp >= 31 {
		return sign | 0x7c00
	}
	if exp <= 0 { // a subnormal half: mant × 2^-24
		if exp < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - exp)
		h := m >> shift
		rem, mid := m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > mid || rem == mid && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // a carry into the exponent is still the right value (up to infinity)
	}
	return sign | uint16(h)
}

func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		f := float32(mant) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

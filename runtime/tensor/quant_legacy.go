package tensor

import (
	"encoding/binary"
	"math"
)

// Q8_0 block (34 bytes, 32 elements), as ggml's block_q8_0:
//
//	d  fp16      scale
//	qs [32]int8  element j = qs[j] * d
const (
	q80Block = 32
	q80Bytes = 34
)

func decodeQ8_0(src []byte, dst []float32) {
	for len(dst) >= q80Block && len(src) >= q80Bytes {
		b := src[:q80Bytes]
		y := dst[:q80Block]
		d := FP16ToFP32(binary.LittleEndian.Uint16(b))
		qs := b[2:34]
		for j := range y {
			y[j] = float32(int8(qs[j])) * d
		}
		src, dst = src[q80Bytes:], dst[q80Block:]
	}
}

// encodeQ8_0 scales each block by its largest magnitude so that it maps to
// ±127, rounding half away from zero (ggml's quantize_row_q8_0_ref).
func encodeQ8_0(src []float32, dst []byte) {
	for len(src) >= q80Block && len(dst) >= q80Bytes {
		x := src[:q80Block]
		b := dst[:q80Bytes]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		qs := b[2:34]
		for j, v := range x {
			qs[j] = byte(int8(math.Round(float64(v * id))))
		}
		src, dst = src[q80Block:], dst[q80Bytes:]
	}
}

// Q4_0 block (18 bytes, 32 elements), as ggml's block_q4_0:
//
//	d  fp16      scale
//	qs [16]byte  element j in the low nibble of qs[j], element j+16 in the
//	             high nibble; value (q - 8) * d
const (
	q40Block = 32
	q40Bytes = 18
)

func decodeQ4_0(src []byte, dst []float32) {
	for len(dst) >= q40Block && len(src) >= q40Bytes {
		b := src[:q40Bytes]
		y := dst[:q40Block]
		d := FP16ToFP32(binary.LittleEndian.Uint16(b))
		qs := b[2:18]
		for j, q := range qs {
			y[j] = float32(int(q&0xf)-8) * d
			y[j+16] = float32(int(q>>4)-8) * d
		}
		src, dst = src[q40Bytes:], dst[q40Block:]
	}
}

// encodeQ4_0 maps the block's element of largest magnitude to -8 (so the
// other sign gets the 7 remaining levels and the extreme one is exact), as
// ggml's quantize_row_q4_0_ref.
func encodeQ4_0(src []float32, dst []byte) {
	for len(src) >= q40Block && len(dst) >= q40Bytes {
		x := src[:q40Block]
		b := dst[:q40Bytes]
		var amax, m float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, m = a, v
			}
		}
		d := m / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		qs := b[2:18]
		for j := range qs {
			// x*id lies in [-8, 8], so x*id+8.5 >= 0.5 and the conversion floors.
			lo := min(15, int(x[j]*id+8.5))
			hi := min(15, int(x[j+16]*id+8.5))
			qs[j] = byte(lo) | byte(hi)<<4
		}
		src, dst = src[q40Block:], dst[q40Bytes:]
	}
}

func abs32(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}

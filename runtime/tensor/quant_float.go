package tensor

import (
	"encoding/binary"
	"math"
)

// Plain float types: little-endian elements, block size 1.

func decodeF32(src []byte, dst []float32) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func encodeF32(src []float32, dst []byte) {
	dst = dst[:4*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func decodeF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		h := binary.LittleEndian.Uint16(src[2*i:])
		if h&0x7c00-0x0400 < 0x7800 { // normal: FP16ToFP32's fast path, inlined by hand
			dst[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23))
		} else {
			dst[i] = fp16SpecialToFP32(h)
		}
	}
}

func encodeF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FP32ToFP16(v))
	}
}

func decodeBF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = BF16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func encodeBF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FP32ToBF16(v))
	}
}

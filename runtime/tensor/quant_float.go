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
		dst[i] = FP16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
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

package tensor

import (
	"errors"
	"fmt"
)

// ErrUnsupported is returned (wrapped) for a type this package cannot
// compute with or convert.
var ErrUnsupported = errors.New("tensor: unsupported type")

// ErrSize is returned (wrapped) when a length is not a whole number of
// blocks or source and destination sizes disagree.
var ErrSize = errors.New("tensor: size mismatch")

// Supported reports whether t is a weight type the kernels compute with:
// F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS.
// Q8_K is not listed: it
// exists for activations, though Quantize, Dequantize and DotRow accept it.
func Supported(t Type) bool {
	switch t {
	case F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS:
		return true
	}
	return false
}

// layout is the block size and block bytes of the types the kernels can
// decode (Supported plus Q8_K); ok is false for any other type. It is a
// switch, not the typeInfo map, because kernels call it per row.
func layout(t Type) (blockSize, blockBytes int, ok bool) {
	switch t {
	case F32:
		return 1, 4, true
	case F16, BF16:
		return 1, 2, true
	case Q8_0:
		return 32, 34, true
	case Q4_0:
		return 32, 18, true
	case Q2_K:
		return 256, q2KBytes, true
	case Q3_K:
		return 256, q3KBytes, true
	case Q4_K:
		return 256, 144, true
	case Q5_K:
		return 256, 176, true
	case Q6_K:
		return 256, 210, true
	case IQ4_XS:
		return 256, iq4XSBytes, true
	case Q8_K:
		return 256, 292, true
	}
	return 0, 0, false
}

// checkSizes validates that n elements of t are whole blocks and occupy
// exactly nbytes bytes.
func checkSizes(t Type, n, nbytes int) error {
	bs, bb, ok := layout(t)
	if !ok {
		return fmt.Errorf("%w: %v", ErrUnsupported, t)
	}
	if n%bs != 0 {
		return fmt.Errorf("%w: %d elements is not a whole number of %v blocks of %d", ErrSize, n, t, bs)
	}
	if want := n / bs * bb; nbytes != want {
		return fmt.Errorf("%w: %d %v elements need %d bytes, have %d", ErrSize, n, t, want, nbytes)
	}
	return nil
}

// Dequantize decodes len(dst) elements of type t from src into dst.
// len(dst) must be a whole number of blocks and src exactly their size.
func Dequantize(t Type, src []byte, dst []float32) error {
	if err := checkSizes(t, len(dst), len(src)); err != nil {
		return err
	}
	decode(t, src, dst)
	return nil
}

// Quantize encodes src as type t (any Supported type, or Q8_K) into a new
// slice. len(src) must be a whole number of blocks.
func Quantize(t Type, src []float32) ([]byte, error) {
	bs, bb, ok := layout(t)
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, t)
	}
	if len(src)%bs != 0 {
		return nil, fmt.Errorf("%w: %d elements is not a whole number of %v blocks of %d", ErrSize, len(src), t, bs)
	}
	dst := make([]byte, len(src)/bs*bb)
	encode(t, src, dst)
	return dst, nil
}

// QuantizeInto encodes src as type t into dst without allocating.
// len(src) must be a whole number of blocks and dst exactly their size.
func QuantizeInto(t Type, src []float32, dst []byte) error {
	if err := checkSizes(t, len(src), len(dst)); err != nil {
		return err
	}
	encode(t, src, dst)
	return nil
}

// decode dequantizes whole blocks; sizes are already checked. It is a
// switch of direct calls so that callers' stack buffers do not escape.
func decode(t Type, src []byte, dst []float32) {
	switch t {
	case F32:
		decodeF32(src, dst)
	case F16:
		decodeF16(src, dst)
	case BF16:
		decodeBF16(src, dst)
	case Q8_0:
		decodeQ8_0(src, dst)
	case Q4_0:
		decodeQ4_0(src, dst)
	case Q2_K:
		decodeQ2_K(src, dst)
	case Q3_K:
		decodeQ3_K(src, dst)
	case IQ4_XS:
		decodeIQ4_XS(src, dst)
	case Q4_K:
		decodeQ4_K(src, dst)
	case Q5_K:
		decodeQ5_K(src, dst)
	case Q6_K:
		decodeQ6_K(src, dst)
	case Q8_K:
		decodeQ8_K(src, dst)
	default:
		panic("tensor: decode of unsupported type " + t.String())
	}
}

// encode quantizes whole blocks; sizes are already checked.
func encode(t Type, src []float32, dst []byte) {
	switch t {
	case F32:
		encodeF32(src, dst)
	case F16:
		encodeF16(src, dst)
	case BF16:
		encodeBF16(src, dst)
	case Q8_0:
		encodeQ8_0(src, dst)
	case Q4_0:
		encodeQ4_0(src, dst)
	case Q2_K:
		encodeQ2_K(src, dst)
	case Q3_K:
		encodeQ3_K(src, dst)
	case IQ4_XS:
		encodeIQ4_XS(src, dst)
	case Q4_K:
		encodeQ4_K(src, dst)
	case Q5_K:
		encodeQ5_K(src, dst)
	case Q6_K:
		encodeQ6_K(src, dst)
	case Q8_K:
		encodeQ8_K(src, dst)
	default:
		panic("tensor: encode of unsupported type " + t.String())
	}
}

//go:build !purego

package tensor

import "unsafe"

// The NEON kernels of dot_low_arm64.s take raw pointers and super-block
// counts; the Go wrappers below have checked the lengths. Each computes
// exactly what the generic function of the same name computes (dot_low.go).
// They are the one-vector (decode) dots; dot4 has no kernel for these
// types here, so small batches loop over them.

// dotQ2_KNEON is dotQ2_KGeneric over nb > 0 super-blocks.
//
//go:noescape
func dotQ2_KNEON(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ3_KNEON is dotQ3_KGeneric over nb > 0 super-blocks.
//
//go:noescape
func dotQ3_KNEON(w *byte, x *int8, d *float32, nb int) float32

// dotIQ4_XSNEON is dotIQ4_XSGeneric over nb > 0 super-blocks; tab is
// iq4nlValues.
//
//go:noescape
func dotIQ4_XSNEON(w *byte, x *int8, d *float32, tab *int8, nb int) float32

func dotQ2_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	if !useNEON || len(d) == 0 {
		return dotQ2_KGeneric(w, x, d, bsums)
	}
	nb := len(d)
	_, _, _ = w[nb*q2KBytes-1], x[nb*qkK-1], bsums[nb*16-1]
	return dotQ2_KNEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
}

func dotQ3_K(w []byte, x []int8, d []float32) float32 {
	if !useNEON || len(d) == 0 {
		return dotQ3_KGeneric(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*q3KBytes-1], x[nb*qkK-1]
	return dotQ3_KNEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
}

func dotIQ4_XS(w []byte, x []int8, d []float32) float32 {
	if !useNEON || len(d) == 0 {
		return dotIQ4_XSGeneric(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*iq4XSBytes-1], x[nb*qkK-1]
	return dotIQ4_XSNEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), &iq4nlValues[0], nb)
}

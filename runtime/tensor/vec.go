package tensor

import "fmt"

// Dot returns the dot product of a and b (equal lengths). Every
// implementation sums in the same order with the same fused multiply-adds
// (see dotVecGeneric), so the result is bit-identical across them: the
// attention scores feed the activation quantizer, where a last-bit
// difference can move a value across a rounding step.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("tensor: Dot: len(a)=%d len(b)=%d", len(a), len(b)))
	}
	return dotVec(a, b)
}

// Axpy sets dst[i] = fma(alpha, x[i], dst[i]) (equal lengths), rounded
// once, the same in every implementation.
func Axpy(dst []float32, alpha float32, x []float32) {
	if len(dst) != len(x) {
		panic(fmt.Sprintf("tensor: Axpy: len(dst)=%d len(x)=%d", len(dst), len(x)))
	}
	axpy(dst, alpha, x)
}

// dotVecGeneric is the reference for dotF32AVX2, in its order: four
// 8-lane FMA accumulators over each 32 elements, folded lane-wise as
// (acc0+acc2)+(acc1+acc3); then 8 elements at a time into that; hsum8;
// then the last elements one FMA at a time.
func dotVecGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var acc [4][8]float32
	i := 0
	for ; i+32 <= len(a); i += 32 {
		for k := range 4 {
			for l := range 8 {
				acc[k][l] = fma32(a[i+8*k+l], b[i+8*k+l], acc[k][l])
			}
		}
	}
	for l := range 8 {
		acc[0][l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
	}
	for ; i+8 <= len(a); i += 8 {
		for l := range 8 {
			acc[0][l] = fma32(a[i+l], b[i+l], acc[0][l])
		}
	}
	s := hsum8(&acc[0])
	for ; i < len(a); i++ {
		s = fma32(a[i], b[i], s)
	}
	return s
}

func axpyGeneric(dst []float32, alpha float32, x []float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = fma32(alpha, v, dst[i])
	}
}

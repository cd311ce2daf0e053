package tensor

import "fmt"

// Dot returns the dot product of a and b (equal lengths), with the
// assembly kernel where there is one (a different summation order from
// dotF32, so results agree within float rounding, not bit for bit).
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("tensor: Dot: len(a)=%d len(b)=%d", len(a), len(b)))
	}
	return dotVec(a, b)
}

// Axpy sets dst[i] += alpha * x[i] (equal lengths), with FMA where the
// assembly kernels run (so the rounding may differ from dst[i] += alpha*x[i]).
func Axpy(dst []float32, alpha float32, x []float32) {
	if len(dst) != len(x) {
		panic(fmt.Sprintf("tensor: Axpy: len(dst)=%d len(x)=%d", len(dst), len(x)))
	}
	axpy(dst, alpha, x)
}

func dotVecGeneric(a, b []float32) float32 { return dotF32(a, b) }

func axpyGeneric(dst []float32, alpha float32, x []float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] += alpha * v
	}
}

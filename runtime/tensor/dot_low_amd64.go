//go:build !purego

package tensor

func dotQ2_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	return dotQ2_KGeneric(w, x, d, bsums)
}
func dotQ3_K(w []byte, x []int8, d []float32) float32   { return dotQ3_KGeneric(w, x, d) }
func dotIQ4_XS(w []byte, x []int8, d []float32) float32 { return dotIQ4_XSGeneric(w, x, d) }

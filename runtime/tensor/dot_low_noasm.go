//go:build purego || !(amd64 || arm64)

package tensor

// Without amd64 or arm64 assembly (the purego tag, or another architecture)
// the Q2_K, Q3_K and IQ4_XS dots are the generic ones.

func dotQ2_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	return dotQ2_KGeneric(w, x, d, bsums)
}
func dotQ3_K(w []byte, x []int8, d []float32) float32   { return dotQ3_KGeneric(w, x, d) }
func dotIQ4_XS(w []byte, x []int8, d []float32) float32 { return dotIQ4_XSGeneric(w, x, d) }

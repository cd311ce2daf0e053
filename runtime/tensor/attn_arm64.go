//go:build !purego

package tensor

// On arm64 the attention's float kernels loop over the NEON one-row dot
// and Axpy (dotVec, axpy: bit-identical to the generic ones); the
// conversions and the softmax are Go.

func dotRowsF32(out, q, rows []float32, stride int) {
	for r := range out {
		out[r] = dotVec(q, rows[r*stride:r*stride+len(q)])
	}
}

func axpyRows(dst, alpha, rows []float32, stride int) {
	for r, a := range alpha {
		axpy(dst, a, rows[r*stride:r*stride+len(dst)])
	}
}

func decodeF16Vec(dst []float32, src []uint16)    { decodeF16Generic(dst, src) }
func encodeF16Vec(dst []uint16, src []float32)    { encodeF16Generic(dst, src) }
func scaleMax(x []float32, scale float32) float32 { return scaleMaxGeneric(x, scale) }
func expSub(x []float32, mx float32) float32      { return expSubGeneric(x, mx) }
func scaleVec(x []float32, s float32)             { scaleGeneric(x, s) }

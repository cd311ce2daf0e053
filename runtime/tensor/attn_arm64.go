//go:build !purego

package tensor

import "unsafe"

// On arm64 the attention's float kernels loop over the NEON one-row dot
// and Axpy (dotVec, axpy: bit-identical to the generic ones), the f16
// conversions are NEON (attn_arm64.s), and the softmax is Go.

// decodeF16NEON is decodeF16Generic over n (a positive multiple of 8)
// elements.
//
//go:noescape
func decodeF16NEON(dst *float32, src *uint16, n int)

// encodeF16NEON is encodeF16Generic over n (a positive multiple of 8)
// elements.
//
//go:noescape
func encodeF16NEON(dst *uint16, src *float32, n int)

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

// decodeQ8_0Vec is Go on arm64 (no NEON form yet).
func decodeQ8_0Vec(dst []float32, src []byte) { decodeQ8_0(src, dst) }

func decodeF16Vec(dst []float32, src []uint16) {
	n := len(dst) &^ 7
	if !useNEON || n == 0 {
		decodeF16Generic(dst, src)
		return
	}
	decodeF16NEON(unsafe.SliceData(dst), unsafe.SliceData(src), n)
	decodeF16Generic(dst[n:], src[n:])
}

func encodeF16Vec(dst []uint16, src []float32) {
	n := len(dst) &^ 7
	if !useNEON || n == 0 {
		encodeF16Generic(dst, src)
		return
	}
	encodeF16NEON(unsafe.SliceData(dst), unsafe.SliceData(src), n)
	encodeF16Generic(dst[n:], src[n:])
}

func scaleMax(x []float32, scale float32) float32 { return scaleMaxGeneric(x, scale) }
func expSub(x []float32, mx float32) float32      { return expSubGeneric(x, mx) }
func scaleVec(x []float32, s float32)             { scaleGeneric(x, s) }

func axpyRowsPair(dst0, dst1, alpha0, alpha1, rows []float32, stride int) {
	axpyRows(dst0, alpha0, rows, stride)
	axpyRows(dst1, alpha1, rows, stride)
}

func axpyRowsPairs(dst0, dst1, alpha0, alpha1 [][]float32, rows []float32, stride int) {
	axpyRowsPairsGeneric(dst0, dst1, alpha0, alpha1, rows, stride)
}

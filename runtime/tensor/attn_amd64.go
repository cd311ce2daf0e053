//go:build !purego

package tensor

import "unsafe"

// The attention kernels of attn_amd64.s; the wrappers below have checked
// the lengths. Each computes exactly what its generic namesake computes.

// dotRowsAVX2 is dotRowsGeneric over nrows > 0 rows of n floats, stride
// bytes apart.
//
//go:noescape
func dotRowsAVX2(out, q, rows *float32, n, nrows, stride int)

// dotRowsAVX512 is dotRowsAVX2 in 64-byte registers.
//
//go:noescape
func dotRowsAVX512(out, q, rows *float32, n, nrows, stride int)

// axpyRowsAVX2 is axpyRowsGeneric over nrows > 0 rows of n floats, stride
// bytes apart.
//
//go:noescape
func axpyRowsAVX2(dst, alpha, rows *float32, n, nrows, stride int)

// axpyRowsAVX512 is axpyRowsAVX2 in 64-byte registers.
//
//go:noescape
func axpyRowsAVX512(dst, alpha, rows *float32, n, nrows, stride int)

// decodeF16AVX2 is decodeF16Generic over n (a positive multiple of 8)
// elements.
//
//go:noescape
func decodeF16AVX2(dst *float32, src *uint16, n int)

// encodeF16AVX2 is encodeF16Generic over n (a positive multiple of 8)
// elements.
//
//go:noescape
func encodeF16AVX2(dst *uint16, src *float32, n int)

// scaleMaxAVX2 is scaleMaxGeneric over n (a positive multiple of 8)
// elements.
//
//go:noescape
func scaleMaxAVX2(x *float32, scale float32, n int) float32

// expSubAVX2 is expSubGeneric over n (a positive multiple of 8) elements.
//
//go:noescape
func expSubAVX2(x *float32, mx float32, n int) float32

// scaleAVX2 is scaleGeneric over n (a positive multiple of 8) elements.
//
//go:noescape
func scaleAVX2(x *float32, s float32, n int)

func dotRowsF32(out, q, rows []float32, stride int) {
	if !useAVX2 || len(q) == 0 {
		dotRowsGeneric(out, q, rows, stride)
		return
	}
	f := dotRowsAVX2
	if useAVX512 {
		f = dotRowsAVX512
	}
	f(unsafe.SliceData(out), unsafe.SliceData(q), unsafe.SliceData(rows), len(q), len(out), 4*stride)
}

func axpyRows(dst, alpha, rows []float32, stride int) {
	if !useAVX2 || len(dst) == 0 {
		axpyRowsGeneric(dst, alpha, rows, stride)
		return
	}
	f := axpyRowsAVX2
	if useAVX512 {
		f = axpyRowsAVX512
	}
	f(unsafe.SliceData(dst), unsafe.SliceData(alpha), unsafe.SliceData(rows), len(dst), len(alpha), 4*stride)
}

func decodeF16Vec(dst []float32, src []uint16) {
	n := len(dst) &^ 7
	if !useAVX2 || n == 0 {
		decodeF16Generic(dst, src)
		return
	}
	decodeF16AVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n)
	decodeF16Generic(dst[n:], src[n:])
}

// decodeQ8_0AVX2 is decodeQ8_0 over nb (> 0) whole blocks
// (attn_q8_amd64.s): the q8_0 KV cache's keys and values into float32
// scratch.
//
//go:noescape
func decodeQ8_0AVX2(dst *float32, src *byte, nb int)

func decodeQ8_0Vec(dst []float32, src []byte) {
	nb := len(dst) / q80Block
	if !useAVX2 || nb == 0 {
		decodeQ8_0(src, dst)
		return
	}
	_, _ = dst[nb*q80Block-1], src[nb*q80Bytes-1]
	decodeQ8_0AVX2(unsafe.SliceData(dst), unsafe.SliceData(src), nb)
}

func encodeF16Vec(dst []uint16, src []float32) {
	n := len(dst) &^ 7
	if !useAVX2 || n == 0 {
		encodeF16Generic(dst, src)
		return
	}
	encodeF16AVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n)
	encodeF16Generic(dst[n:], src[n:])
}

func scaleMax(x []float32, scale float32) float32 {
	n := len(x) &^ 7
	if !useAVX2 || n == 0 {
		return scaleMaxGeneric(x, scale)
	}
	mx := scaleMaxAVX2(unsafe.SliceData(x), scale, n)
	return scaleMaxTail(x[n:], scale, mx)
}

func expSub(x []float32, mx float32) float32 {
	n := len(x) &^ 7
	if !useAVX2 || n == 0 {
		return expSubGeneric(x, mx)
	}
	sum := expSubAVX2(unsafe.SliceData(x), mx, n)
	return expSubTail(x[n:], mx, sum)
}

func scaleVec(x []float32, s float32) {
	n := len(x) &^ 7
	if !useAVX2 || n == 0 {
		scaleGeneric(x, s)
		return
	}
	scaleAVX2(unsafe.SliceData(x), s, n)
	scaleGeneric(x[n:], s)
}

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

// dotRows8AVX512 is dotRowsAVX512 over groups > 0 groups of 16 rows of 8
// floats at stride 8.
//
//go:noescape
func dotRows8AVX512(out, q, rows *float32, groups int)

// axpyRowsAVX2 is axpyRowsGeneric over nrows > 0 rows of n floats, stride
// bytes apart.
//
//go:noescape
func axpyRowsAVX2(dst, alpha, rows *float32, n, nrows, stride int)

// axpyRowsAVX512 is axpyRowsAVX2 in 64-byte registers.
//
//go:noescape
func axpyRowsAVX512(dst, alpha, rows *float32, n, nrows, stride int)

// axpyRows8x2AVX512 is axpyRowsAVX512 for two destinations of 8 floats
// with weights alpha0 and alpha1 over the same nrows > 0 rows, stride
// bytes apart (dst0 in the low half of a register, dst1 in the high).
//
//go:noescape
func axpyRows8x2AVX512(dst0, dst1, alpha0, alpha1, rows *float32, nrows, stride int)

// axpyRows8x4AVX512 is axpyRows8x2AVX512 for four pairs: p holds the
// eight destinations of 8 floats (pair t's at 2t, 2t+1), then their
// weights in the same order, each of nrows > 0.
//
//go:noescape
func axpyRows8x4AVX512(p *[16]*float32, rows *float32, nrows, stride int)

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

// expSubAVX512 is expSubAVX2 (every bit) with its constants in
// registers, over n (a positive multiple of 8) elements.
//
//go:noescape
func expSubAVX512(x *float32, mx float32, n int) float32

// scaleAVX2 is scaleGeneric over n (a positive multiple of 8) elements.
//
//go:noescape
func scaleAVX2(x *float32, s float32, n int)

func dotRowsF32(out, q, rows []float32, stride int) {
	if !useAVX2 || len(q) == 0 {
		dotRowsGeneric(out, q, rows, stride)
		return
	}
	if useAVX512 && len(q) == 8 && stride == 8 && len(out) >= 16 {
		// A head of 8: 16 rows at a time, the rest below.
		g := len(out) / 16
		dotRows8AVX512(unsafe.SliceData(out), unsafe.SliceData(q), unsafe.SliceData(rows), g)
		out, rows = out[16*g:], rows[128*g:]
		if len(out) == 0 {
			return
		}
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

func axpyRowsPair(dst0, dst1, alpha0, alpha1, rows []float32, stride int) {
	if useAVX512 && len(dst0) == 8 {
		axpyRows8x2AVX512(unsafe.SliceData(dst0), unsafe.SliceData(dst1), unsafe.SliceData(alpha0), unsafe.SliceData(alpha1),
			unsafe.SliceData(rows), len(alpha0), 4*stride)
		return
	}
	axpyRows(dst0, alpha0, rows, stride)
	axpyRows(dst1, alpha1, rows, stride)
}

func axpyRowsPairs(dst0, dst1, alpha0, alpha1 [][]float32, rows []float32, stride int) {
	if !useAVX512 || len(dst0[0]) != 8 || len(dst0) == 1 {
		axpyRowsPairsGeneric(dst0, dst1, alpha0, alpha1, rows, stride)
		return
	}
	// Fewer than four pairs: the missing ones write to spare and read
	// pair 0's weights.
	var p [16]*float32
	var spare [8]float32
	for t := range 4 {
		if t < len(dst0) {
			p[2*t], p[2*t+1], p[8+2*t], p[9+2*t] = &dst0[t][0], &dst1[t][0], &alpha0[t][0], &alpha1[t][0]
		} else {
			p[2*t], p[2*t+1], p[8+2*t], p[9+2*t] = &spare[0], &spare[0], &alpha0[0][0], &alpha0[0][0]
		}
	}
	axpyRows8x4AVX512(&p, unsafe.SliceData(rows), len(alpha0[0]), 4*stride)
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
	if !useAVX2 {
		return expSubGeneric(x, mx)
	}
	n := len(x) &^ 7
	var sum float32 // the generic's sum of no groups: hsum8 of zeros
	if n > 0 {
		sum = expSubKernel(unsafe.SliceData(x), mx, n)
	}
	if tail := x[n:]; len(tail) > 0 {
		// The last few exponentials eight at a time too (the kernel's
		// lanes are expf32's steps; the padding's are thrown away), added
		// one by one as expSubTail adds them. One at a time in Go they
		// cost a tiny model's attention a tenth of its time.
		var pad [8]float32
		copy(pad[:], tail)
		expSubKernel(&pad[0], mx, 8)
		for i := range tail {
			tail[i] = pad[i]
			sum += pad[i]
		}
	}
	return sum
}

// expSubKernel is expSubAVX512 or expSubAVX2 (called directly, not
// through a func value, so that x does not escape).
func expSubKernel(x *float32, mx float32, n int) float32 {
	if useAVX512 {
		return expSubAVX512(x, mx, n)
	}
	return expSubAVX2(x, mx, n)
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

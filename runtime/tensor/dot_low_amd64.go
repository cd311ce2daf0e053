//go:build !purego

package tensor

import "unsafe"

// The AVX2 kernels of dot_low_amd64.s take raw pointers and super-block
// counts; the Go wrappers below have checked the lengths. Each computes
// exactly what the generic function of the same name computes (dot_low.go).

// dotQ2_KAVX2 is dotQ2_KGeneric over nb > 0 super-blocks.
//
//go:noescape
func dotQ2_KAVX2(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ3_KAVX2 is dotQ3_KGeneric over nb > 0 super-blocks.
//
//go:noescape
func dotQ3_KAVX2(w *byte, x *int8, d *float32, nb int) float32

// dotIQ4_XSAVX2 is dotIQ4_XSGeneric over nb > 0 super-blocks.
//
//go:noescape
func dotIQ4_XSAVX2(w *byte, x *int8, d *float32, nb int) float32

// dotQ2_Kx4AVX2 sets out[t] = dotQ2_KAVX2 of the row with vector t (quants
// x + t*xs, scales d + t*ds, 16-sums bsums + t*bs; byte strides) for
// t = 0..3, unpacking each super-block once.
//
//go:noescape
func dotQ2_Kx4AVX2(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

// dotQ3_Kx4AVX2 sets out[t] = dotQ3_KAVX2 of the row with vector t (quants
// x + t*xs, scales d + t*ds; byte strides) for t = 0..3.
//
//go:noescape
func dotQ3_Kx4AVX2(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

// dotIQ4_XSx4AVX2 sets out[t] = dotIQ4_XSAVX2 of the row with vector t
// (quants x + t*xs, scales d + t*ds; byte strides) for t = 0..3.
//
//go:noescape
func dotIQ4_XSx4AVX2(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

// The VNNI forms of the six kernels above (dot_low_vnni_amd64.h, the
// same arguments), each assembled twice: *VNNI with the VEX VPDPWSSD
// (AVX-VNNI), *AVX512 with the EVEX one (AVX-512 VNNI).

//go:noescape
func dotQ2_KVNNI(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ2_KAVX512(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ3_KVNNI(w *byte, x *int8, d *float32, nb int) float32

//go:noescape
func dotQ3_KAVX512(w *byte, x *int8, d *float32, nb int) float32

//go:noescape
func dotIQ4_XSVNNI(w *byte, x *int8, d *float32, nb int) float32

//go:noescape
func dotIQ4_XSAVX512(w *byte, x *int8, d *float32, nb int) float32

//go:noescape
func dotQ2_Kx4VNNI(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

//go:noescape
func dotQ2_Kx4AVX512(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

//go:noescape
func dotQ3_Kx4VNNI(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

//go:noescape
func dotQ3_Kx4AVX512(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

//go:noescape
func dotIQ4_XSx4VNNI(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

//go:noescape
func dotIQ4_XSx4AVX512(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

func dotQ2_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	if !useAVX2 || len(d) == 0 {
		return dotQ2_KGeneric(w, x, d, bsums)
	}
	nb := len(d)
	_, _, _ = w[nb*q2KBytes-1], x[nb*qkK-1], bsums[nb*16-1]
	switch {
	case useAVX512:
		return dotQ2_KAVX512(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
	case useAVXVNNI:
		return dotQ2_KVNNI(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
	}
	return dotQ2_KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
}

func dotQ3_K(w []byte, x []int8, d []float32) float32 {
	if !useAVX2 || len(d) == 0 {
		return dotQ3_KGeneric(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*q3KBytes-1], x[nb*qkK-1]
	switch {
	case useAVX512:
		return dotQ3_KAVX512(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
	case useAVXVNNI:
		return dotQ3_KVNNI(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
	}
	return dotQ3_KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
}

func dotIQ4_XS(w []byte, x []int8, d []float32) float32 {
	if !useAVX2 || len(d) == 0 {
		return dotIQ4_XSGeneric(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*iq4XSBytes-1], x[nb*qkK-1]
	switch {
	case useAVX512:
		return dotIQ4_XSAVX512(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
	case useAVXVNNI:
		return dotIQ4_XSVNNI(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
	}
	return dotIQ4_XSAVX2(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
}

// dot4Low is dot4 for Q2_K, Q3_K and IQ4_XS (useAVX2, cols > 0 and i%4 == 0
// already checked by dot4); it reports whether t is one of them.
func dot4Low(t Type, row []byte, a *Activations, i, cols int, out *[4]float32) bool {
	nk := cols / qkK
	switch t {
	case Q2_K:
		_, _, _, _ = row[nk*q2KBytes-1], a.qK[(i+4)*cols-1], a.dK[(i+4)*nk-1], a.bsumsK[(i+4)*cols/16-1]
		switch {
		case useAVX512:
			dotQ2_Kx4AVX512(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
		case useAVXVNNI:
			dotQ2_Kx4VNNI(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
		default:
			dotQ2_Kx4AVX2(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
		}
	case Q3_K:
		_, _, _ = row[nk*q3KBytes-1], a.qK[(i+4)*cols-1], a.dK[(i+4)*nk-1]
		switch {
		case useAVX512:
			dotQ3_Kx4AVX512(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		case useAVXVNNI:
			dotQ3_Kx4VNNI(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		default:
			dotQ3_Kx4AVX2(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		}
	case IQ4_XS:
		_, _, _ = row[nk*iq4XSBytes-1], a.qK[(i+4)*cols-1], a.dK[(i+4)*nk-1]
		switch {
		case useAVX512:
			dotIQ4_XSx4AVX512(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		case useAVXVNNI:
			dotIQ4_XSx4VNNI(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		default:
			dotIQ4_XSx4AVX2(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		}
	default:
		return false
	}
	return true
}

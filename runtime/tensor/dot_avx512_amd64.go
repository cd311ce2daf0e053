//go:build !purego

package tensor

// The AVX-512 kernels of dot_avx512_amd64.s (F, BW, VL and VNNI; chosen
// when useAVX512) take raw pointers and block counts like the AVX2 ones;
// the Go wrappers in dot_amd64.go have checked the lengths. Each computes
// exactly what the generic function of the same name computes.

// dotQ4_KAVX512 is dotQ4_KGeneric over nb > 0 super-blocks.
//
//go:noescape
func dotQ4_KAVX512(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ4_KRowsAVX512 is dotQ4_KAVX512 of rows rows, rs bytes apart from
// w, with one vector: out[r] for row r, the same bits, no call a row.
//
//go:noescape
func dotQ4_KRowsAVX512(w *byte, x *int8, d *float32, bsums *int16, nb, rows, rs int, out *float32)

// dotQ4_Kx4AVX512 is dotQ4_Kx4AVX2 with the AVX-512 kernel.
//
//go:noescape
func dotQ4_Kx4AVX512(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

// dotQ5_KAVX512 is dotQ5_KGeneric over nb > 0 super-blocks.
//
//go:noescape
func dotQ5_KAVX512(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ5_Kx4AVX512 is dotQ4_Kx4AVX512 for Q5_K rows (no AVX2 twin).
//
//go:noescape
func dotQ5_Kx4AVX512(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

// dotQ4_KVNNI is dotQ4_KAVX2 with AVX-VNNI (dot_amd64.s).
//
//go:noescape
func dotQ4_KVNNI(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ4_KRowsVNNI is dotQ4_KRowsAVX2 with AVX-VNNI (dot_amd64.s).
//
//go:noescape
func dotQ4_KRowsVNNI(w *byte, x *int8, d *float32, bsums *int16, nb, rows, rs int, out *float32)

// dotQ4_Kx4VNNI is dotQ4_Kx4AVX2 with AVX-VNNI (dot_amd64.s).
//
//go:noescape
func dotQ4_Kx4VNNI(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

// dotQ5_KVNNI is dotQ5_KAVX2 with AVX-VNNI (dot_amd64.s).
//
//go:noescape
func dotQ5_KVNNI(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ5_Kx4VNNI is dotQ4_Kx4VNNI for Q5_K rows (dot_amd64.s).
//
//go:noescape
func dotQ5_Kx4VNNI(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

// The VNNI one-vector kernels of dot_vnni_amd64.h, each assembled twice:
// *VNNI with the VEX instructions (AVX-VNNI), *AVX512 with the EVEX ones
// (AVX-512 VNNI). Each is its AVX2 namesake (same arguments) with the
// integer products on VPDPBUSD or VPDPWSSD.

//go:noescape
func dotQ8_0VNNI(w *byte, x *int8, d *float32, nb int) float32

//go:noescape
func dotQ8_0AVX512(w *byte, x *int8, d *float32, nb int) float32

//go:noescape
func dotQ8_0RowsVNNI(w *byte, x *int8, d *float32, nb, rows, rs int, out *float32)

//go:noescape
func dotQ8_0RowsAVX512(w *byte, x *int8, d *float32, nb, rows, rs int, out *float32)

//go:noescape
func dotQ4_0VNNI(w *byte, x *int8, d, s8 *float32, nb int) float32

//go:noescape
func dotQ4_0AVX512(w *byte, x *int8, d, s8 *float32, nb int) float32

//go:noescape
func dotQ4_0RowsVNNI(w *byte, x *int8, d, s8 *float32, nb, rows, rs int, out *float32)

//go:noescape
func dotQ4_0RowsAVX512(w *byte, x *int8, d, s8 *float32, nb, rows, rs int, out *float32)

//go:noescape
func dotQ6_KVNNI(w *byte, x *int8, d *float32, nb int) float32

//go:noescape
func dotQ6_KAVX512(w *byte, x *int8, d *float32, nb int) float32

//go:noescape
func dotQ8_0x4VNNI(w *byte, x *int8, d4 *float32, nb, xs int, out *float32)

//go:noescape
func dotQ8_0x4AVX512(w *byte, x *int8, d4 *float32, nb, xs int, out *float32)

// dotQ8_0x4Z is dotQ8_0x4AVX512 in 64-byte registers (dot_amd64.s).
//
//go:noescape
func dotQ8_0x4Z(w *byte, x *int8, d4 *float32, nb, xs int, out *float32)

// dotQ8_0x8Z is dotQ8_0x4Z for eight vectors in one pass (dot_amd64.s).
//
//go:noescape
func dotQ8_0x8Z(w *byte, x *int8, d4 *float32, nb, xs, ds int, out *float32)

//go:noescape
func dotQ6_Kx4VNNI(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

//go:noescape
func dotQ6_Kx4AVX512(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

//go:build !purego

package tensor

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2+FMA kernels (F16C converts the fp16 scales). It
// is read once from the CPU; tests flip it to run the generic kernels too.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// useAVX512 selects the AVX-512 kernels (F, BW, VL and VNNI: 64-byte
// registers, 32 of them, and the VPDPBUSD/VPDPWSSD dot products) where
// there is one; the other kernels stay AVX2, so it implies useAVX2.
var useAVX512 = useAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

// useAVXVNNI selects the AVX-VNNI kernels (the VEX-encoded VPDPBUSD of
// CPUs without AVX-512, Intel's client cores among them): the Q8_0 and
// Q4_0 batch kernels and the one-vector, multi-row and four-vector dots
// (see Kernels); AVX2 for the rest. Where AVX-512 is there too it wins,
// and useAVXVNNI is false.
var useAVXVNNI = useAVX2 && !useAVX512 && cpu.X86.HasAVXVNNI

// implementations lists the kernel sets this CPU can run; use(false)
// restores what the CPU selects.
var implementations = func() []impl {
	set := func(avx2, vnni, avx512 bool) { useAVX2, useAVXVNNI, useAVX512 = avx2, vnni, avx512 }
	restore := func() { set(hasAVX2, hasAVXVNNI, hasAVX512) }
	list := []impl{{"generic", func(on bool) {
		if set(false, false, false); !on {
			restore()
		}
	}}}
	if hasAVX2 {
		list = append(list, impl{"avx2", func(on bool) {
			if set(true, false, false); !on {
				restore()
			}
		}})
	}
	if hasAVX2 && cpu.X86.HasAVXVNNI {
		list = append(list, impl{"avxvnni", func(on bool) {
			if set(true, true, false); !on {
				restore()
			}
		}})
	}
	if hasAVX512 {
		list = append(list, impl{"avx512", func(on bool) {
			if set(true, false, true); !on {
				restore()
			}
		}})
	}
	return list
}()

var hasAVX2, hasAVXVNNI, hasAVX512 = useAVX2, useAVXVNNI, useAVX512

// The assembly kernels take raw pointers and block counts; the Go wrappers
// below have checked the lengths. Each computes exactly what the generic
// function of the same name computes (dot_generic.go).

// dotQ8_0AVX2 is dotQ8_0Generic over nb blocks.
//
//go:noescape
func dotQ8_0AVX2(w *byte, x *int8, d *float32, nb int) float32

// dotQ4_0AVX2 is dotQ4_0Generic over nb blocks.
//
//go:noescape
func dotQ4_0AVX2(w *byte, x *int8, d, s8 *float32, nb int) float32

// dotQ8_0x4AVX2 sets out[t] = dotQ8_0AVX2(w, x+t*xs, dt, nb) for t = 0..3,
// where dt[b] = d4[4b+t] (the four vectors' scales interleaved), decoding
// each weight block once.
//
//go:noescape
func dotQ8_0x4AVX2(w *byte, x *int8, d4 *float32, nb, xs int, out *float32)

// dotQ8_0RowsAVX2 sets out[r] = dotQ8_0AVX2(w+r*rs, x, d, nb) for r < rows
// (rows > 0, nb > 0).
//
//go:noescape
func dotQ8_0RowsAVX2(w *byte, x *int8, d *float32, nb, rows, rs int, out *float32)

// dotQ4_0RowsAVX2 sets out[r] = dotQ4_0AVX2(w+r*rs, x, d, s8, nb) for
// r < rows (rows > 0, nb > 0).
//
//go:noescape
func dotQ4_0RowsAVX2(w *byte, x *int8, d, s8 *float32, nb, rows, rs int, out *float32)

// dotF32x4AVX2 sets out[t] = the dot of n float32 weights with the vector
// at x + t*xs bytes, t = 0..3, each the bits dotF32RowAVX2 gives.
//
//go:noescape
func dotF32x4AVX2(w *byte, x *float32, xs, n int, out *float32)

// dotF16x4AVX2 is dotF32x4AVX2 for fp16 weights.
//
//go:noescape
func dotF16x4AVX2(w *byte, x *float32, xs, n int, out *float32)

// dotBF16x4AVX2 is dotF32x4AVX2 for bf16 weights.
//
//go:noescape
func dotBF16x4AVX2(w *byte, x *float32, xs, n int, out *float32)

// dotQ4_KAVX2 is dotQ4_KGeneric over nb super-blocks.
//
//go:noescape
func dotQ4_KAVX2(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ4_KRowsAVX2 is dotQ4_KAVX2 of rows rows, rs bytes apart from w,
// with one vector: out[r] for row r, the same bits, no call a row.
//
//go:noescape
func dotQ4_KRowsAVX2(w *byte, x *int8, d *float32, bsums *int16, nb, rows, rs int, out *float32)

// dotQ4_Kx4AVX2 sets out[t] = dotQ4_KAVX2 of the row with vector t
// (quants x + t*xs, scales d + t*ds, 16-sums bsums + t*bs; byte strides)
// for t = 0..3, unpacking each super-block once.
//
//go:noescape
func dotQ4_Kx4AVX2(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

// dotQ6_Kx4AVX2 sets out[t] = dotQ6_KAVX2 of the row with vector t
// (quants x + t*xs, scales d + t*ds; byte strides) for t = 0..3.
//
//go:noescape
func dotQ6_Kx4AVX2(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

// dotQ5_KAVX2 is dotQ5_KGeneric over nb super-blocks.
//
//go:noescape
func dotQ5_KAVX2(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ6_KAVX2 is dotQ6_KGeneric over nb super-blocks.
//
//go:noescape
func dotQ6_KAVX2(w *byte, x *int8, d *float32, nb int) float32

// dotF32AVX2 is Dot's kernel: sum(a[i]*b[i]) for n float32 elements in
// dotVecGeneric's order (four 8-lane FMA accumulators over 32 elements).
//
//go:noescape
func dotF32AVX2(w *byte, x *float32, n int) float32

// dotF32RowAVX2 is the dot of a row of n float32 weights with x in the
// float order (dot_amd64.s), the order of dotF32x4AVX2 and
// dotF32Rows4AVX2 too, so that a vector's result does not depend on the
// kernel its batch takes.
//
//go:noescape
func dotF32RowAVX2(w *byte, x *float32, n int) float32

// dotF16AVX2 is dotF32RowAVX2 with fp16 weights (converted exactly).
//
//go:noescape
func dotF16AVX2(w *byte, x *float32, n int) float32

// dotBF16AVX2 is dotF32RowAVX2 with bf16 weights (converted exactly).
//
//go:noescape
func dotBF16AVX2(w *byte, x *float32, n int) float32

// dotF32Rows4AVX2 sets out[r] = dotF32RowAVX2(w+r*rs, x, n) for
// r < 4*groups (groups > 0, n > 0), four rows at a time.
//
//go:noescape
func dotF32Rows4AVX2(w *byte, x *float32, n, groups, rs int, out *float32)

// dotF32Rows4x2AVX512 is dotF32Rows4AVX2 for two vectors at once (x and
// xs bytes after it, into out0 and out1), each weight loaded once for
// both: the same bits per vector.
//
//go:noescape
func dotF32Rows4x2AVX512(w *byte, x *float32, xs, n, groups, rs int, out0, out1 *float32)

// dotF16Rows4AVX2 is dotF32Rows4AVX2 for fp16 weights.
//
//go:noescape
func dotF16Rows4AVX2(w *byte, x *float32, n, groups, rs int, out *float32)

// dotBF16Rows4AVX2 is dotF32Rows4AVX2 for bf16 weights.
//
//go:noescape
func dotBF16Rows4AVX2(w *byte, x *float32, n, groups, rs int, out *float32)

// quantizeQ32AVX2 is quantizeQ32Generic over nb blocks.
//
//go:noescape
func quantizeQ32AVX2(x *float32, q *int8, d *float32, nb int)

func dotQ8_0(w []byte, x []int8, d []float32) float32 {
	if !useAVX2 || len(d) == 0 {
		return dotQ8_0Generic(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*q80Bytes-1], x[nb*32-1]
	if useAVX512 {
		return dotQ8_0AVX512(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
	}
	if useAVXVNNI {
		return dotQ8_0VNNI(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
	}
	return dotQ8_0AVX2(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
}

func dotQ4_0(w []byte, x []int8, d, s8 []float32) float32 {
	if !useAVX2 || len(d) == 0 {
		return dotQ4_0Generic(w, x, d, s8)
	}
	nb := len(d)
	_, _, _ = w[nb*q40Bytes-1], x[(nb+1)/2*64-1], s8[nb-1]
	if useAVX512 {
		return dotQ4_0AVX512(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(s8), nb)
	}
	if useAVXVNNI {
		return dotQ4_0VNNI(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(s8), nb)
	}
	return dotQ4_0AVX2(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(s8), nb)
}

func dotQ4_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	if !useAVX2 || len(d) == 0 {
		return dotQ4_KGeneric(w, x, d, bsums)
	}
	nb := len(d)
	_, _, _ = w[nb*q4KBytes-1], x[nb*qkK-1], bsums[nb*16-1]
	if useAVX512 {
		return dotQ4_KAVX512(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
	}
	if useAVXVNNI {
		return dotQ4_KVNNI(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
	}
	return dotQ4_KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
}

func dotQ5_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	if !useAVX2 || len(d) == 0 {
		return dotQ5_KGeneric(w, x, d, bsums)
	}
	nb := len(d)
	_, _, _ = w[nb*q5KBytes-1], x[nb*qkK-1], bsums[nb*16-1]
	if useAVX512 {
		return dotQ5_KAVX512(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
	}
	if useAVXVNNI {
		return dotQ5_KVNNI(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
	}
	return dotQ5_KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
}

func dotQ6_K(w []byte, x []int8, d []float32) float32 {
	if !useAVX2 || len(d) == 0 {
		return dotQ6_KGeneric(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*q6KBytes-1], x[nb*qkK-1]
	if useAVX512 {
		return dotQ6_KAVX512(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
	}
	if useAVXVNNI {
		return dotQ6_KVNNI(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
	}
	return dotQ6_KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
}

func dotF32Row(w []byte, x []float32) float32 {
	if !useAVX2 || len(x) == 0 {
		return dotF32Generic(w, x)
	}
	_ = w[4*len(x)-1]
	return dotF32RowAVX2(unsafe.SliceData(w), unsafe.SliceData(x), len(x))
}

func dotF16Row(w []byte, x []float32) float32 {
	if !useAVX2 || len(x) == 0 {
		return dotF16Generic(w, x)
	}
	_ = w[2*len(x)-1]
	return dotF16AVX2(unsafe.SliceData(w), unsafe.SliceData(x), len(x))
}

func dotBF16Row(w []byte, x []float32) float32 {
	if !useAVX2 || len(x) == 0 {
		return dotBF16Generic(w, x)
	}
	_ = w[2*len(x)-1]
	return dotBF16AVX2(unsafe.SliceData(w), unsafe.SliceData(x), len(x))
}

func quantizeQ32(x []float32, q []int8, d []float32) {
	if !useAVX2 || len(d) == 0 {
		quantizeQ32Generic(x, q, d)
		return
	}
	nb := len(d)
	_, _ = x[nb*32-1], q[nb*32-1]
	quantizeQ32AVX2(unsafe.SliceData(x), unsafe.SliceData(q), unsafe.SliceData(d), nb)
}

// q8x4Wide selects dotQ8_0x4Z, the four-vector Q8_0 kernel in 64-byte
// registers, over dotQ8_0x4AVX512 (the same bits) on AMD's CPUs, whose
// vector units take 64-byte instructions at the rate they take 32-byte
// ones: on a 2-core AMD EPYC (Zen 5) VM, BenchmarkMatMulActStream Q8_0
// at 4 vectors took 0.66-0.77 ms against 1.07-1.09 (2026-12-07). Intel's
// cores shut a vector port while a 64-byte instruction is in flight
// (dot_avx512_amd64.s); not measured there, so they keep the 32-byte one.
var q8x4Wide = isAMD()

// isAMD reports whether CPUID's vendor is AMD's.
func isAMD() bool {
	b, c, d := cpuidVendor()
	return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163 // "Auth" "enti" "cAMD"
}

// cpuidVendor returns CPUID leaf 0's EBX, ECX and EDX: the vendor's 12
// bytes, EBX first, then EDX, then ECX (dot_amd64.s).
//
//go:noescape
func cpuidVendor() (b, c, d uint32)

func kernelsActive(name string) bool {
	switch name {
	case "avx2":
		return useAVX2 && !useAVX512 && !useAVXVNNI
	case "avxvnni":
		return useAVXVNNI
	case "avx512":
		return useAVX512
	}
	return false
}

// hasDot8 reports whether dot8 takes t here: Q8_0 with the 64-byte
// kernels (q8x4Wide). One pass of eight vectors over a row group, not two
// of four: BenchmarkMatMulActStream Q8_0 at 8 vectors, 1.65-1.84 ms a
// 5632x2048 matrix with dotQ8_0x4Z twice (2026-12-07).
func hasDot8(t Type) bool { return t == Q8_0 && useAVX512 && q8x4Wide }

// dot8 sets out[t] = dotAct(t, row, a, i+t, cols) for t = 0..7 with
// dotQ8_0x8Z (i a multiple of 4; hasDot8(t) true).
func dot8(t Type, row []byte, a *Activations, i, cols int, out *[8]float32) {
	nb := cols / 32
	_, _, _ = row[nb*q80Bytes-1], a.q32[(i+8)*cols-1], a.d32x4[(i+8)*nb-1]
	dotQ8_0x8Z(unsafe.SliceData(row), &a.q32[i*cols], &a.d32x4[i*nb], nb, cols, 4*4*nb, &out[0])
}

// dot4 sets out[t] = dotAct(t, row, a, i+t, cols) for t = 0..3 with a
// kernel that decodes the row once for the four vectors, and reports
// whether it did (false: no such kernel for t here; the caller loops).
func dot4(t Type, row []byte, a *Activations, i, cols int, out *[4]float32) bool {
	if !useAVX2 || cols == 0 || i%4 != 0 {
		return false
	}
	nb := cols / 32
	switch t {
	case Q8_0:
		_, _, _ = row[nb*q80Bytes-1], a.q32[(i+4)*cols-1], a.d32x4[(i+4)*nb-1]
		switch {
		case useAVX512 && q8x4Wide:
			dotQ8_0x4Z(unsafe.SliceData(row), &a.q32[i*cols], &a.d32x4[i*nb], nb, cols, &out[0])
		case useAVX512:
			dotQ8_0x4AVX512(unsafe.SliceData(row), &a.q32[i*cols], &a.d32x4[i*nb], nb, cols, &out[0])
		case useAVXVNNI:
			dotQ8_0x4VNNI(unsafe.SliceData(row), &a.q32[i*cols], &a.d32x4[i*nb], nb, cols, &out[0])
		default:
			dotQ8_0x4AVX2(unsafe.SliceData(row), &a.q32[i*cols], &a.d32x4[i*nb], nb, cols, &out[0])
		}
	case Q4_K:
		nk := cols / qkK
		_, _, _, _ = row[nk*q4KBytes-1], a.qK[(i+4)*cols-1], a.dK[(i+4)*nk-1], a.bsumsK[(i+4)*cols/16-1]
		if useAVX512 {
			dotQ4_Kx4AVX512(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
			break
		}
		if useAVXVNNI {
			dotQ4_Kx4VNNI(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
			break
		}
		dotQ4_Kx4AVX2(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
	case Q5_K:
		if !useAVX512 && !useAVXVNNI {
			return false
		}
		nk := cols / qkK
		_, _, _, _ = row[nk*q5KBytes-1], a.qK[(i+4)*cols-1], a.dK[(i+4)*nk-1], a.bsumsK[(i+4)*cols/16-1]
		if useAVX512 {
			dotQ5_Kx4AVX512(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
			break
		}
		dotQ5_Kx4VNNI(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
	case Q6_K:
		nk := cols / qkK
		_, _, _ = row[nk*q6KBytes-1], a.qK[(i+4)*cols-1], a.dK[(i+4)*nk-1]
		switch {
		case useAVX512:
			dotQ6_Kx4AVX512(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		case useAVXVNNI:
			dotQ6_Kx4VNNI(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		default:
			dotQ6_Kx4AVX2(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
		}
	case F32:
		_, _ = row[4*cols-1], a.x[(i+4)*cols-1]
		dotF32x4AVX2(unsafe.SliceData(row), &a.x[i*cols], 4*cols, cols, &out[0])
	case F16:
		_, _ = row[2*cols-1], a.x[(i+4)*cols-1]
		dotF16x4AVX2(unsafe.SliceData(row), &a.x[i*cols], 4*cols, cols, &out[0])
	case BF16:
		_, _ = row[2*cols-1], a.x[(i+4)*cols-1]
		dotBF16x4AVX2(unsafe.SliceData(row), &a.x[i*cols], 4*cols, cols, &out[0])
	default:
		return dot4Low(t, row, a, i, cols, out)
	}
	return true
}

// axpyAVX2 is axpyGeneric over n elements with FMA.
//
//go:noescape
func axpyAVX2(dst *float32, alpha float32, x *float32, n int)

func dotVec(a, b []float32) float32 {
	if !useAVX2 || len(a) == 0 {
		return dotVecGeneric(a, b)
	}
	_ = b[len(a)-1]
	return dotF32AVX2((*byte)(unsafe.Pointer(unsafe.SliceData(a))), unsafe.SliceData(b), len(a))
}

func axpy(dst []float32, alpha float32, x []float32) {
	if !useAVX2 || len(dst) == 0 {
		axpyGeneric(dst, alpha, x)
		return
	}
	_ = x[len(dst)-1]
	axpyAVX2(unsafe.SliceData(dst), alpha, unsafe.SliceData(x), len(dst))
}

// dotRows sets out[r-lo] = dotAct(t, row r of w, a, i, cols) for r in
// [lo, hi) with one assembly call where there is a multi-row kernel, and
// reports whether it did.
func dotRows(w Matrix, a *Activations, i, lo, hi int, out []float32) bool {
	if !useAVX2 || lo >= hi || w.Cols == 0 {
		return false
	}
	cols, rb, nb := w.Cols, w.RowBytes(), w.Cols/32
	rows := hi - lo
	_ = out[rows-1]
	switch w.Type {
	case Q8_0:
		_, _, _ = w.Data[hi*rb-1], a.q32[(i+1)*cols-1], a.d32[(i+1)*nb-1]
		switch {
		case useAVX512:
			dotQ8_0RowsAVX512(&w.Data[lo*rb], &a.q32[i*cols], &a.d32[i*nb], nb, rows, rb, &out[0])
		case useAVXVNNI:
			dotQ8_0RowsVNNI(&w.Data[lo*rb], &a.q32[i*cols], &a.d32[i*nb], nb, rows, rb, &out[0])
		default:
			dotQ8_0RowsAVX2(&w.Data[lo*rb], &a.q32[i*cols], &a.d32[i*nb], nb, rows, rb, &out[0])
		}
	case Q4_0:
		_, _, _ = w.Data[hi*rb-1], a.q32p[(i+1)*a.pairStride-1], a.s8f[(i+1)*nb-1]
		switch {
		case useAVX512:
			dotQ4_0RowsAVX512(&w.Data[lo*rb], &a.q32p[i*a.pairStride], &a.d32[i*nb], &a.s8f[i*nb], nb, rows, rb, &out[0])
		case useAVXVNNI:
			dotQ4_0RowsVNNI(&w.Data[lo*rb], &a.q32p[i*a.pairStride], &a.d32[i*nb], &a.s8f[i*nb], nb, rows, rb, &out[0])
		default:
			dotQ4_0RowsAVX2(&w.Data[lo*rb], &a.q32p[i*a.pairStride], &a.d32[i*nb], &a.s8f[i*nb], nb, rows, rb, &out[0])
		}
	case Q4_K:
		// A call a row (dotAct) cost as much as a fifth of the row's
		// work on a 2048-column matrix; these kernels loop over the rows.
		nk := cols / qkK
		_, _, _, _ = w.Data[hi*rb-1], a.qK[(i+1)*cols-1], a.dK[(i+1)*nk-1], a.bsumsK[(i+1)*cols/16-1]
		wp, xp, dp, bp := &w.Data[lo*rb], &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16]
		switch {
		case useAVX512:
			dotQ4_KRowsAVX512(wp, xp, dp, bp, nk, rows, rb, &out[0])
		case useAVXVNNI:
			dotQ4_KRowsVNNI(wp, xp, dp, bp, nk, rows, rb, &out[0])
		default:
			dotQ4_KRowsAVX2(wp, xp, dp, bp, nk, rows, rb, &out[0])
		}
	case F32, F16, BF16:
		groups := rows / 4
		if groups > 0 {
			_, _ = w.Data[(lo+4*groups)*rb-1], a.x[(i+1)*cols-1]
			wp, xp, op := &w.Data[lo*rb], &a.x[i*cols], &out[0]
			switch w.Type {
			case F32:
				dotF32Rows4AVX2(wp, xp, cols, groups, rb, op)
			case F16:
				dotF16Rows4AVX2(wp, xp, cols, groups, rb, op)
			default:
				dotBF16Rows4AVX2(wp, xp, cols, groups, rb, op)
			}
		}
		for r := lo + 4*groups; r < hi; r++ {
			out[r-lo] = dotAct(w.Type, w.Data[r*rb:(r+1)*rb], a, i, cols)
		}
	default:
		return false
	}
	return true
}

// dotRowsPair is dotRows for vectors i and i+1 of F32 weights at once
// (AVX-512: every weight row is loaded once for both), the same bits in
// out0 and out1 as dotRows gives each; false where it does not apply.
func dotRowsPair(w Matrix, a *Activations, i, lo, hi int, out0, out1 []float32) bool {
	groups := (hi - lo) / 4
	if !useAVX512 || w.Type != F32 || groups == 0 {
		return false
	}
	cols, rb := a.Cols, w.RowBytes()
	_, _, _, _ = w.Data[(lo+4*groups)*rb-1], a.x[(i+2)*cols-1], out0[4*groups-1], out1[4*groups-1]
	dotF32Rows4x2AVX512(&w.Data[lo*rb], &a.x[i*cols], 4*cols, cols, groups, rb, &out0[0], &out1[0])
	if r := lo + 4*groups; r < hi {
		dotRows(w, a, i, r, hi, out0[4*groups:])
		dotRows(w, a, i+1, r, hi, out1[4*groups:])
	}
	return true
}

// swigluAVX2 is swigluGeneric for n elements (n a positive multiple of 8),
// bit for bit (expf32 is its exp written in Go).
//
//go:noescape
func swigluAVX2(out, gate, up *float32, n int)

func swiglu(out, gate, up []float32) {
	n := len(gate) &^ 7
	if !useAVX2 || n == 0 {
		swigluGeneric(out, gate, up)
		return
	}
	_, _ = out[n-1], up[n-1]
	swigluAVX2(unsafe.SliceData(out), unsafe.SliceData(gate), unsafe.SliceData(up), n)
	swigluGeneric(out[n:], gate[n:], up[n:])
}

// floatOrderEverywhere: every amd64 float kernel (one row, four rows,
// four vectors) sums in the float order (dot_amd64.s), and the generic
// ones take one vector at a time.
const floatOrderEverywhere = true

//go:build !purego

package tensor

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useNEON selects the NEON kernels with the dot-product instructions
// (SDOT, ARMv8.2; every Apple Silicon core has them). It is read once from
// the CPU; tests flip it. The one-vector dots, the four-vector dots
// (dot4: Q8_0, Q4_K, Q6_K and the float types; dot4_arm64.s), Axpy and
// the interleaved batch kernels for Q8_0 and Q4_0 (batch_arm64.s) and the
// one- and four-vector Q2_K, Q3_K and IQ4_XS dots (dot_low_arm64.s) have
// arm64 kernels; the multi-row kernels and SwiGLU run the generic Go code.
var useNEON = cpu.ARM64.HasASIMDDP

var hasNEON = useNEON

// useI8MM selects, on top of the NEON kernels, the batch kernels with the
// int8 matrix multiply-accumulate (SMMLA, ARMv8.6: Apple M2 and later;
// batch_i8mm_arm64.go). They compute exactly what the SDOT batch kernels
// compute, so the choice changes speed, never results. Tests flip it.
var useI8MM = hasI8MM

var hasI8MM = hasNEON && cpu.ARM64.HasI8MM

// implementations lists the kernel sets this CPU can run: "neon" is the
// SDOT kernels alone (the i8mm ones off, as on an M1), "i8mm" both.
var implementations = func() []impl {
	list := []impl{{"generic", func(on bool) { useNEON, useI8MM = !on && hasNEON, !on && hasI8MM }}}
	if hasNEON {
		list = append(list, impl{"neon", func(on bool) { useNEON, useI8MM = hasNEON, !on && hasI8MM }})
	}
	if hasI8MM {
		list = append(list, impl{"i8mm", func(on bool) { useNEON, useI8MM = hasNEON, hasI8MM }})
	}
	return list
}()

func kernelsActive(name string) bool {
	switch name {
	case "neon":
		return useNEON && !useI8MM
	case "i8mm":
		return useNEON && useI8MM
	}
	return false
}

// The assembly kernels take raw pointers and block counts; the Go wrappers
// below have checked the lengths. Each computes exactly what the generic
// function of the same name computes (dot_generic.go), in the same lanes
// and the same float32 order.

// dotQ8_0NEON is dotQ8_0Generic over nb blocks (nb > 0): SDOT gives the
// same eight lanes of four-element integer sums, SCVTF and FMLA (fused)
// the same per-lane float32 steps, and the reduction the same order.
//
//go:noescape
func dotQ8_0NEON(w *byte, x *int8, d *float32, nb int) float32

// dotQ4_0NEON is dotQ4_0Generic over nb blocks (nb > 0): nibbles split by
// AND and USHR, SDOT against the pair-arranged activations, the scale
// products of each group of 8 blocks gathered into two vectors for the
// offset corrections, the rest into a scalar.
//
//go:noescape
func dotQ4_0NEON(w *byte, x *int8, d, s8 *float32, nb int) float32

// dotQ4_KNEON is dotQ4_KGeneric over nb super-blocks (nb > 0): the
// scales and mins unpacked as ggml does with 32-bit masks, SDOT per
// sub-block half, MLA by the sub-block's scale into the int32 lanes, and
// the mins term from pairwise-added bsums (SMULL/SMLAL, ADDV).
//
//go:noescape
func dotQ4_KNEON(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ5_KNEON is dotQ5_KGeneric over nb super-blocks (nb > 0): as
// dotQ4_KNEON, with each sub-block's fifth bits shifted from qh into bit 4
// of its quants.
//
//go:noescape
func dotQ5_KNEON(w *byte, x *int8, d *float32, bsums *int16, nb int) float32

// dotQ6_KNEON is dotQ6_KGeneric over nb super-blocks (nb > 0): each
// quarter's quants rebuilt as q-32 in signed bytes, SDOT per 16 elements,
// MLA by the 16-element scale into the int32 lanes.
//
//go:noescape
func dotQ6_KNEON(w *byte, x *int8, d *float32, nb int) float32

// dotF32NEON is sum(w[i]*x[i]) over n > 0 float32 elements: four 4-lane
// FMA accumulators over 16 elements a round, 4 at a time into the first,
// then a scalar FMA tail; (acc0+acc1)+(acc2+acc3) reduced as hsum, plus the
// tail. A different rounding order from dotF32Generic (within dotRelTol).
//
//go:noescape
func dotF32NEON(w *byte, x *float32, n int) float32

// dotF16NEON is dotF32NEON with fp16 weights (converted exactly by FCVTL).
//
//go:noescape
func dotF16NEON(w *byte, x *float32, n int) float32

// dotBF16NEON is dotF32NEON with bf16 weights (converted exactly by SHLL
// #16).
//
//go:noescape
func dotBF16NEON(w *byte, x *float32, n int) float32

// quantizeQ32NEON is quantizeQ32Generic over nb > 0 blocks: FMAXV of
// FABS for amax, the same float32 divisions, the scale rounded to FP16 and
// back by FCVT, FMUL, and FCVTNS (round to nearest, ties to even) narrowed
// to bytes.
//
//go:noescape
func quantizeQ32NEON(x *float32, q *int8, d *float32, nb int)

func dotQ8_0(w []byte, x []int8, d []float32) float32 {
	if !useNEON || len(d) == 0 {
		return dotQ8_0Generic(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*q80Bytes-1], x[nb*32-1]
	return dotQ8_0NEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
}

func dotQ4_0(w []byte, x []int8, d, s8 []float32) float32 {
	if !useNEON || len(d) == 0 {
		return dotQ4_0Generic(w, x, d, s8)
	}
	nb := len(d)
	_, _, _ = w[nb*q40Bytes-1], x[(nb+1)/2*64-1], s8[nb-1]
	return dotQ4_0NEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(s8), nb)
}

func dotQ4_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	if !useNEON || len(d) == 0 {
		return dotQ4_KGeneric(w, x, d, bsums)
	}
	nb := len(d)
	_, _, _ = w[nb*q4KBytes-1], x[nb*qkK-1], bsums[nb*16-1]
	return dotQ4_KNEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
}
func dotQ5_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	if !useNEON || len(d) == 0 {
		return dotQ5_KGeneric(w, x, d, bsums)
	}
	nb := len(d)
	_, _, _ = w[nb*q5KBytes-1], x[nb*qkK-1], bsums[nb*16-1]
	return dotQ5_KNEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), unsafe.SliceData(bsums), nb)
}
func dotQ6_K(w []byte, x []int8, d []float32) float32 {
	if !useNEON || len(d) == 0 {
		return dotQ6_KGeneric(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*q6KBytes-1], x[nb*qkK-1]
	return dotQ6_KNEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
}

func dotF32Row(w []byte, x []float32) float32 {
	if !useNEON || len(x) == 0 {
		return dotF32Generic(w, x)
	}
	_ = w[4*len(x)-1]
	return dotF32NEON(unsafe.SliceData(w), unsafe.SliceData(x), len(x))
}

func dotF16Row(w []byte, x []float32) float32 {
	if !useNEON || len(x) == 0 {
		return dotF16Generic(w, x)
	}
	_ = w[2*len(x)-1]
	return dotF16NEON(unsafe.SliceData(w), unsafe.SliceData(x), len(x))
}

func dotBF16Row(w []byte, x []float32) float32 {
	if !useNEON || len(x) == 0 {
		return dotBF16Generic(w, x)
	}
	_ = w[2*len(x)-1]
	return dotBF16NEON(unsafe.SliceData(w), unsafe.SliceData(x), len(x))
}

func quantizeQ32(x []float32, q []int8, d []float32) {
	if !useNEON || len(d) == 0 {
		quantizeQ32Generic(x, q, d)
		return
	}
	nb := len(d)
	_, _ = x[nb*32-1], q[nb*32-1]
	quantizeQ32NEON(unsafe.SliceData(x), unsafe.SliceData(q), unsafe.SliceData(d), nb)
}

// dotQ8_0x4NEON sets out[t] = dotQ8_0NEON(w, x+t*xs, dt, nb) for t =
// 0..3, where dt[b] = d4[4b+t] (the four vectors' scales interleaved),
// loading each weight block once (nb > 0).
//
//go:noescape
func dotQ8_0x4NEON(w *byte, x *int8, d4 *float32, nb, xs int, out *float32)

// dotQ4_Kx4NEON sets out[t] = dotQ4_KNEON of the row with vector t (quants
// x + t*xs, scales d + t*ds, 16-sums bsums + t*bs; byte strides) for t =
// 0..3, unpacking each super-block's scales once (nb > 0).
//
//go:noescape
func dotQ4_Kx4NEON(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)

// dotQ6_Kx4NEON sets out[t] = dotQ6_KNEON of the row with vector t (quants
// x + t*xs, scales d + t*ds; byte strides) for t = 0..3, unpacking each
// super-block's scales once (nb > 0).
//
//go:noescape
func dotQ6_Kx4NEON(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)

// dotF32x4NEON sets out[t] = the dot of n > 0 float32 weights with the
// vector at x + t*xs bytes, t = 0..3 (float rounding differs from
// dotF32NEON's, within dotRelTol).
//
//go:noescape
func dotF32x4NEON(w *byte, x *float32, xs, n int, out *float32)

// dotF16x4NEON is dotF32x4NEON for fp16 weights (converted exactly).
//
//go:noescape
func dotF16x4NEON(w *byte, x *float32, xs, n int, out *float32)

// dotBF16x4NEON is dotF32x4NEON for bf16 weights (converted exactly).
//
//go:noescape
func dotBF16x4NEON(w *byte, x *float32, xs, n int, out *float32)

// hasDot8: no eight-vector kernel on arm64 (dot4 twice).
func hasDot8(Type) bool                                      { return false }
func dot8(Type, []byte, *Activations, int, int, *[8]float32) {}

// dot4 sets out[t] = dotAct(t, row, a, i+t, cols) for t = 0..3 with a
// kernel that decodes the row once for the four vectors, and reports
// whether it did (false: no such kernel for t here; the caller loops).
func dot4(t Type, row []byte, a *Activations, i, cols int, out *[4]float32) bool {
	if !useNEON || cols == 0 || i%4 != 0 {
		return false
	}
	nb := cols / 32
	switch t {
	case Q8_0:
		_, _, _ = row[nb*q80Bytes-1], a.q32[(i+4)*cols-1], a.d32x4[(i+4)*nb-1]
		dotQ8_0x4NEON(unsafe.SliceData(row), &a.q32[i*cols], &a.d32x4[i*nb], nb, cols, &out[0])
	case Q4_K:
		nk := cols / qkK
		_, _, _, _ = row[nk*q4KBytes-1], a.qK[(i+4)*cols-1], a.dK[(i+4)*nk-1], a.bsumsK[(i+4)*cols/16-1]
		dotQ4_Kx4NEON(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], &a.bsumsK[i*cols/16], nk, cols, 4*nk, 2*(cols/16), &out[0])
	case Q6_K:
		nk := cols / qkK
		_, _, _ = row[nk*q6KBytes-1], a.qK[(i+4)*cols-1], a.dK[(i+4)*nk-1]
		dotQ6_Kx4NEON(unsafe.SliceData(row), &a.qK[i*cols], &a.dK[i*nk], nk, cols, 4*nk, &out[0])
	case F32:
		_, _ = row[4*cols-1], a.x[(i+4)*cols-1]
		dotF32x4NEON(unsafe.SliceData(row), &a.x[i*cols], 4*cols, cols, &out[0])
	case F16:
		_, _ = row[2*cols-1], a.x[(i+4)*cols-1]
		dotF16x4NEON(unsafe.SliceData(row), &a.x[i*cols], 4*cols, cols, &out[0])
	case BF16:
		_, _ = row[2*cols-1], a.x[(i+4)*cols-1]
		dotBF16x4NEON(unsafe.SliceData(row), &a.x[i*cols], 4*cols, cols, &out[0])
	default:
		return dot4Low(t, row, a, i, cols, out)
	}
	return true
}

// dotVecNEON is dotVecGeneric over n > 0 elements, bit for bit
// (vec_arm64.s).
//
//go:noescape
func dotVecNEON(a, b *float32, n int) float32

func dotVec(a, b []float32) float32 {
	if !useNEON || len(a) == 0 {
		return dotVecGeneric(a, b)
	}
	_ = b[len(a)-1]
	return dotVecNEON(unsafe.SliceData(a), unsafe.SliceData(b), len(a))
}

// axpyNEON is axpyGeneric over n > 0 elements with FMA (dot4_arm64.s).
//
//go:noescape
func axpyNEON(dst *float32, alpha float32, x *float32, n int)

func axpy(dst []float32, alpha float32, x []float32) {
	if !useNEON || len(dst) == 0 {
		axpyGeneric(dst, alpha, x)
		return
	}
	_ = x[len(dst)-1]
	axpyNEON(unsafe.SliceData(dst), alpha, unsafe.SliceData(x), len(dst))
}

// dotRows has no multi-row kernel on arm64 yet: the caller loops over
// dotAct.
func dotRows(Matrix, *Activations, int, int, int, []float32) bool { return false }

// dotRowsPair: no kernel takes two float vectors at once here.
func dotRowsPair(Matrix, *Activations, int, int, int, []float32, []float32) bool { return false }

func swiglu(out, gate, up []float32) { swigluGeneric(out, gate, up) }

// prepareBatch and allocBatch have nothing to do without the VNNI kernels.
func (a *Activations) prepareBatch(Type) {}
func (a *Activations) allocBatch()       {}

func quantizeQ8K(x []float32, q []int8, d []float32, bsums []int16) {
	quantizeQ8KGeneric(x, q, d, bsums)
}

// floatOrderEverywhere is false on arm64: dotF32x4NEON and its kin sum
// four vectors in another order than the one-vector kernels.
const floatOrderEverywhere = false

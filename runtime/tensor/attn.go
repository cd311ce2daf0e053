package tensor

import (
	"fmt"
	"math"
)

// The attention kernels: a query against a block of cached keys
// (DotRows), the probability-weighted sum of a block of cached values
// (AxpyRows), and the conversions between the cache's half-precision
// storage and float32 (DecodeF16, EncodeF16). The cached keys and values
// are converted a block at a time into float32 scratch, where every query
// head that shares the KV head reuses them; the conversion is exact, so
// the float kernels decide the rounding, and each computes exactly what
// Dot and Axpy compute, in every implementation.

// DotRows sets out[r] = Dot(q, rows[r*stride : r*stride+len(q)]) for
// r < len(out): a query's scores against len(out) keys stored stride
// floats apart.
func DotRows(out, q, rows []float32, stride int) {
	if len(out) == 0 {
		return
	}
	if stride < len(q) || len(rows) < (len(out)-1)*stride+len(q) {
		panic(fmt.Sprintf("tensor: DotRows: %d rows of %d at stride %d in %d floats", len(out), len(q), stride, len(rows)))
	}
	dotRowsF32(out, q, rows, stride)
}

// AxpyRows adds the rows weighted by alpha into dst, one row after the
// other: for r = 0, 1, ... len(alpha)-1, Axpy(dst, alpha[r],
// rows[r*stride : r*stride+len(dst)]). Each element's sum is the same
// chain of fused multiply-adds in row order in every implementation.
func AxpyRows(dst, alpha, rows []float32, stride int) {
	if len(alpha) == 0 {
		return
	}
	if stride < len(dst) || len(rows) < (len(alpha)-1)*stride+len(dst) {
		panic(fmt.Sprintf("tensor: AxpyRows: %d rows of %d at stride %d in %d floats", len(alpha), len(dst), stride, len(rows)))
	}
	axpyRows(dst, alpha, rows, stride)
}

// AxpyRowsPair is AxpyRows into two destinations with their own weights
// over the same rows (two query heads that share a key-value head):
// each destination gets the chain AxpyRows gives it. With heads of 8
// the two chains share one register (a tiny model's attention is bound
// by the chain's latency, not its arithmetic).
func AxpyRowsPair(dst0, dst1, alpha0, alpha1, rows []float32, stride int) {
	if len(dst0) != len(dst1) || len(alpha0) != len(alpha1) {
		panic(fmt.Sprintf("tensor: AxpyRowsPair: destinations of %d and %d, weights %d and %d", len(dst0), len(dst1), len(alpha0), len(alpha1)))
	}
	if len(alpha0) == 0 {
		return
	}
	if stride < len(dst0) || len(rows) < (len(alpha0)-1)*stride+len(dst0) {
		panic(fmt.Sprintf("tensor: AxpyRowsPair: %d rows of %d at stride %d in %d floats", len(alpha0), len(dst0), stride, len(rows)))
	}
	axpyRowsPair(dst0, dst1, alpha0, alpha1, rows, stride)
}

// AxpyRowsPairs is AxpyRowsPair for up to four pairs (the same two query
// heads of consecutive tokens) over the same rows: pair t is dst0[t] and
// dst1[t] with weights alpha0[t] and alpha1[t], every weight row of one
// length. Each destination gets the chain AxpyRows gives it; with heads
// of 8 the pairs' chains run side by side, so that a step of several
// tokens (a prompt's tile, a speculative check) is not bound by one
// chain's latency.
func AxpyRowsPairs(dst0, dst1, alpha0, alpha1 [][]float32, rows []float32, stride int) {
	k := len(dst0)
	if k < 1 || k > 4 || len(dst1) != k || len(alpha0) != k || len(alpha1) != k {
		panic(fmt.Sprintf("tensor: AxpyRowsPairs: %d, %d, %d and %d rows of destinations and weights (1..4, all alike)", len(dst0), len(dst1), len(alpha0), len(alpha1)))
	}
	for t := range k {
		if len(dst0[t]) != len(dst0[0]) || len(dst1[t]) != len(dst0[0]) || len(alpha0[t]) != len(alpha0[0]) || len(alpha1[t]) != len(alpha0[0]) {
			panic(fmt.Sprintf("tensor: AxpyRowsPairs: pair %d: destinations of %d and %d, weights %d and %d; pair 0's %d and %d", t, len(dst0[t]), len(dst1[t]), len(alpha0[t]), len(alpha1[t]), len(dst0[0]), len(alpha0[0])))
		}
	}
	n := len(alpha0[0])
	if n == 0 {
		return
	}
	if w := len(dst0[0]); stride < w || len(rows) < (n-1)*stride+w {
		panic(fmt.Sprintf("tensor: AxpyRowsPairs: %d rows of %d at stride %d in %d floats", n, w, stride, len(rows)))
	}
	axpyRowsPairs(dst0, dst1, alpha0, alpha1, rows, stride)
}

func axpyRowsPairsGeneric(dst0, dst1, alpha0, alpha1 [][]float32, rows []float32, stride int) {
	for t := range dst0 {
		axpyRowsPair(dst0[t], dst1[t], alpha0[t], alpha1[t], rows, stride)
	}
}

// DecodeF16 sets dst[i] to the half-precision value src[i] (exact; equal
// lengths), as FP16ToFP32 but with signalling NaNs made quiet, as the
// conversion instructions do.
func DecodeF16(dst []float32, src []uint16) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("tensor: DecodeF16: len(dst)=%d len(src)=%d", len(dst), len(src)))
	}
	decodeF16Vec(dst, src)
}

// EncodeF16 sets dst[i] = FP32ToFP16(src[i]) (round to nearest even;
// equal lengths).
func EncodeF16(dst []uint16, src []float32) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("tensor: EncodeF16: len(dst)=%d len(src)=%d", len(dst), len(src)))
	}
	encodeF16Vec(dst, src)
}

// DecodeQ8_0 dequantizes whole Q8_0 blocks (34 bytes: an fp16 scale and 32
// int8 quants) from src into dst (len(dst) a multiple of 32, src at least
// len(dst)/32 blocks).
func DecodeQ8_0(dst []float32, src []byte) {
	if len(dst)%q80Block != 0 || len(src) < len(dst)/q80Block*q80Bytes {
		panic(fmt.Sprintf("tensor: DecodeQ8_0: %d floats from %d bytes", len(dst), len(src)))
	}
	decodeQ8_0Vec(dst, src)
}

// EncodeQ8_0 quantizes src (a multiple of 32 floats) into Q8_0 blocks in
// dst, as QuantizeInto(Q8_0, ...) does, without its checks' allocation.
func EncodeQ8_0(dst []byte, src []float32) {
	if len(src)%q80Block != 0 || len(dst) < len(src)/q80Block*q80Bytes {
		panic(fmt.Sprintf("tensor: EncodeQ8_0: %d floats into %d bytes", len(src), len(dst)))
	}
	encodeQ8_0(src, dst)
}

// SoftmaxScaled replaces x with softmax(scale*x): each product scale*x[i]
// rounded to float32 (as the scores were before this kernel, one at a
// time), then e^(x[i] - max) in float32 with the kernels' exp (expf32,
// within 2 ulp), then each divided by their sum (a float32 sum in eight
// lanes, as the assembly adds them). The same bits in every
// implementation. At least one element must be finite.
func SoftmaxScaled(x []float32, scale float32) {
	if len(x) == 0 {
		return
	}
	mx := scaleMax(x, scale)
	sum := expSub(x, mx)
	scaleVec(x, 1/sum)
}

// maxLane is VMAXPS's choice: a unless b is larger (or either is NaN).
func maxLane(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}

// scaleMaxGeneric sets x[i] *= scale and returns the largest: lane l of
// eight running maxima takes elements l, l+8, ... of the whole groups of
// eight, reduced as hsum8 adds (halves, pairs, the last two), then the
// tail one at a time.
func scaleMaxGeneric(x []float32, scale float32) float32 {
	n := len(x) &^ 7
	if n == 0 {
		return scaleMaxTail(x, scale, float32(math.Inf(-1)))
	}
	var m [8]float32
	for l := range m {
		x[l] *= scale
		m[l] = x[l]
	}
	for i := 8; i < n; i += 8 {
		for l := range m {
			v := x[i+l] * scale
			x[i+l] = v
			m[l] = maxLane(m[l], v)
		}
	}
	s0, s1, s2, s3 := maxLane(m[0], m[4]), maxLane(m[1], m[5]), maxLane(m[2], m[6]), maxLane(m[3], m[7])
	return scaleMaxTail(x[n:], scale, maxLane(maxLane(s0, s2), maxLane(s1, s3)))
}

func scaleMaxTail(x []float32, scale, mx float32) float32 {
	for i, v := range x {
		v *= scale
		x[i] = v
		mx = maxLane(mx, v)
	}
	return mx
}

// expSubGeneric sets x[i] = expf32(x[i] - mx) and returns the sum of the
// results: lane l of eight float32 sums takes elements l, l+8, ... of the
// whole groups of eight, then hsum8, then the tail one at a time.
func expSubGeneric(x []float32, mx float32) float32 {
	n := len(x) &^ 7
	var acc [8]float32
	for i := 0; i < n; i += 8 {
		for l := range acc {
			e := expf32(x[i+l] - mx)
			x[i+l] = e
			acc[l] += e
		}
	}
	return expSubTail(x[n:], mx, hsum8(&acc))
}

func expSubTail(x []float32, mx, sum float32) float32 {
	for i, v := range x {
		e := expf32(v - mx)
		x[i] = e
		sum += e
	}
	return sum
}

func scaleGeneric(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

func dotRowsGeneric(out, q, rows []float32, stride int) {
	for r := range out {
		out[r] = dotVecGeneric(q, rows[r*stride:r*stride+len(q)])
	}
}

func axpyRowsGeneric(dst, alpha, rows []float32, stride int) {
	for r, a := range alpha {
		axpyGeneric(dst, a, rows[r*stride:r*stride+len(dst)])
	}
}

func decodeF16Generic(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, h := range src {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			h |= 0x200 // quiet
		}
		dst[i] = FP16ToFP32(h)
	}
}

func encodeF16Generic(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = FP32ToFP16(v)
	}
}

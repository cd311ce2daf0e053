package tensor

import (
	"fmt"
	"math"
)

// RMSNorm sets out = x / sqrt(mean(x²) + eps) * weight elementwise. out may
// alias x; all three slices must have the same length.
//
// It rounds as ggml's rms_norm does (llama.cpp's is the reference): each
// square in float32, summed in float64, the mean narrowed to float32 and
// the scale 1/sqrt(mean+eps) taken in float32, then x*scale*weight. An ulp
// of the scale matters: the next matrix product quantizes this output to 8
// bits, and where values sit exactly half a step apart (a row of a Q3_K or
// IQ4_XS embedding) the ulp picks the rounding.
func RMSNorm(out, x, weight []float32, eps float32) {
	if len(out) != len(x) || len(weight) != len(x) {
		panic(fmt.Sprintf("tensor: RMSNorm: len(out)=%d len(x)=%d len(weight)=%d", len(out), len(x), len(weight)))
	}
	if len(x) == 0 {
		return
	}
	var ss float64
	for _, v := range x {
		ss += float64(float32(v * v))
	}
	mean := float32(ss / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		out[i] = v * scale * weight[i]
	}
}

// RoPE applies rotary position embedding in place to x, which holds nHeads
// heads of headDim elements. In each head the first ropeDim (even, <=
// headDim) elements are rotated as ropeDim/2 pairs; pair i turns by
// theta_i = pos*freqScale * freqBase^(-2i/ropeDim):
//
//	(a, b) <- (a*cos θ - b*sin θ, a*sin θ + b*cos θ)
//
// With neox false (ggml's "normal" mode, llama) pair i is elements
// (2i, 2i+1); with neox true (GPT-NeoX, qwen) it is (i, i+ropeDim/2).
// Angles are computed in float64.
func RoPE(x []float32, nHeads, headDim, ropeDim, pos int, freqBase, freqScale float32, neox bool) {
	RoPEFactors(x, nHeads, headDim, ropeDim, pos, freqBase, freqScale, neox, nil)
}

// RoPEFactors is RoPE with pair i's angle divided by factors[i] (Llama
// 3.1's long-context rope_freqs, which llama.cpp passes to ggml_rope_ext
// as freq_factors); nil factors are all 1.
func RoPEFactors(x []float32, nHeads, headDim, ropeDim, pos int, freqBase, freqScale float32, neox bool, factors []float32) {
	if factors != nil && len(factors) < ropeDim/2 {
		panic(fmt.Sprintf("tensor: RoPE: %d frequency factors for %d pairs", len(factors), ropeDim/2))
	}
	if ropeDim < 0 || ropeDim%2 != 0 || ropeDim > headDim || nHeads < 0 || len(x) < nHeads*headDim {
		panic(fmt.Sprintf("tensor: RoPE: len(x)=%d nHeads=%d headDim=%d ropeDim=%d", len(x), nHeads, headDim, ropeDim))
	}
	var table [512]float32
	tab := table[:]
	if ropeDim > len(table) {
		tab = make([]float32, ropeDim)
	}
	RoPETable(tab, ropeDim, pos, freqBase, freqScale, factors)
	RoPERotate(x, nHeads, headDim, ropeDim, neox, tab)
}

// RoPERotate rotates the first ropeDim values of each of x's nHeads heads
// by the angles of one position's RoPETable row: RoPEFactors with the
// angles computed once for every head, layer, query and key at that
// position.
func RoPERotate(x []float32, nHeads, headDim, ropeDim int, neox bool, table []float32) {
	half := ropeDim / 2
	if ropeDim < 0 || ropeDim%2 != 0 || ropeDim > headDim || nHeads < 0 || len(x) < nHeads*headDim || len(table) < 2*half {
		panic(fmt.Sprintf("tensor: RoPE: len(x)=%d nHeads=%d headDim=%d ropeDim=%d, %d angles", len(x), nHeads, headDim, ropeDim, len(table)))
	}
	for i := 0; i < half; i++ {
		cos, sin := table[2*i], table[2*i+1]
		ia, ib := 2*i, 2*i+1
		if neox {
			ia, ib = i, i+half
		}
		for h := 0; h < nHeads; h++ {
			head := x[h*headDim : h*headDim+ropeDim]
			a, b := head[ia], head[ib]
			head[ia] = a*cos - b*sin
			head[ib] = a*sin + b*cos
		}
	}
}

// ropeAngles walks the angles of RoPE's pairs for one position: pair i
// turns by pos*freqScale * freqBase^(-2i/ropeDim) / factors[i], each angle
// the previous times the same factor, in float64.
type ropeAngles struct {
	theta, scale float64
	factors      []float32
}

func newRopeAngles(ropeDim, pos int, freqBase, freqScale float32, factors []float32) ropeAngles {
	return ropeAngles{theta: float64(pos) * float64(freqScale), scale: math.Pow(float64(freqBase), -2/float64(ropeDim)), factors: factors}
}

// next returns pair i's sine and cosine (pairs in order from 0).
func (a *ropeAngles) next(i int) (sin, cos float32) {
	angle := a.theta
	if a.factors != nil {
		angle /= float64(a.factors[i])
	}
	a.theta *= a.scale
	s, c := math.Sincos(angle)
	return float32(s), float32(c)
}

// RoPETable writes the cosine and sine of each of the ropeDim/2 pairs'
// angles at position pos into dst (cos, sin, cos, sin, ...), exactly as
// RoPEFactors computes them: for backends that rotate elsewhere
// (strata/runtime/gpu).
func RoPETable(dst []float32, ropeDim, pos int, freqBase, freqScale float32, factors []float32) {
	half := ropeDim / 2
	if len(dst) < 2*half || (factors != nil && len(factors) < half) {
		panic(fmt.Sprintf("tensor: RoPETable: %d values for %d pairs", len(dst), half))
	}
	angles := newRopeAngles(ropeDim, pos, freqBase, freqScale, factors)
	for i := range half {
		dst[2*i+1], dst[2*i] = angles.next(i)
	}
}

// Softmax replaces x with exp(x - max(x)) / sum, in place, with the sum in
// float64. At least one element must be finite (or +Inf); an all -Inf input
// gives NaN.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - mx))
		x[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// SiLU returns x * sigmoid(x) = x / (1 + e^-x), in float32 with the
// kernels' exp (expf32), within 2e-6 relative of the exact value.
func SiLU(x float32) float32 {
	return x / (1 + expf32(-x))
}

// expf32 is e^x in float32 as the assembly SwiGLU computes it, step for
// step (Cephes expf: x clamped to ±88.376, n = floor(x*log2(e) + 1/2),
// r = x - n*ln2 in two parts, a degree-5 polynomial, times 2^n), with
// fma32 where the assembly fuses and float32() where it rounds between
// operations, so that the generic and assembly SwiGLU agree bit for bit.
// At the clamp's top end 2^n overflows to +Inf, as in the assembly.
func expf32(x float32) float32 {
	const (
		hi    = 88.3762626647949
		log2e = 1.44269504088896341
		c1    = 0.693359375
		c2    = -2.12194440e-4
	)
	if x > hi {
		x = hi
	}
	if x < -hi {
		x = -hi
	}
	v := fma32(x, log2e, 0.5) // within ±128
	fx := float32(int32(v))
	if fx > v {
		fx-- // floor, not truncation, below zero
	}
	x = fma32(-fx, c1, x)
	x = fma32(-fx, c2, x)
	z := float32(x * x)
	y := float32(1.9875691500e-4)
	y = fma32(y, x, 1.3981999507e-3)
	y = fma32(y, x, 8.3334519073e-3)
	y = fma32(y, x, 4.1665795894e-2)
	y = fma32(y, x, 1.6666665459e-1)
	y = fma32(y, x, 5.0000001201e-1)
	y = fma32(y, z, x)
	y = float32(y + 1)
	pow2 := math.Float32frombits(uint32(int32(fx)+127) << 23)
	return float32(y * pow2)
}

// SwiGLU sets out[i] = SiLU(gate[i]) * up[i], the gated feed-forward
// activation, bit-identical in every implementation. out may alias gate
// or up; all must have the same length.
func SwiGLU(out, gate, up []float32) {
	if len(out) != len(gate) || len(up) != len(gate) {
		panic(fmt.Sprintf("tensor: SwiGLU: len(out)=%d len(gate)=%d len(up)=%d", len(out), len(gate), len(up)))
	}
	swiglu(out, gate, up)
}

// swigluGeneric is SwiGLU in Go, the reference for swigluAVX2.
func swigluGeneric(out, gate, up []float32) {
	for i, g := range gate {
		out[i] = SiLU(g) * up[i]
	}
}

// Add adds src to dst elementwise (a residual connection). The lengths must
// match.
func Add(dst, src []float32) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("tensor: Add: len(dst)=%d len(src)=%d", len(dst), len(src)))
	}
	for i, v := range src {
		dst[i] += v
	}
}

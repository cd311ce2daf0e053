package tensor

import (
	"fmt"
	"math"
)

// RMSNorm sets out = x / sqrt(mean(x²) + eps) * weight elementwise. The sum
// of squares is accumulated in float64. out may alias x; all three slices
// must have the same length.
func RMSNorm(out, x, weight []float32, eps float32) {
	if len(out) != len(x) || len(weight) != len(x) {
		panic(fmt.Sprintf("tensor: RMSNorm: len(out)=%d len(x)=%d len(weight)=%d", len(out), len(x), len(weight)))
	}
	if len(x) == 0 {
		return
	}
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
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
	if ropeDim < 0 || ropeDim%2 != 0 || ropeDim > headDim || nHeads < 0 || len(x) < nHeads*headDim {
		panic(fmt.Sprintf("tensor: RoPE: len(x)=%d nHeads=%d headDim=%d ropeDim=%d", len(x), nHeads, headDim, ropeDim))
	}
	half := ropeDim / 2
	thetaScale := math.Pow(float64(freqBase), -2/float64(ropeDim))
	theta := float64(pos) * float64(freqScale)
	for i := 0; i < half; i++ {
		s, c := math.Sincos(theta)
		sin, cos := float32(s), float32(c)
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
		theta *= thetaScale
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

// SiLU returns x * sigmoid(x) = x / (1 + e^-x).
func SiLU(x float32) float32 {
	return float32(float64(x) / (1 + math.Exp(-float64(x))))
}

// SwiGLU sets out[i] = SiLU(gate[i]) * up[i], the gated feed-forward
// activation. out may alias gate or up; all must have the same length.
// The assembly kernels compute exp in float32 (within 2e-6 relative of
// the float64 SiLU).
func SwiGLU(out, gate, up []float32) {
	if len(out) != len(gate) || len(up) != len(gate) {
		panic(fmt.Sprintf("tensor: SwiGLU: len(out)=%d len(gate)=%d len(up)=%d", len(out), len(gate), len(up)))
	}
	swiglu(out, gate, up)
}

// swigluGeneric is SwiGLU in Go, with SiLU in float64.
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

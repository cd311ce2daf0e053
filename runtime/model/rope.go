package model

import (
	"math"

	"strata/runtime/tensor"
)

// rope rotates the nHeads heads of x for position pos with the model's
// RoPE settings (tensor.RoPE), dividing pair i's frequency by
// RopeFactors[i] when the model has them (Llama 3.1's long-context
// rope_freqs, which llama.cpp passes to ggml_rope_ext as freq_factors).
func (m *Model) rope(x []float32, nHeads, pos int) {
	if m.RopeFactors == nil {
		tensor.RoPE(x, nHeads, m.HeadDim, m.RopeDim, pos, m.RopeBase, m.RopeScale, m.RopeNeox)
		return
	}
	ropeFactors(x, nHeads, m.HeadDim, m.RopeDim, pos, m.RopeBase, m.RopeScale, m.RopeNeox, m.RopeFactors)
}

// ropeFactors is tensor.RoPE with pair i turning by
// theta_i = pos*freqScale * freqBase^(-2i/ropeDim) / factors[i].
func ropeFactors(x []float32, nHeads, headDim, ropeDim, pos int, freqBase, freqScale float32, neox bool, factors []float32) {
	half := ropeDim / 2
	thetaScale := math.Pow(float64(freqBase), -2/float64(ropeDim))
	theta := float64(pos) * float64(freqScale)
	for i := 0; i < half; i++ {
		s, c := math.Sincos(theta / float64(factors[i]))
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

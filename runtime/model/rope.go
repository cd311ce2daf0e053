package model

import "strata/runtime/tensor"

// rope rotates the nHeads heads of x for position pos with the model's
// RoPE settings, dividing pair i's frequency by RopeFactors[i] when the
// model has them (Llama 3.1's rope_freqs; nil otherwise).
func (m *Model) rope(x []float32, nHeads, pos int) {
	tensor.RoPEFactors(x, nHeads, m.HeadDim, m.RopeDim, pos, m.RopeBase, m.RopeScale, m.RopeNeox, m.RopeFactors)
}

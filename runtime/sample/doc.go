// Package sample turns logits into token ids: a pure, synchronous sampler
// chain seeded for reproducibility, in llama.cpp's default order
//
//	penalties -> top-k -> top-p -> min-p -> temperature -> softmax -> draw
//
// A Sampler holds one sequence's penalty history and PRNG (math/rand/v2
// PCG seeded from Params.Seed): the same Params, the same logits and the
// same Accept calls give the same tokens. That holds across machines of one
// GOARCH; across architectures a token whose probability sits within
// rounding of a filter's boundary may go the other way, since Go may fuse
// multiply-adds and math.Log's last bit differs. Sample allocates nothing
// and sorts only as much of the vocabulary as the filters need.
//
// A generation loop feeds the prompt to Accept, then alternates Sample and
// Accept (Example).
//
// The zero Params is greedy decoding.
package sample

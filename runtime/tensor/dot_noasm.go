//go:build purego || !(amd64 || arm64)

package tensor

// Without amd64 assembly (the purego tag, or another architecture) these
// kernels are the generic ones (arm64 has its own: dot_arm64.go).

func dotQ4_0(w []byte, x []int8, d, s8 []float32) float32 { return dotQ4_0Generic(w, x, d, s8) }
func dotQ4_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	return dotQ4_KGeneric(w, x, d, bsums)
}
func dotQ5_K(w []byte, x []int8, d []float32, bsums []int16) float32 {
	return dotQ5_KGeneric(w, x, d, bsums)
}
func dotQ6_K(w []byte, x []int8, d []float32) float32 { return dotQ6_KGeneric(w, x, d) }
func dotF32Row(w []byte, x []float32) float32         { return dotF32Generic(w, x) }
func dotF16Row(w []byte, x []float32) float32         { return dotF16Generic(w, x) }
func dotBF16Row(w []byte, x []float32) float32        { return dotBF16Generic(w, x) }
func quantizeQ32(x []float32, q []int8, d []float32)  { quantizeQ32Generic(x, q, d) }

// dot4 has no multi-vector kernel here: the caller loops over dotAct.
func dot4(Type, []byte, *Activations, int, int, *[4]float32) bool { return false }

// hasDot8: no eight-vector kernel here.
func hasDot8(Type) bool                                      { return false }
func dot8(Type, []byte, *Activations, int, int, *[8]float32) {}

func dotVec(a, b []float32) float32                  { return dotVecGeneric(a, b) }
func axpy(dst []float32, alpha float32, x []float32) { axpyGeneric(dst, alpha, x) }

// matMulBatchX8 has no interleaved kernel here: it computes no rows and
// returns lo.
func matMulBatchX8(out []float32, w Matrix, a *Activations, lo, hi int) int { return lo }

// dotRows has no multi-row kernel here: the caller loops over dotAct.
func dotRows(Matrix, *Activations, int, int, int, []float32) bool { return false }

// dotRowsPair: no kernel takes two float vectors at once here.
func dotRowsPair(Matrix, *Activations, int, int, int, []float32, []float32) bool { return false }

func swiglu(out, gate, up []float32) { swigluGeneric(out, gate, up) }

// prepareBatch and allocBatch have nothing to do without the VNNI kernels.
func (a *Activations) prepareBatch(Type) {}
func (a *Activations) allocBatch()       {}

// batchKQuants is false: no K-quant batch kernels here (usesBatchForm).
const batchKQuants = false

func quantizeQ8K(x []float32, q []int8, d []float32, bsums []int16) {
	quantizeQ8KGeneric(x, q, d, bsums)
}

// floatOrderEverywhere: the generic float dots take one vector at a time.
const floatOrderEverywhere = true

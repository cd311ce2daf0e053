//go:build purego || !(amd64 || arm64)

package tensor

// Without assembly the attention kernels are the generic ones.

func dotRowsF32(out, q, rows []float32, stride int)   { dotRowsGeneric(out, q, rows, stride) }
func axpyRows(dst, alpha, rows []float32, stride int) { axpyRowsGeneric(dst, alpha, rows, stride) }
func decodeF16Vec(dst []float32, src []uint16)        { decodeF16Generic(dst, src) }
func encodeF16Vec(dst []uint16, src []float32)        { encodeF16Generic(dst, src) }
func decodeQ8_0Vec(dst []float32, src []byte)         { decodeQ8_0(src, dst) }
func scaleMax(x []float32, scale float32) float32     { return scaleMaxGeneric(x, scale) }
func expSub(x []float32, mx float32) float32          { return expSubGeneric(x, mx) }
func scaleVec(x []float32, s float32)                 { scaleGeneric(x, s) }

func axpyRowsPair(dst0, dst1, alpha0, alpha1, rows []float32, stride int) {
	axpyRows(dst0, alpha0, rows, stride)
	axpyRows(dst1, alpha1, rows, stride)
}

func axpyRowsPairs(dst0, dst1, alpha0, alpha1 [][]float32, rows []float32, stride int) {
	axpyRowsPairsGeneric(dst0, dst1, alpha0, alpha1, rows, stride)
}

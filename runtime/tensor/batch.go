package tensor

// Batches of at least batchMin vectors against Q8_0 or Q4_0 weights use the
// "row-sequential" form of the dot product: for each row and vector, one
// float32 accumulator and, block by block in order,
//
//	acc = fma32(float32(isum_b), dw_b*dx_b, acc)
//
// where isum_b is the block's exact integer dot product. The assembly
// computes it with eight rows in the eight lanes of a register (so the
// float work and reduction are shared by eight rows) and must match the
// generic version below bit for bit; the result differs from the
// one-vector form only by float32 rounding.
const batchMin = 8

// usesBatchForm reports whether MatMulAct computes n vectors against t in
// the row-sequential form.
func usesBatchForm(t Type, n int) bool {
	return n >= batchMin && (t == Q8_0 || t == Q4_0)
}

// dotQ8_0Seq is the row-sequential dot of a Q8_0 row with 32-block
// activations.
func dotQ8_0Seq(w []byte, x []int8, d []float32) float32 {
	nb := len(d)
	w, x = w[:nb*q80Bytes], x[:nb*32]
	var acc float32
	for b := range nb {
		blk := w[b*q80Bytes : (b+1)*q80Bytes]
		s := FP16ToFP32(u16le(blk)) * d[b]
		qs, xs := blk[2:34], x[32*b:32*b+32]
		var is int32
		for k, q := range qs {
			is += int32(int8(q)) * int32(xs[k])
		}
		acc = fma32(float32(is), s, acc)
	}
	return acc
}

// dotQ4_0Seq is dotQ8_0Seq for Q4_0 rows.
func dotQ4_0Seq(w []byte, x []int8, d []float32) float32 {
	nb := len(d)
	w, x = w[:nb*q40Bytes], x[:nb*32]
	var acc float32
	for b := range nb {
		blk := w[b*q40Bytes : (b+1)*q40Bytes]
		s := FP16ToFP32(u16le(blk)) * d[b]
		qs, xs := blk[2:18], x[32*b:32*b+32]
		var is int32
		for j, q := range qs {
			is += (int32(q&15)-8)*int32(xs[j]) + (int32(q>>4)-8)*int32(xs[j+16])
		}
		acc = fma32(float32(is), s, acc)
	}
	return acc
}

// matMulBatchRows computes rows [lo, hi) of MatMulAct in the
// row-sequential form, with the interleaved assembly for whole groups of
// eight rows where there is one, and the generic dot for the rest.
func matMulBatchRows(out []float32, w Matrix, a *Activations, lo, hi int) {
	rows, cols, n := w.Rows, w.Cols, a.n
	rb := w.RowBytes()
	nb := cols / 32
	r := lo
	if r%8 == 0 {
		r = matMulBatchX8(out, w, a, lo, hi)
	}
	for ; r < hi; r++ {
		row := w.Data[r*rb : (r+1)*rb]
		for i := range n {
			q, d := a.q32[i*cols:(i+1)*cols], a.d32[i*nb:(i+1)*nb]
			if w.Type == Q8_0 {
				out[i*rows+r] = dotQ8_0Seq(row, q, d)
			} else {
				out[i*rows+r] = dotQ4_0Seq(row, q, d)
			}
		}
	}
}

// batchX8Acts holds what the AVX-512 batch kernels read besides the
// quants, for one weight type: the vectors' block scales d and the integer
// corrections c of the tiles' unsigned offset (minus the offset times the
// sum of the block's activation quants), both interleaved by groups of 8
// vectors ([group][block][8]), the last partial group as plain rows
// ([vector][block]). Only amd64 fills it.
type batchX8Acts struct {
	d  []float32
	c  []int32
	ok bool
}

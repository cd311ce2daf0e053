package tensor

import "math"

// Batches of at least batchMin vectors against Q8_0 or Q4_0 weights (and
// the K-quants and IQ4_XS where batchKQuants) use the "row-sequential" form of the dot product:
// for each row and vector, one float32 accumulator and, block by block in
// order,
//
//	acc = fma32(float32(isum_b), dw_b*dx_b, acc)
//
// where isum_b is the block's exact integer dot product (for Q4_K, of the
// super-block with its sub-block scales, and a second accumulator for the
// mins term, subtracted at the end: dotQ2_KSeq, dotQ4_KSeq, dotQ5_KSeq;
// dotQ6_KSeq, dotQ3_KSeq, dotIQ4_XSSeq).
// The assembly
// computes it with eight rows in the eight lanes of a register (so the
// float work and reduction are shared by eight rows) and must match the
// generic version below bit for bit; the result differs from the
// one-vector form only by float32 rounding — and not at all for Q4_K, Q5_K
// and Q6_K, whose one-vector kernels sum the same way (seqEverywhere;
// their batches take the batch kernels from 2 or 4 vectors).
//
// batchMin is 9, not 8: below it a batch takes the one-vector kernels'
// lane form, whose results are each the vector's alone
// (InvariantVectors), so that eight sessions' decoded tokens, a common
// --parallel, run as one batch without changing a bit of any of them.
const batchMin = 9

// InvariantVectors is the most vectors MatMulAct takes at once against
// weights of type t whose results are each the very bits the vector
// gives alone: any number for the types summed row-sequentially
// everywhere (seqEverywhere) and for float weights where every float
// kernel sums in one order (floatOrderEverywhere: amd64 and the generic
// kernels); below batchMin for the other quantized types, which use the
// one-vector kernels' lane form there (their four-vector forms sum
// alike); on arm64 float weights are summed one vector at a time below
// four (its four-vector float kernels sum in another order). Callers
// that batch several sequences' tokens keep to it, so that a sequence's
// result does not depend on its company.
func InvariantVectors(t Type) int {
	if seqEverywhere(t) {
		return math.MaxInt
	}
	if t.BlockSize() == 1 {
		if floatOrderEverywhere {
			return math.MaxInt
		}
		return floatLaneVectors
	}
	return batchMin - 1
}

// floatLaneVectors is the float bound where the four-vector float kernels
// sum in another order than the one-vector ones (arm64): below four, a
// batch takes the one-vector kernels.
const floatLaneVectors = 3

// InvariantVectorsAnywhere is InvariantVectors on every architecture:
// what a batch may hold for its rows to be computed as alone wherever it
// runs (a cluster's stages may be of another architecture than the node
// that sizes the batch).
func InvariantVectorsAnywhere(t Type) int {
	if t.BlockSize() == 1 {
		return floatLaneVectors
	}
	return InvariantVectors(t)
}

// seqEverywhere reports whether every kernel set computes t in the
// row-sequential form for any number of vectors: its one-vector and
// four-vector kernels too (Q4_K, Q5_K and Q6_K: dotQ4_KGeneric,
// dotQ5_KGeneric, dotQ6_KGeneric and their assembly twins).
// A row's result then never depends on its company, the chunking of a
// prompt or the batch size, on every CPU; and it is the same on every
// CPU. The other types still sum one vector in lanes (InvariantVectors).
func seqEverywhere(t Type) bool { return t == Q4_K || t == Q5_K || t == Q6_K }

// usesBatchForm reports whether MatMulAct computes n vectors against t in
// the row-sequential form. K-quant and IQ4_XS batches use it where a CPU
// has
// the kernels for it (batchKQuants): the same input then gives, within
// float rounding, different results on CPUs with and without them.
//
// For the types summed row-sequentially everywhere both forms give the
// same bits, so the faster one runs: from two vectors on, the batch
// kernels (measured on 2048x2048, AVX-512, one thread: Q6_K 1.15x at two
// vectors, 1.1x at four, 1.45x at eight); one vector keeps the one-vector
// kernel (the batch kernels at one vector take 1.3x as long). Q4_K's too,
// a short four padded (padFour): with AVX-512 it took from three until
// the packed 32-row tile (2026-12-07), since which two vectors padded to a
// four cost about what four do (5632 x 2048 from memory, AMD EPYC,
// alternated: one thread 0.42-0.49 -> 0.33-0.37 ms against the
// one-vector kernel run twice, two threads 0.23-0.26 -> 0.18-0.22).
// Q5_K's from four
// (at two they took 1.08x as long as the one-vector kernel run twice;
// 1.5x faster than the four-vector kernel at four, 2.3x at eight).
func usesBatchForm(t Type, n int) bool {
	if seqEverywhere(t) && batchKQuants {
		if t == Q5_K {
			return n >= 4
		}
		return n >= 2
	}
	return n >= batchMin && (t == Q8_0 || t == Q4_0 || isKBatch(t) && batchKQuants)
}

// isKBatch reports whether t is one of the types with a row-sequential
// form kept for CPUs with its kernels: the K-quants and IQ4_XS.
func isKBatch(t Type) bool {
	switch t {
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS:
		return true
	}
	return false
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

// dotQ4_KSeq is the row-sequential dot of a Q4_K row with Q8_K
// activations (quants x, scales d, 16-sums bsums): per super-block, the
// exact integer sums of the scaled sub-block dots and of the mins terms,
// each scaled once into its own accumulator.
func dotQ4_KSeq(w []byte, x []int8, d []float32, bsums []int16) float32 {
	return dotK45Seq(w, x, d, bsums, false)
}

// dotQ5_KSeq is dotQ4_KSeq for Q5_K rows (a fifth bit from qh).
func dotQ5_KSeq(w []byte, x []int8, d []float32, bsums []int16) float32 {
	return dotK45Seq(w, x, d, bsums, true)
}

func dotK45Seq(w []byte, x []int8, d []float32, bsums []int16, five bool) float32 {
	nb, bb, qoff := len(d), q4KBytes, 16
	if five {
		bb, qoff = q5KBytes, 48
	}
	w, x, bsums = w[:nb*bb], x[:nb*qkK], bsums[:nb*16]
	var acc, accm float32
	for b := range nb {
		blk := w[b*bb : (b+1)*bb]
		dd := d[b] * FP16ToFP32(u16le(blk))
		dmin := d[b] * FP16ToFP32(u16le(blk[2:]))
		sc, m := k4ScalesMins(blk[4:16])
		qs, xs, bs := blk[qoff:qoff+128], x[qkK*b:qkK*(b+1)], bsums[16*b:16*b+16]
		var isum, msum int32
		for j := range 8 {
			var dot int32
			for k := range 32 {
				q := qs[32*(j/2)+k]
				if j&1 == 1 {
					q >>= 4
				}
				q &= 15
				if five {
					q |= (blk[16+k] >> j & 1) << 4
				}
				dot += int32(q) * int32(xs[32*j+k])
			}
			isum += sc[j] * dot
			msum += m[j] * (int32(bs[2*j]) + int32(bs[2*j+1]))
		}
		acc = fma32(float32(isum), dd, acc)
		accm = fma32(float32(msum), dmin, accm)
	}
	return acc - accm
}

// dotQ6_KSeq is the row-sequential dot of a Q6_K row with Q8_K
// activations: per super-block the exact integer sum over the 16
// sub-blocks of scale * (dot of the quants minus 32 with x), the offset
// taken off through the 16-sums, scaled once into the accumulator.
func dotQ6_KSeq(w []byte, x []int8, d []float32, bsums []int16) float32 {
	nb := len(d)
	w, x, bsums = w[:nb*q6KBytes], x[:nb*qkK], bsums[:nb*16]
	var acc float32
	for b := range nb {
		blk := w[b*q6KBytes : (b+1)*q6KBytes]
		dd := d[b] * FP16ToFP32(u16le(blk[208:]))
		ql, qh, sc, xs := blk[0:128], blk[128:192], blk[192:208], x[qkK*b:qkK*(b+1)]
		var isum int32
		for i := range 16 {
			h, k, e0 := i/8, i%8/2, 16*(i%2)
			var dot int32
			for e := e0; e < e0+16; e++ {
				lo := ql[64*h+32*(k&1)+e] >> (4 * (k >> 1)) & 15
				hi := qh[32*h+e] >> (2 * k) & 3
				dot += int32(lo|hi<<4) * int32(xs[16*i+e-e0])
			}
			isum += int32(int8(sc[i])) * (dot - 32*int32(bsums[16*b+i]))
		}
		acc = fma32(float32(isum), dd, acc)
	}
	return acc
}

// dotQ2_KSeq is the row-sequential dot of a Q2_K row with Q8_K
// activations: per super-block the exact integer sums over the 16
// sub-blocks of scale * dot and of min * 16-sum, each scaled once into
// its own accumulator (the mins one subtracted at the end).
func dotQ2_KSeq(w []byte, x []int8, d []float32, bsums []int16) float32 {
	nb := len(d)
	w, x, bsums = w[:nb*q2KBytes], x[:nb*qkK], bsums[:nb*16]
	var acc, accm float32
	for b := range nb {
		blk := w[b*q2KBytes : (b+1)*q2KBytes]
		dd := d[b] * FP16ToFP32(u16le(blk[80:]))
		dmin := d[b] * FP16ToFP32(u16le(blk[82:]))
		sc, qs, xs := blk[0:16], blk[16:80], x[qkK*b:qkK*(b+1)]
		var isum, msum int32
		for i := range 16 {
			c := i / 2 // chunk of 32: half c/4, quarter c%4
			var dot int32
			for l := 16 * (i % 2); l < 16*(i%2)+16; l++ {
				dot += int32(qs[32*(c/4)+l]>>(2*(c%4))&3) * int32(xs[32*c+l])
			}
			isum += int32(sc[i]&15) * dot
			msum += int32(sc[i]>>4) * int32(bsums[16*b+i])
		}
		acc = fma32(float32(isum), dd, acc)
		accm = fma32(float32(msum), dmin, accm)
	}
	return acc - accm
}

// dotQ3_KSeq is dotQ6_KSeq for Q3_K rows: quants minus 4 (the offset
// taken off through the 16-sums), scales minus 32.
func dotQ3_KSeq(w []byte, x []int8, d []float32, bsums []int16) float32 {
	nb := len(d)
	w, x, bsums = w[:nb*q3KBytes], x[:nb*qkK], bsums[:nb*16]
	var acc float32
	for b := range nb {
		blk := w[b*q3KBytes : (b+1)*q3KBytes]
		dd := d[b] * FP16ToFP32(u16le(blk[108:]))
		hm, qs, sc, xs := blk[0:32], blk[32:96], q3KScales(blk[96:108]), x[qkK*b:qkK*(b+1)]
		var isum int32
		for i := range 16 {
			c := i / 2 // chunk of 32: half c/4, quarter c%4
			var dot int32
			for l := 16 * (i % 2); l < 16*(i%2)+16; l++ {
				q := qs[32*(c/4)+l]>>(2*(c%4))&3 | (hm[l]>>c&1)<<2
				dot += int32(q) * int32(xs[32*c+l])
			}
			isum += (int32(sc[i]) - 32) * (dot - 4*int32(bsums[16*b+i]))
		}
		acc = fma32(float32(isum), dd, acc)
	}
	return acc
}

// dotIQ4_XSSeq is the row-sequential dot of an IQ4_XS row with Q8_K
// activations: per super-block the exact integer sum over the 8
// sub-blocks of (scale - 32) * (dot of the levels with x), scaled once.
func dotIQ4_XSSeq(w []byte, x []int8, d []float32) float32 {
	nb := len(d)
	w, x = w[:nb*iq4XSBytes], x[:nb*qkK]
	var acc float32
	for b := range nb {
		blk := w[b*iq4XSBytes : (b+1)*iq4XSBytes]
		dd := d[b] * FP16ToFP32(u16le(blk))
		xs := x[qkK*b : qkK*(b+1)]
		var isum int32
		for j := range 8 {
			qs := blk[8+16*j : 8+16*j+16]
			var dot int32
			for l, q := range qs {
				dot += int32(iq4nlValues[q&15])*int32(xs[32*j+l]) + int32(iq4nlValues[q>>4])*int32(xs[32*j+16+l])
			}
			isum += int32(iq4XSScale(blk, j)-32) * dot
		}
		acc = fma32(float32(isum), dd, acc)
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
			switch nk := cols / qkK; w.Type {
			case Q4_K:
				out[i*rows+r] = dotQ4_KSeq(row, a.qK[i*cols:(i+1)*cols], a.dK[i*nk:(i+1)*nk], a.bsumsK[i*cols/16:(i+1)*cols/16])
				continue
			case Q5_K:
				out[i*rows+r] = dotQ5_KSeq(row, a.qK[i*cols:(i+1)*cols], a.dK[i*nk:(i+1)*nk], a.bsumsK[i*cols/16:(i+1)*cols/16])
				continue
			case Q6_K:
				out[i*rows+r] = dotQ6_KSeq(row, a.qK[i*cols:(i+1)*cols], a.dK[i*nk:(i+1)*nk], a.bsumsK[i*cols/16:(i+1)*cols/16])
				continue
			case Q2_K:
				out[i*rows+r] = dotQ2_KSeq(row, a.qK[i*cols:(i+1)*cols], a.dK[i*nk:(i+1)*nk], a.bsumsK[i*cols/16:(i+1)*cols/16])
				continue
			case Q3_K:
				out[i*rows+r] = dotQ3_KSeq(row, a.qK[i*cols:(i+1)*cols], a.dK[i*nk:(i+1)*nk], a.bsumsK[i*cols/16:(i+1)*cols/16])
				continue
			case IQ4_XS:
				out[i*rows+r] = dotIQ4_XSSeq(row, a.qK[i*cols:(i+1)*cols], a.dK[i*nk:(i+1)*nk])
				continue
			}
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

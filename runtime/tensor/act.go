package tensor

import (
	"fmt"
	"math"
	"unsafe"
)

// Activations are up to Cap input vectors of Cols elements, prepared for
// the fast kernels (MatMulAct): the float32 values as given, and, computed
// on first use and reused until the next Set, the same values quantized to
// 8 bits for integer dot products:
//
//   - blocks of 32 with an FP16 scale (kept as float32), for Q8_0 and
//     Q4_0 weights: element = q * d, d = max|x|/127 rounded to FP16,
//     q = round-to-even(x * 127/max|x|), as llama.cpp's quantize_row_q8_0;
//   - blocks of 256 (ggml's Q8_K: float32 scale, the element of largest
//     magnitude maps to -127, plus sums of each 16 quants), for the
//     K-quant (Q2_K to Q6_K) and IQ4_XS weights.
//
// One Activations typically feeds several matrices (Q, K and V read the
// same normed input), so each form is quantized once per Set. An
// Activations is not safe for concurrent Set; the kernels only read it.
type Activations struct {
	Cols, Cap int
	n         int
	x         []float32 // borrowed, n*Cols

	q32        []int8    // [Cap*Cols] quants, blocks of 32
	d32        []float32 // [Cap*Cols/32] block scales
	d32x4      []float32 // d32 of each group of 4 vectors, interleaved: [group][block][4]
	s32        []int32   // 8 * (sum of each block's quants), for batches (Q4_0's -8 offset)
	s8f        []float32 // the same as float32, for the one-vector Q4_0 kernel
	q32p       []int8    // q32 arranged in pairs of blocks for Q4_0 (arrangeQ4Pairs), pairStride per vector
	pairStride int
	okS        bool // s32 and s8f are up to date
	ok32       bool
	// The VNNI batch kernels' inputs (batch_amd64.go), by Q4_0 (0) and
	// Q8_0 (1): scales and offset corrections by groups of 8 vectors; the
	// K-quants' (batch_k_amd64.go).
	x8     [2]batchX8Acts
	bK2    []int16 // for Q4_K: per vector [Cols/32] sums of each sub-block's quants
	okB2   bool
	cK     []int32   // for Q6_K and IQ4_XS: per vector [Cols/16] -cKOff times each 16-sum
	cKOff  int32     // 0: cK not up to date
	qK     []int8    // [Cap*Cols] quants, blocks of 256
	dK     []float32 // [Cap*Cols/256] block scales
	bsumsK []int16   // [Cap*Cols/16] sums of each 16 quants
	okK    bool
	hasQ32 bool // Cols is a whole number of 32-blocks
	hasQK  bool // Cols is a whole number of 256-blocks
}

// NewActivations allocates room for up to capacity vectors of cols elements.
func NewActivations(capacity, cols int) *Activations {
	if capacity < 0 || cols < 0 {
		panic(fmt.Sprintf("tensor: NewActivations(%d, %d)", capacity, cols))
	}
	a := &Activations{Cols: cols, Cap: capacity, hasQ32: cols%32 == 0, hasQK: cols%qkK == 0}
	if a.hasQ32 {
		a.q32 = alignedInt8(capacity * cols)
		a.d32 = make([]float32, capacity*cols/32)
		a.d32x4 = make([]float32, capacity*cols/32)
		a.s32 = make([]int32, capacity*cols/32)
		a.s8f = make([]float32, capacity*cols/32)
		a.pairStride = (cols/32 + 1) / 2 * 64
		a.q32p = alignedInt8(capacity * a.pairStride)
	}
	if a.hasQK {
		k := a.capK()
		a.qK = alignedInt8(k * cols)
		a.dK = make([]float32, k*cols/qkK)
		a.bsumsK = make([]int16, k*cols/16)
	}
	a.allocBatch()
	return a
}

// Set makes x (n vectors of Cols elements, back to back) the current input.
// x is borrowed until the next Set and must not change while in use.
func (a *Activations) Set(x []float32, n int) {
	if n < 0 || n > a.Cap || len(x) != n*a.Cols {
		panic(fmt.Sprintf("tensor: Activations.Set: len(x)=%d n=%d, holds up to %d vectors of %d", len(x), n, a.Cap, a.Cols))
	}
	a.x, a.n = x, n
	a.ok32, a.okK, a.okS = false, false, false
	a.x8[0].ok, a.x8[1].ok, a.okB2, a.cKOff = false, false, false, 0
}

// capK is the vectors the K-quant forms hold room for: Cap rounded up to
// four, so that a batch kernel that takes vectors four at a time can run
// a last, short four whole (the padding's values are stale or zero, and
// what is computed from them is thrown away).
func (a *Activations) capK() int { return (a.Cap + 3) &^ 3 }

// N is the number of vectors set.
func (a *Activations) N() int { return a.n }

// Vectors is the current input as Set gave it (n vectors of Cols).
func (a *Activations) Vectors() []float32 { return a.x[:a.n*a.Cols] }

// prepare quantizes the current input into the form weights of type t
// need, unless already done since the last Set.
func (a *Activations) prepare(t Type) {
	switch t {
	case Q8_0, Q4_0:
		if !a.ok32 {
			if !a.hasQ32 {
				panic(fmt.Sprintf("tensor: %d columns are not whole 32-blocks", a.Cols))
			}
			m := a.n * a.Cols
			quantizeQ32(a.x[:m], a.q32[:m], a.d32[:m/32])
			nb := a.Cols / 32
			for g := 0; g+4 <= a.n; g += 4 {
				for b := range nb {
					for t := range 4 {
						a.d32x4[(g*nb)+4*b+t] = a.d32[(g+t)*nb+b]
					}
				}
			}
			a.ok32 = true
		}
	}
	if t == Q4_0 && !a.okS {
		m := a.n * a.Cols
		for b := range m / 32 {
			var s int32
			for _, q := range a.q32[32*b : 32*b+32] {
				s += int32(q)
			}
			a.s32[b] = 8 * s
			a.s8f[b] = float32(8 * s)
		}
		for i := range a.n {
			arrangeQ4Pairs(a.q32[i*a.Cols:(i+1)*a.Cols], a.q32p[i*a.pairStride:(i+1)*a.pairStride])
		}
		a.okS = true
	}
	switch t {
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS:
		if !a.okK {
			if !a.hasQK {
				panic(fmt.Sprintf("tensor: %d columns are not whole 256-blocks", a.Cols))
			}
			m := a.n * a.Cols
			quantizeQ8K(a.x[:m], a.qK[:m], a.dK[:m/qkK], a.bsumsK[:m/16])
			a.okK = true
		}
	}
	if usesBatchForm(t, a.n) {
		a.prepareBatch(t)
	}
}

// quantizeQ32Generic quantizes x into blocks of 32 as llama.cpp does at
// run time (ggml-cpu's x86 quantize_row_q8_0), so that both round the same
// activations to the same quants: with amax = max|x|, the scale is
// d = amax/127 rounded to FP16 (block_q8_0 stores it so, and the dot
// products multiply it back as float32), and q = round-to-even(x * (127/amax))
// with the multiplier from amax itself, not 1/d. All in float32. It is the
// reference for the assembly versions (which round the same way:
// cvtps2dq, FCVTNS, and the hardware's FP16 conversion).
func quantizeQ32Generic(x []float32, q []int8, d []float32) {
	for b := range d {
		xb := x[32*b : 32*b+32]
		qb := q[32*b : 32*b+32]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		d[b] = FP16ToFP32(FP32ToFP16(amax / 127))
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for j, v := range xb {
			qb[j] = int8(math.RoundToEven(float64(float32(v * id))))
		}
	}
}

// quantizeQ8KGeneric quantizes x into Q8_K blocks of 256 exactly as encodeQ8_K
// (ggml's quantize_row_q8_K_ref), into separate arrays.
func quantizeQ8KGeneric(x []float32, q []int8, d []float32, bsums []int16) {
	for b := range d {
		xb := x[qkK*b : qkK*b+qkK]
		qb := q[qkK*b : qkK*b+qkK]
		var amax, m float32
		for _, v := range xb {
			if a := abs32(v); a > amax {
				amax, m = a, v
			}
		}
		if amax == 0 {
			d[b] = 0
			clear(qb)
			clear(bsums[16*b : 16*b+16])
			continue
		}
		iscale := -127 / m
		for j, v := range xb {
			qb[j] = int8(min(127, nearest(iscale*v)))
		}
		d[b] = 1 / iscale
		for j := range 16 {
			var s int16
			for _, v := range qb[16*j : 16*j+16] {
				s += int16(v)
			}
			bsums[16*b+j] = s
		}
	}
}

// MatMulAct multiplies w by the vectors in a, like MatMul: out[i*w.Rows+r]
// = dot(row r of w, vector i of a); len(out) must be a.N()*w.Rows and
// a.Cols w.Cols. Quantized weights are dotted against the quantized
// activations with integer arithmetic per block (Q8_0 and Q4_0 against
// 32-blocks, K-quants against Q8_K) and float32 scaling; float weights
// against the float32 values with FMA.
//
// The summation order depends only on the type and the number of
// vectors: a batch of 8 or more vectors against Q8_0/Q4_0 uses the
// row-sequential form (batch.go), smaller batches the lane form of the
// one-vector kernels, and float weights in groups of four vectors a
// different float order. So results are bit-identical across pools, and
// across the assembly and generic kernels for quantized types, and agree
// with MatMul within the activations' quantization error. Rows are split
// across p's workers (p may be nil); it allocates nothing.
func MatMulAct(p *Pool, out []float32, w Matrix, a *Activations) {
	if _, _, ok := layout(w.Type); !ok || w.Type == Q8_K {
		panic("tensor: MatMulAct of unsupported type " + w.Type.String())
	}
	n := a.n
	if a.Cols != w.Cols || len(out) != n*w.Rows || len(w.Data) != w.Rows*w.RowBytes() {
		panic(fmt.Sprintf("tensor: MatMulAct: %dx%d %v with %d data bytes, %d vectors of %d, len(out)=%d",
			w.Rows, w.Cols, w.Type, len(w.Data), n, a.Cols, len(out)))
	}
	a.prepare(w.Type)
	if p.Threads() == 1 || w.Rows < 2 || w.Rows*w.Cols*n < splitWork {
		matMulActRows(out, w, a, 0, w.Rows)
		return
	}
	// Rows are handed out in chunks from a shared counter rather than as
	// one fixed share per worker, so a worker slowed by anything else on
	// its core (or a busier cache) does not hold the others up.
	// Chunks are whole groups of 8 rows (the interleaved batch kernels'
	// unit), of 32 in the batch form: where a chunk ended 8 or 16 rows past
	// a group of 32, those rows took the narrower Q4_K kernels (32000 x
	// 2048 at 4 and 8 vectors on two threads: 1.75-1.81 -> 1.60-1.73 ms,
	// 2.24-2.32 -> 1.99-2.21).
	chunk := (w.Rows + 16*p.threads - 1) / (16 * p.threads)
	chunk = (chunk + 7) / 8 * 8
	if usesBatchForm(w.Type, n) {
		chunk = (chunk + batchChunkMin - 1) / batchChunkMin * batchChunkMin
	}
	p.mu.Lock()
	p.actJob.out, p.actJob.w, p.actJob.a, p.actJob.chunk = out, w, a, chunk
	r := p.eachLocked(p.threads, (w.Rows+chunk-1)/chunk, p.actFn)
	p.actJob.out, p.actJob.w, p.actJob.a = nil, Matrix{}, nil
	p.mu.Unlock()
	if r != nil {
		panic(r)
	}
}

// batchChunkMin is the fewest rows MatMulAct hands a worker in the batch
// form, and its chunks are multiples of it: the widest batch kernels take
// 32 rows (Q4_K with AVX-512), and a chunk of 8 runs the 8-row ones. A
// 256 x 2048 Q4_K matrix (a GQA model's K or V) from memory at 3 vectors
// took 49-54 µs on two threads in chunks of 8 against 27-30 on one thread
// (AMD EPYC, 2026-12-06).
const batchChunkMin = 32

// actJob holds MatMulAct's arguments in the Pool (see matJob); its items
// (Pool.Each) are chunks of chunk rows.
type actJob struct {
	out   []float32
	w     Matrix
	a     *Activations
	chunk int
}

// rows computes chunk i's rows.
func (j *actJob) rows(_, i int) {
	lo := i * j.chunk
	matMulActRows(j.out, j.w, j.a, lo, min(j.w.Rows, lo+j.chunk))
}

// actRowTile is how many rows run against all vectors before moving on:
// a tile of rows stays in L1/L2 while the vectors stream past it.
const actRowTile = 4

// floatRowTile is actRowTile for float weights (F32, F16, BF16).
const floatRowTile = 32

// floatVectorsApart is the most bytes of F32 weights that matMulActRows
// multiplies one vector at a time (a variable: the tests set it to 0).
var floatVectorsApart = 1 << 20

// matMulActRows computes rows [lo, hi) of MatMulAct.
func matMulActRows(out []float32, w Matrix, a *Activations, lo, hi int) {
	if usesBatchForm(w.Type, a.n) {
		matMulBatchRows(out, w, a, lo, hi)
		return
	}
	rows, cols, n := w.Rows, w.Cols, a.n
	rb := w.RowBytes()
	if n == 1 && dotRows(w, a, 0, lo, hi, out[lo:hi]) {
		return
	}
	var o4 [4]float32
	tile := actRowTile
	if w.Type.BlockSize() == 1 {
		// Float activations are 4 bytes an element: keep a group of four
		// vectors in L1 across more rows (whose weights sit in L2).
		tile = floatRowTile
	}
	// An F32 matrix that stays in L2 (a tiny model's) goes to the
	// four-row kernel one vector at a time: its rows come from cache
	// either way, and the four-vector kernel's call a row costs more
	// than it saves (64x64, 4 vectors, AVX-512 machine: 854 -> 358 ns);
	// a larger one is read once for four vectors. Where both kernels sum
	// in the float order (amd64), the bits are the same either way.
	four := !floatOrderEverywhere || w.Type != F32 || rows*rb > floatVectorsApart
	eight := four && cols > 0 && hasDot8(w.Type)
	var o8 [8]float32
	for r0 := lo; r0 < hi; r0 += tile {
		r1 := min(hi, r0+tile)
		i := 0
		// Eight or four vectors at a time where a kernel decodes the row
		// once for them; the rest one by one.
		for ; i+8 <= n && eight; i += 8 {
			for r := r0; r < r1; r++ {
				dot8(w.Type, w.Data[r*rb:(r+1)*rb], a, i, cols, &o8)
				for t := range 8 {
					out[(i+t)*rows+r] = o8[t]
				}
			}
		}
		for ; i+4 <= n && four; i += 4 {
			for r := r0; r < r1; r++ {
				row := w.Data[r*rb : (r+1)*rb]
				if !dot4(w.Type, row, a, i, cols, &o4) {
					for t := range 4 {
						o4[t] = dotAct(w.Type, row, a, i+t, cols)
					}
				}
				for t := range 4 {
					out[(i+t)*rows+r] = o4[t]
				}
			}
		}
		for ; i < n; i++ {
			// Two vectors a call where a kernel loads the rows once for
			// both (AVX-512; the bits of one at a time).
			if !four && i+1 < n && dotRowsPair(w, a, i, r0, r1, out[i*rows+r0:i*rows+r1], out[(i+1)*rows+r0:(i+1)*rows+r1]) {
				i++
				continue
			}
			if dotRows(w, a, i, r0, r1, out[i*rows+r0:i*rows+r1]) {
				continue
			}
			for r := r0; r < r1; r++ {
				out[i*rows+r] = dotAct(w.Type, w.Data[r*rb:(r+1)*rb], a, i, cols)
			}
		}
	}
}

// dotAct is the dot product of one encoded row with vector i of a.
func dotAct(t Type, row []byte, a *Activations, i, cols int) float32 {
	switch t {
	case Q8_0:
		return dotQ8_0(row, a.q32[i*cols:(i+1)*cols], a.d32[i*cols/32:(i+1)*cols/32])
	case Q4_0:
		return dotQ4_0(row, a.q32p[i*a.pairStride:(i+1)*a.pairStride], a.d32[i*cols/32:(i+1)*cols/32], a.s8f[i*cols/32:(i+1)*cols/32])
	case Q4_K:
		return dotQ4_K(row, a.qK[i*cols:(i+1)*cols], a.dK[i*cols/qkK:(i+1)*cols/qkK], a.bsumsK[i*cols/16:(i+1)*cols/16])
	case Q5_K:
		return dotQ5_K(row, a.qK[i*cols:(i+1)*cols], a.dK[i*cols/qkK:(i+1)*cols/qkK], a.bsumsK[i*cols/16:(i+1)*cols/16])
	case Q6_K:
		return dotQ6_K(row, a.qK[i*cols:(i+1)*cols], a.dK[i*cols/qkK:(i+1)*cols/qkK])
	case Q2_K:
		return dotQ2_K(row, a.qK[i*cols:(i+1)*cols], a.dK[i*cols/qkK:(i+1)*cols/qkK], a.bsumsK[i*cols/16:(i+1)*cols/16])
	case Q3_K:
		return dotQ3_K(row, a.qK[i*cols:(i+1)*cols], a.dK[i*cols/qkK:(i+1)*cols/qkK])
	case IQ4_XS:
		return dotIQ4_XS(row, a.qK[i*cols:(i+1)*cols], a.dK[i*cols/qkK:(i+1)*cols/qkK])
	case F32:
		return dotF32Row(row, a.x[i*cols:(i+1)*cols])
	case F16:
		return dotF16Row(row, a.x[i*cols:(i+1)*cols])
	case BF16:
		return dotBF16Row(row, a.x[i*cols:(i+1)*cols])
	}
	panic("tensor: dotAct of unsupported type " + t.String())
}

// alignedInt8 returns n int8s starting on a 64-byte boundary, so that the
// kernels' 32-byte loads of quants never straddle a cache line.
func alignedInt8(n int) []int8 {
	b := make([]int8, n+63)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
	return b[off : off+n : off+n]
}

// QuantizeQ32 quantizes activations x (whole blocks of 32) into quants q
// and block scales d exactly as MatMulAct does for Q8_0 and Q4_0 weights,
// for other backends (strata/runtime/gpu) to feed the same integers to
// their block dots.
func QuantizeQ32(x []float32, q []int8, d []float32) {
	if len(x)%32 != 0 || len(q) < len(x) || len(d) < len(x)/32 {
		panic(fmt.Sprintf("tensor: QuantizeQ32: %d floats into %d quants and %d scales", len(x), len(q), len(d)))
	}
	quantizeQ32(x, q[:len(x)], d[:len(x)/32])
}

// QuantizeQ8K quantizes activations x (whole blocks of 256) into Q8_K
// quants q, block scales d and the sums of every 16 quants, exactly as
// MatMulAct does for K-quant weights (see QuantizeQ32).
func QuantizeQ8K(x []float32, q []int8, d []float32, bsums []int16) {
	if len(x)%qkK != 0 || len(q) < len(x) || len(d) < len(x)/qkK || len(bsums) < len(x)/16 {
		panic(fmt.Sprintf("tensor: QuantizeQ8K: %d floats into %d quants, %d scales and %d sums", len(x), len(q), len(d), len(bsums)))
	}
	quantizeQ8K(x, q[:len(x)], d[:len(x)/qkK], bsums[:len(x)/16])
}

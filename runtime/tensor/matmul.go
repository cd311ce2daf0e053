package tensor

import "fmt"

// chunkElems is how many elements the reference kernels dequantize at a
// time into a stack buffer: one K-quant super-block, eight 32-blocks.
const chunkElems = 256

// vecTile is how many input vectors MatMul dots against each decoded chunk,
// so that a row is decoded once per vecTile vectors.
const vecTile = 8

// rowTile is how many rows MatMul runs against one tile of vectors before
// moving on, so that the tile of x stays in cache.
const rowTile = 16

// dotF32 returns the dot product of a and b[:len(a)], with four partial
// sums so the loop is not one long chain of dependent adds. The summation
// order is fixed: every kernel that reduces through dotF32 rounds the same.
func dotF32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// DotRow returns the dot product of one encoded row of type t with x; the
// row holds len(x) elements. It decodes the row 256 elements at a time into
// a stack buffer and allocates nothing. It panics if t cannot be decoded or
// the sizes disagree (a programming error, not a data error).
func DotRow(t Type, row []byte, x []float32) float32 {
	bs, bb, ok := layout(t)
	if !ok {
		panic("tensor: DotRow of unsupported type " + t.String())
	}
	if len(x)%bs != 0 || len(x)/bs*bb != len(row) {
		panic(fmt.Sprintf("tensor: DotRow: %d bytes of %v is not %d elements", len(row), t, len(x)))
	}
	var buf [chunkElems]float32
	var sum float32
	for off := 0; off < len(x); off += chunkElems {
		n := min(chunkElems, len(x)-off)
		decode(t, row[off/bs*bb:(off+n)/bs*bb], buf[:n])
		sum += dotF32(buf[:n], x[off:off+n])
	}
	return sum
}

// MatVec sets out[r] = dot(row r of w, x) for every row r; len(x) must be
// w.Cols and len(out) w.Rows. Rows are split across p's workers (p may be
// nil). It allocates nothing, and out[r] is bit-identical to
// DotRow(w.Type, w.Row(r), x) whatever the pool.
func MatVec(p *Pool, out []float32, w Matrix, x []float32) {
	MatMul(p, out, w, x, 1)
}

// splitWork is the least number of multiply-adds a matrix product hands
// to the pool's workers. Below it (a small model's step: stories260K's
// output matrix is 32K a vector, 256K for a speculative check of 8 rows)
// waking them costs more than the product, and they spin after it, on
// cores that a pipeline's next stage, the API or its client on the same
// host want (at 64K, 2 threads, a node checking stories260K's guesses
// ran at a third to a half of its one-token speed; at 256K at 0.8-1.0×;
// tinyllama-1.1b decode, whose matrices are all larger, did not move);
// each output is the same either way.
var splitWork = 1 << 18 // a variable: the tests split every product

// MatMul multiplies w by n input vectors stored back to back in x
// (len n*w.Cols): out[i*w.Rows+r] = dot(row r of w, x[i*w.Cols:(i+1)*w.Cols]).
// len(out) must be n*w.Rows. Each row is decoded once per 8 vectors, and
// every output is bit-identical to the corresponding DotRow. Rows are split
// across p's workers (p may be nil); it allocates nothing.
func MatMul(p *Pool, out []float32, w Matrix, x []float32, n int) {
	if _, _, ok := layout(w.Type); !ok {
		panic("tensor: MatMul of unsupported type " + w.Type.String())
	}
	if n < 0 || len(x) != n*w.Cols || len(out) != n*w.Rows || len(w.Data) != w.Rows*w.RowBytes() {
		panic(fmt.Sprintf("tensor: MatMul: %dx%d %v with %d data bytes, len(x)=%d, len(out)=%d, n=%d",
			w.Rows, w.Cols, w.Type, len(w.Data), len(x), len(out), n))
	}
	if p.Threads() == 1 || w.Rows < 2 || w.Rows*w.Cols*n < splitWork {
		matMulRows(out, w, x, n, 0, w.Rows)
		return
	}
	p.mu.Lock()
	p.job = matJob{out: out, w: w, x: x, n: n}
	r := p.runLocked(w.Rows, p.jobFn)
	p.job = matJob{} // do not keep the caller's buffers alive
	p.mu.Unlock()
	if r != nil {
		panic(r)
	}
}

// matJob holds MatMul's arguments in the Pool so that dispatching it needs
// no per-call closure (and so no allocation).
type matJob struct {
	out []float32
	w   Matrix
	x   []float32
	n   int
}

func (j *matJob) run(lo, hi int) { matMulRows(j.out, j.w, j.x, j.n, lo, hi) }

// matMulRows computes rows [lo, hi) of MatMul.
func matMulRows(out []float32, w Matrix, x []float32, n, lo, hi int) {
	t, cols, rows := w.Type, w.Cols, w.Rows
	bs, bb, _ := layout(t)
	rowBytes := cols / bs * bb
	var buf [chunkElems]float32
	for r0 := lo; r0 < hi; r0 += rowTile {
		r1 := min(hi, r0+rowTile)
		for v0 := 0; v0 < n; v0 += vecTile {
			nv := min(vecTile, n-v0)
			for r := r0; r < r1; r++ {
				row := w.Data[r*rowBytes : (r+1)*rowBytes]
				var acc [vecTile]float32
				for off := 0; off < cols; off += chunkElems {
					m := min(chunkElems, cols-off)
					decode(t, row[off/bs*bb:(off+m)/bs*bb], buf[:m])
					for v := range nv {
						xv := x[(v0+v)*cols+off:]
						acc[v] += dotF32(buf[:m], xv[:m])
					}
				}
				for v := range nv {
					out[(v0+v)*rows+r] = acc[v]
				}
			}
		}
	}
}

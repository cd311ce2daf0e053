package tensor

import (
	"fmt"
	"math"
	"testing"
)

// matTypes are the weight types with a column count that exercises whole
// 256-element chunks and a shorter tail chunk.
var matTypes = []struct {
	t    Type
	cols int
}{
	{F32, 259},
	{F16, 259},
	{BF16, 259},
	{Q8_0, 288},
	{Q4_0, 288},
	{Q4_K, 512},
	{Q5_K, 512},
	{Q6_K, 768},
	{Q2_K, 512},
	{Q3_K, 768},
	{IQ4_XS, 512},
}

// dotRelTol bounds |kernel - exact| / sum|w_i*x_i|, where exact is the
// float64 dot of the dequantized weights: the kernels sum in float32 (64
// terms per partial sum, then a few partial and chunk sums), whose rounding
// is at most a few hundred ulps of float32 relative to sum|w_i*x_i|.
const dotRelTol = 2e-5

// randomMatrix quantizes random weights into a rows x cols Matrix and
// returns it with its dequantized values.
func randomMatrix(t testing.TB, typ Type, rows, cols int, seed uint64) (Matrix, []float32) {
	t.Helper()
	w := testData("normal", rows*cols, seed)
	data, err := Quantize(typ, w)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	deq := make([]float32, rows*cols)
	for r := range rows {
		m.EmbedRow(r, deq[r*cols:(r+1)*cols])
	}
	return m, deq
}

func checkDot(t *testing.T, what string, got float32, w, x []float32) {
	t.Helper()
	var exact, mag float64
	for i := range x {
		p := float64(w[i]) * float64(x[i])
		exact += p
		mag += math.Abs(p)
	}
	if d := math.Abs(float64(got) - exact); d > dotRelTol*mag+1e-30 {
		t.Fatalf("%s = %g, want %g (error %.3g > %.3g)", what, got, exact, d, dotRelTol*mag)
	}
}

func TestMatVecMatMul(t *testing.T) {
	const rows = 67 // odd, so pool chunks are uneven
	pools := []struct {
		name string
		p    *Pool
	}{{"nil", nil}, {"1", NewPool(1)}, {"2", NewPool(2)}, {"3", NewPool(3)}, {"8", NewPool(8)}}
	defer func() {
		for _, p := range pools {
			p.p.Close()
		}
	}()
	for _, mt := range matTypes {
		t.Run(mt.t.String(), func(t *testing.T) {
			cols := mt.cols
			w, deq := randomMatrix(t, mt.t, rows, cols, uint64(mt.t))
			const maxN = 17
			x := testData("uniform", maxN*cols, 11)

			// DotRow against the float64 reference.
			ref := make([]float32, maxN*rows)
			for i := range maxN {
				for r := range rows {
					xi := x[i*cols : (i+1)*cols]
					ref[i*rows+r] = DotRow(mt.t, w.Row(r), xi)
					checkDot(t, fmt.Sprintf("DotRow(row %d, vec %d)", r, i), ref[i*rows+r], deq[r*cols:(r+1)*cols], xi)
				}
			}
			// MatVec and MatMul must equal DotRow bit for bit, on any pool.
			for _, pl := range pools {
				out := make([]float32, rows)
				MatVec(pl.p, out, w, x[:cols])
				for r := range rows {
					if out[r] != ref[r] {
						t.Fatalf("pool %s: MatVec row %d = %g, DotRow %g", pl.name, r, out[r], ref[r])
					}
				}
				for _, n := range []int{0, 1, 3, 8, 9, 17} {
					out := make([]float32, n*rows)
					MatMul(pl.p, out, w, x[:n*cols], n)
					for i := range out {
						if out[i] != ref[i] {
							t.Fatalf("pool %s n=%d: MatMul[%d] = %g, DotRow %g", pl.name, n, i, out[i], ref[i])
						}
					}
				}
			}
		})
	}
}

func TestMatrixRow(t *testing.T) {
	w, deq := randomMatrix(t, Q4_0, 3, 64, 1)
	if got := len(w.Row(2)); got != 36 || w.RowBytes() != 36 {
		t.Fatalf("row bytes %d", got)
	}
	dst := make([]float32, 64)
	w.EmbedRow(1, dst)
	for i := range dst {
		if dst[i] != deq[64+i] {
			t.Fatalf("EmbedRow(1)[%d] = %g, want %g", i, dst[i], deq[64+i])
		}
	}
}

func TestKernelPanics(t *testing.T) {
	w, _ := randomMatrix(t, Q8_0, 4, 32, 1)
	tests := []struct {
		name string
		f    func()
	}{
		{"MatVec short x", func() { MatVec(nil, make([]float32, 4), w, make([]float32, 31)) }},
		{"MatVec short out", func() { MatVec(nil, make([]float32, 3), w, make([]float32, 32)) }},
		{"MatMul n", func() { MatMul(nil, make([]float32, 8), w, make([]float32, 32), 2) }},
		{"MatVec unsupported", func() { MatVec(nil, nil, Matrix{Type: IQ2_XS}, nil) }},
		{"MatVec short data", func() {
			MatVec(nil, make([]float32, 4), Matrix{Type: Q8_0, Rows: 4, Cols: 32, Data: w.Data[:100]}, make([]float32, 32))
		}},
		{"DotRow size", func() { DotRow(Q8_0, w.Row(0), make([]float32, 64)) }},
		{"DotRow unsupported", func() { DotRow(IQ2_XS, nil, nil) }},
		{"EmbedRow size", func() { w.EmbedRow(0, make([]float32, 31)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tc.f()
		})
	}
}

func TestKernelsNoAlloc(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	for _, mt := range matTypes {
		t.Run(mt.t.String(), func(t *testing.T) {
			w, _ := randomMatrix(t, mt.t, 256, mt.cols, 3)
			x := testData("uniform", 4*mt.cols, 4)
			out := make([]float32, 4*256)
			emb := make([]float32, mt.cols)
			if a := testing.AllocsPerRun(20, func() {
				MatVec(p, out[:256], w, x[:mt.cols])
				MatMul(p, out, w, x, 4)
				MatVec(nil, out[:256], w, x[:mt.cols])
				DotRow(w.Type, w.Row(5), x[:mt.cols])
				w.EmbedRow(7, emb)
			}); a != 0 {
				t.Errorf("%v allocations per run", a)
			}
		})
	}
}

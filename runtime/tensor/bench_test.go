package tensor

import (
	"fmt"
	"testing"
)

// BenchmarkMatVec measures MatVec over a 2048x2048 matrix per type; bytes
// are weight bytes, so MB/s is the weight bandwidth (decode's bound).
func BenchmarkMatVec(b *testing.B) {
	const dim = 2048
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		for _, mt := range matTypes {
			b.Run(fmt.Sprintf("%v/threads=%d", mt.t, threads), func(b *testing.B) {
				w, _ := randomMatrix(b, mt.t, dim, dim, 1)
				x := testData("uniform", dim, 2)
				out := make([]float32, dim)
				b.SetBytes(int64(len(w.Data)))
				b.ReportAllocs()
				for b.Loop() {
					MatVec(p, out, w, x)
				}
			})
		}
		p.Close()
	}
}

// BenchmarkMatMul measures a batch of 16 vectors (prefill) on 2 threads.
func BenchmarkMatMul(b *testing.B) {
	const dim, n = 2048, 16
	p := NewPool(2)
	defer p.Close()
	for _, mt := range matTypes {
		b.Run(mt.t.String(), func(b *testing.B) {
			w, _ := randomMatrix(b, mt.t, dim, dim, 1)
			x := testData("uniform", n*dim, 2)
			out := make([]float32, n*dim)
			b.SetBytes(int64(len(w.Data)))
			b.ReportAllocs()
			for b.Loop() {
				MatMul(p, out, w, x, n)
			}
		})
	}
}

// BenchmarkMatMulActStream measures decode's case for a batch: 5632x2048
// matrices (tinyllama's FFN) against 1 to 8 vectors, cycling through
// more of them than the last-level cache holds, so every product reads
// its weights from memory; one thread (the pool's other threads share the
// bandwidth), and a pool of two (/threads=2); bytes are weight bytes.
func BenchmarkMatMulActStream(b *testing.B) {
	const rows, cols, mats = 5632, 2048, 12 // 78 MB of Q4_K
	for _, t := range []Type{Q4_K, Q6_K, Q8_0} {
		ws := make([]Matrix, mats)
		for i := range ws {
			ws[i], _ = randomMatrix(b, t, rows, cols, uint64(i+1))
		}
		for _, threads := range []int{1, 2} {
			var p *Pool
			name := ""
			if threads > 1 {
				p, name = NewPool(threads), fmt.Sprintf("/threads=%d", threads)
			}
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8} {
				b.Run(fmt.Sprintf("%v/n=%d%s", t, n, name), func(b *testing.B) {
					a := NewActivations(n, cols)
					a.Set(testData("uniform", n*cols, 2), n)
					out := make([]float32, n*rows)
					b.SetBytes(int64(len(ws[0].Data)))
					i := 0
					for b.Loop() {
						MatMulAct(p, out, ws[i%mats], a)
						i++
					}
				})
			}
			if p != nil {
				p.Close()
			}
		}
	}
}

// BenchmarkQuantize measures encoding 64K elements per type.
func BenchmarkQuantize(b *testing.B) {
	const n = 1 << 16
	x := testData("normal", n, 3)
	for _, qt := range quantTypes {
		b.Run(qt.t.String(), func(b *testing.B) {
			dst := make([]byte, n/qt.t.BlockSize()*qt.t.BlockBytes())
			b.SetBytes(4 * n)
			b.ReportAllocs()
			for b.Loop() {
				if err := QuantizeInto(qt.t, x, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPoolRun measures the dispatch cost of an almost empty Run.
func BenchmarkPoolRun(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	s := &summer{x: make([]float32, 64), part: make([]float32, 64)}
	fn := s.run
	b.ReportAllocs()
	for b.Loop() {
		p.Run(64, fn)
	}
}

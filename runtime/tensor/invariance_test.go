package tensor

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// Batch invariance: with every kernel set this CPU has, each vector of a
// MatMulAct of up to InvariantVectors vectors gets the very bits it gets
// alone, for every weight type, on one thread and on a pool, whatever
// the vectors set before them left.
func TestMatMulActBatchInvariant(t *testing.T) {
	orig, apart := Kernels(), floatVectorsApart
	defer func() {
		floatVectorsApart = apart
		if err := SetKernels(orig); err != nil {
			t.Fatal(err)
		}
	}()
	// 43 rows: four-row float kernels leave three to the one-row kernel;
	// float rows of 283 (8 rounds of 32, one of 16, one of 8, 3) and 7
	// take every loop of the float kernels.
	const rows, maxN = 43, 17
	if InvariantVectors(Q8_0) < 7 || InvariantVectors(F32) < 3 || InvariantVectors(Q4_K) < maxN {
		t.Fatalf("InvariantVectors: Q8_0 %d, F32 %d, Q4_K %d", InvariantVectors(Q8_0), InvariantVectors(F32), InvariantVectors(Q4_K))
	}
	types := slices.Clone(matTypes)
	for _, cols := range []int{283, 7} {
		for _, ft := range []Type{F32, F16, BF16} {
			if cols == 283 || ft == F32 {
				types = append(types, struct {
					t    Type
					cols int
				}{ft, cols})
			}
		}
	}
	// The avx512 set twice: with both forms of the Q8_0 lane dots (64- and
	// 32-byte registers), whichever the CPU's vendor picks (flipQ8Form).
	var sets []impl
	for _, im := range implementations {
		sets = append(sets, im)
		if im.name == "avx512" {
			sets = append(sets, impl{"avx512-q8-other", nil})
		}
	}
	for _, im := range sets {
		name := strings.TrimSuffix(im.name, "-q8-other")
		if err := SetKernels(name); err != nil {
			t.Fatal(err)
		}
		if name != im.name {
			flipQ8Form()
		}
		for _, threads := range []int{1, 2} {
			// Small F32 matrices take the four-row kernel a vector at a
			// time; with two threads here the four-vector kernel too.
			floatVectorsApart = apart
			if threads == 2 {
				floatVectorsApart = 0
			}
			pool := NewPool(threads)
			for _, mt := range types {
				m, _ := randomMatrix(t, mt.t, rows, mt.cols, 1)
				x := testData("normal", maxN*mt.cols, 2)
				alone := make([]float32, maxN*rows)
				a1 := NewActivations(1, mt.cols)
				for i := range maxN {
					a1.Set(x[i*mt.cols:(i+1)*mt.cols], 1)
					MatMulAct(pool, alone[i*rows:(i+1)*rows], m, a1)
				}
				// One Activations for every n, first set to poison (NaN,
				// infinities, huge values) for all maxN vectors: a batch
				// kernel that runs a short last four padded reads the
				// stale vectors past n, which must change nothing.
				a := NewActivations(maxN, mt.cols)
				poison := testData("normal", maxN*mt.cols, 3)
				for i := range poison {
					switch i % 5 {
					case 0:
						poison[i] = float32(math.NaN())
					case 1:
						poison[i] = float32(math.Inf(1 - 2*(i%2)))
					case 2:
						poison[i] *= 1e30
					}
				}
				scratch := make([]float32, maxN*rows)
				for n := 2; n <= min(InvariantVectors(mt.t), maxN); n++ {
					a.Set(poison, maxN)
					MatMulAct(pool, scratch, m, a)
					a.Set(x[:n*mt.cols], n)
					out := make([]float32, n*rows)
					MatMulAct(pool, out, m, a)
					for i := range out {
						if math.Float32bits(out[i]) != math.Float32bits(alone[i]) {
							t.Fatalf("%s, %d threads, %v: vector %d row %d of %d vectors is %v, alone %v",
								im.name, threads, mt.t, i/rows, i%rows, n, out[i], alone[i])
						}
					}
				}
			}
			pool.Close()
		}
		if name != im.name {
			flipQ8Form()
		}
	}
}

// TestMatMulActHintedRowGroups runs matrices tall enough that a thread
// computes several row groups (the later ones hinted into the cache by
// the kernel while it computes the one before: batchQ4Kx32px4's and
// batchQ6Kx8x4's pf), with 16-, 8- and single-row rests, at every count
// of vectors up to 17, and checks each output against the generic code
// bit for bit. Hints change no result; what this guards is the arithmetic
// of the hinted ranges (a range past the matrix, a share for no four).
// Q3_K and IQ4_XS take the Q6_K kernels.
func TestMatMulActHintedRowGroups(t *testing.T) {
	const rows, cols, maxN = 32*5 + 16 + 8 + 3, qkK * 5, 17
	p := NewPool(2)
	defer p.Close()
	for _, typ := range []Type{Q4_K, Q6_K, Q3_K, IQ4_XS} {
		w, _ := randomMatrix(t, typ, rows, cols, 7)
		x := testData("normal", maxN*cols, 8)
		for n := 1; n <= maxN; n++ {
			a := NewActivations(n, cols)
			want := make([]float32, n*rows)
			withGeneric(func() {
				a.Set(x[:n*cols], n)
				MatMulAct(nil, want, w, a)
			})
			eachImpl(t, func(t *testing.T) {
				for _, pl := range []*Pool{nil, p} {
					a.Set(x[:n*cols], n)
					got := make([]float32, n*rows)
					MatMulAct(pl, got, w, a)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v, %d vectors: out[%d] = %g, generic %g", typ, n, i, got[i], want[i])
						}
					}
				}
			})
		}
	}
}

package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// eachImpl runs f once per available kernel set (generic first), with that
// set active.
func eachImpl(t *testing.T, f func(t *testing.T)) {
	for _, im := range implementations {
		t.Run(im.name, func(t *testing.T) {
			im.use(true)
			defer im.use(false)
			f(t)
		})
		if im.name == "avx512" {
			// The other form of the Q8_0 lane dots than the CPU's vendor
			// picks (q8x4Wide: 64- or 32-byte registers).
			t.Run("avx512-q8-other", func(t *testing.T) {
				im.use(true)
				defer im.use(false)
				flipQ8Form()
				defer flipQ8Form()
				f(t)
			})
		}
	}
}

// withGeneric runs f with the generic kernels active.
func withGeneric(f func()) {
	implementations[0].use(true)
	defer implementations[0].use(false)
	f()
}

// quantTol bounds |dot - exact| / sum|w_i*x_i| for the quantized dots,
// where exact is the float64 dot of the dequantized weights with the
// dequantized activations: the integer parts are exact, so only the float32
// scaling and accumulation round (a few ulps per block, at most a few
// thousand blocks).
const quantTol = 1e-5

// actQuantTol bounds the same error against the float activations: the
// activations' 8-bit quantization adds at most half a step (max|x|/254 per
// element) of error.
const actQuantTol = 2e-2

type dotCase struct {
	t   Type
	blk int // elements per block
}

var quantDotTypes = []dotCase{{Q8_0, 32}, {Q4_0, 32}, {Q2_K, 256}, {Q3_K, 256}, {Q4_K, 256}, {Q5_K, 256}, {Q6_K, 256}, {IQ4_XS, 256}}

// actsFor quantizes x as one vector with the generic quantizers.
func actsFor(x []float32) *Activations {
	a := NewActivations(1, len(x))
	a.Set(x, 1)
	withGeneric(func() {
		if a.hasQ32 {
			a.prepare(Q4_0)
		}
		if a.hasQK {
			a.prepare(Q4_K)
		}
	})
	return a
}

// dequantActs returns the values the quantized activations stand for.
func dequantActs(t Type, a *Activations) []float32 {
	out := make([]float32, a.Cols)
	for i := range out {
		if t == Q8_0 || t == Q4_0 {
			out[i] = float32(a.q32[i]) * a.d32[i/32]
		} else {
			out[i] = float32(a.qK[i]) * a.dK[i/qkK]
		}
	}
	return out
}

func dotErr(got float32, w, x []float32) (err, mag float64) {
	var exact float64
	for i := range w {
		p := float64(w[i]) * float64(x[i])
		exact += p
		mag += math.Abs(p)
	}
	return math.Abs(float64(got) - exact), mag
}

// The generic quantized dots compute the dot of the dequantized weights
// with the dequantized activations, and approximate the float dot.
func TestQuantDotGenericAccuracy(t *testing.T) {
	for _, dc := range quantDotTypes {
		for _, dist := range []string{"uniform", "normal", "sparse", "zero", "positive"} {
			t.Run(dc.t.String()+"/"+dist, func(t *testing.T) {
				cols := 8 * dc.blk
				w, deq := randomMatrix(t, dc.t, 1, cols, uint64(dc.t)+3)
				x := testData(dist, cols, 21)
				a := actsFor(x)
				var got float32
				withGeneric(func() { got = dotAct(dc.t, w.Data, a, 0, cols) })
				if e, mag := dotErr(got, deq, dequantActs(dc.t, a)); e > quantTol*mag+1e-30 {
					t.Errorf("dot = %g: error %.3g against the dequantized dot > %.3g", got, e, quantTol*mag)
				}
				if e, mag := dotErr(got, deq, x); e > actQuantTol*mag+1e-30 {
					t.Errorf("dot = %g: error %.3g against the float dot > %.3g", got, e, actQuantTol*mag)
				}
			})
		}
	}
}

// Every implementation of the quantized dots equals the generic one bit for
// bit, for every block count from 0 up (tails of unrolled loops included).
func TestQuantDotImplementations(t *testing.T) {
	for _, dc := range quantDotTypes {
		maxBlocks := 2048 / dc.blk
		w, _ := randomMatrix(t, dc.t, 1, maxBlocks*dc.blk, uint64(dc.t)+5)
		x := testData("normal", maxBlocks*dc.blk, 8)
		a := actsFor(x)
		want := make([]float32, maxBlocks+1)
		bs, bb, _ := layout(dc.t)
		dot := func(nb int) float32 {
			n := nb * dc.blk
			sub := *a
			sub.Cols = n
			return dotAct(dc.t, w.Data[:n/bs*bb], &sub, 0, n)
		}
		withGeneric(func() {
			for nb := range want {
				want[nb] = dot(nb)
			}
		})
		t.Run(dc.t.String(), func(t *testing.T) {
			eachImpl(t, func(t *testing.T) {
				for nb := range want {
					if got := dot(nb); math.Float32bits(got) != math.Float32bits(want[nb]) {
						t.Fatalf("%d blocks: %g, generic %g", nb, got, want[nb])
					}
				}
			})
		})
	}
}

// Extreme quants: Q8_0 weights of -128 (valid in a file, never written by
// our encoder) and activations at ±127 must not saturate the int16 pair
// sums of the assembly.
func TestQuantDotExtremes(t *testing.T) {
	const nb = 9
	w := make([]byte, nb*q80Bytes)
	x := make([]float32, nb*32)
	for b := range nb {
		blk := w[b*q80Bytes:]
		u16 := FP32ToFP16(0.5)
		blk[0], blk[1] = byte(u16), byte(u16>>8)
		for j := range 32 {
			blk[2+j] = 0x80 // -128
			if (j+b)%3 == 0 {
				blk[2+j] = 0x7f
			}
			x[b*32+j] = -1
			if j%2 == 0 {
				x[b*32+j] = 1
			}
		}
	}
	a := actsFor(x)
	var want float32
	withGeneric(func() { want = dotQ8_0(w, a.q32, a.d32) })
	eachImpl(t, func(t *testing.T) {
		if got := dotQ8_0(w, a.q32, a.d32); got != want {
			t.Fatalf("%g, generic %g", got, want)
		}
	})
}

// The float dots agree with the generic one within float rounding, for
// every length 0..300.
func TestFloatDotImplementations(t *testing.T) {
	for _, ft := range []Type{F32, F16, BF16} {
		t.Run(ft.String(), func(t *testing.T) {
			w, deq := randomMatrix(t, ft, 1, 300, uint64(ft)+1)
			x := testData("uniform", 300, 5)
			eachImpl(t, func(t *testing.T) {
				for n := 0; n <= 300; n++ {
					got := dotAct(ft, w.Data[:n*(w.RowBytes()/300)], &Activations{x: x[:n], Cols: n}, 0, n)
					if e, mag := dotErr(got, deq[:n], x[:n]); e > dotRelTol*mag+1e-30 {
						t.Fatalf("n=%d: %g, error %.3g > %.3g", n, got, e, dotRelTol*mag)
					}
				}
			})
		})
	}
}

// The 32-block activation quantizer: every implementation matches the
// generic one exactly, on every distribution (zero blocks included).
func TestQuantizeQ32Implementations(t *testing.T) {
	for _, dist := range []string{"uniform", "normal", "sparse", "zero", "positive", "negative", "constant", "magnitudes"} {
		x := testData(dist, 32*37, 17)
		// Blocks from 1e-7 to 1e3 in size: scales from FP16 subnormals
		// (amax/127 under 6.1e-5) to large normals.
		if dist == "magnitudes" {
			x = testData("uniform", 32*37, 17)
			for i := range x {
				x[i] *= float32(math.Pow(10, -7+10*float64(i/32)/36))
			}
		}
		// Halfway cases: values that scale to k+0.5 exactly.
		if dist == "constant" {
			for i := range 32 {
				x[i] = float32(i) - 15.5
			}
		}
		wq, wd := make([]int8, len(x)), make([]float32, len(x)/32)
		quantizeQ32Generic(x, wq, wd)
		// The quants are x in steps of amax/127, rounded to nearest; the
		// scale is that step within FP16's relative precision (2^-11,
		// or a subnormal's absolute 2^-25).
		for b := range wd {
			var amax float64
			for _, v := range x[32*b : 32*b+32] {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			step := amax / 127
			if e := math.Abs(float64(wd[b]) - step); e > step/2048+0x1p-25 {
				t.Fatalf("%s: block %d scale %g, step %g", dist, b, wd[b], step)
			}
			for j := 32 * b; j < 32*b+32; j++ {
				if d := math.Abs(float64(wq[j])*step - float64(x[j])); d > step*0.5000001 {
					t.Fatalf("%s: element %d = %g, quantized %d * %g", dist, j, x[j], wq[j], step)
				}
			}
		}
		t.Run(dist, func(t *testing.T) {
			eachImpl(t, func(t *testing.T) {
				for nb := 0; nb <= 37; nb++ {
					q, d := make([]int8, 32*nb), make([]float32, nb)
					quantizeQ32(x[:32*nb], q, d)
					for i := range q {
						if q[i] != wq[i] {
							t.Fatalf("%d blocks: q[%d] = %d, generic %d", nb, i, q[i], wq[i])
						}
					}
					for i := range d {
						if math.Float32bits(d[i]) != math.Float32bits(wd[i]) {
							t.Fatalf("%d blocks: d[%d] = %g, generic %g", nb, i, d[i], wd[i])
						}
					}
				}
			})
		})
	}
}

// quantizeQ8K is encodeQ8_K in separate arrays.
func TestQuantizeQ8KMatchesEncode(t *testing.T) {
	x := testData("normal", 3*qkK, 4)
	x = append(x, make([]float32, qkK)...) // a zero block
	enc, _ := Quantize(Q8_K, x)
	q, d, bs := make([]int8, len(x)), make([]float32, len(x)/qkK), make([]int16, len(x)/16)
	quantizeQ8K(x, q, d, bs)
	for b := range d {
		blk := enc[b*q8KBytes:]
		if math.Float32bits(d[b]) != math.Float32bits(math.Float32frombits(uint32(blk[0])|uint32(blk[1])<<8|uint32(blk[2])<<16|uint32(blk[3])<<24)) {
			t.Fatalf("block %d: d differs", b)
		}
		for j := range qkK {
			if q[b*qkK+j] != int8(blk[4+j]) {
				t.Fatalf("block %d: q[%d] differs", b, j)
			}
		}
		for j := range 16 {
			if bs[b*16+j] != int16(u16le(blk[260+2*j:])) {
				t.Fatalf("block %d: bsums[%d] differs", b, j)
			}
		}
	}
}

func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 100000 {
		a := float32(r.NormFloat64())
		b := float32(r.NormFloat64())
		c := float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-20))
		if i%3 == 0 { // products near -c, where cancellation is exact
			c = -a * b
		}
		got := fma32(a, b, c)
		// The exact value in big-float terms: a*b is exact in float64, and
		// the sum rounded to float32 from an exact rational is checked by
		// bracketing: got must be the float32 nearest a*b+c.
		exactP := float64(a) * float64(b)
		lo, hi := math.Nextafter32(got, float32(math.Inf(-1))), math.Nextafter32(got, float32(math.Inf(1)))
		// distances computed as (p + c) - v with p exact: use two-sum pieces.
		dist := func(v float32) float64 { return math.Abs((exactP - float64(v)) + float64(c)) }
		if dist(lo) < dist(got) || dist(hi) < dist(got) {
			t.Fatalf("fma32(%g, %g, %g) = %g, a neighbour is nearer", a, b, c, got)
		}
	}
}

// MatMulAct is within quantization error of MatMul, identical for every
// pool and implementation (bit-exact for quantized types), and handles
// batches whose size is not a multiple of the row tile.
func TestMatMulAct(t *testing.T) {
	const rows = 67
	pools := []*Pool{nil, NewPool(1), NewPool(2), NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, mt := range matTypes {
		t.Run(mt.t.String(), func(t *testing.T) {
			cols := mt.cols
			if mt.t.BlockSize() == 1 {
				cols = 259
			}
			w, deq := randomMatrix(t, mt.t, rows, cols, uint64(mt.t)+9)
			const maxN = 9
			x := testData("uniform", maxN*cols, 12)
			a := NewActivations(maxN, cols)
			var want []float32
			for _, n := range []int{0, 1, 2, 5, 8, 9} {
				a.Set(x[:n*cols], n)
				withGeneric(func() {
					want = make([]float32, n*rows)
					MatMulAct(nil, want, w, a)
				})
				tol := dotRelTol
				if mt.t.BlockSize() > 1 {
					tol = actQuantTol
				}
				for i := range n {
					for r := range rows {
						if e, mag := dotErr(want[i*rows+r], deq[r*cols:(r+1)*cols], x[i*cols:(i+1)*cols]); e > tol*mag+1e-30 {
							t.Fatalf("n=%d vec %d row %d: %g, error %.3g > %.3g", n, i, r, want[i*rows+r], e, tol*mag)
						}
					}
				}
				eachImpl(t, func(t *testing.T) {
					for pi, p := range pools {
						a.Set(x[:n*cols], n) // quantize again with this implementation
						out := make([]float32, n*rows)
						MatMulAct(p, out, w, a)
						for i := range out {
							same := out[i] == want[i]
							if mt.t.BlockSize() == 1 {
								e, mag := dotErr(out[i], deq[(i%rows)*cols:(i%rows+1)*cols], x[(i/rows)*cols:(i/rows+1)*cols])
								same = e <= dotRelTol*mag+1e-30
							}
							if !same {
								t.Fatalf("pool %d n=%d: out[%d] = %g, generic %g", pi, n, i, out[i], want[i])
							}
						}
					}
				})
			}
		})
	}
}

func TestMatMulActNoAlloc(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	for _, mt := range matTypes {
		t.Run(mt.t.String(), func(t *testing.T) {
			w, _ := randomMatrix(t, mt.t, 256, mt.cols, 3)
			x := testData("uniform", 9*mt.cols, 4)
			out := make([]float32, 9*256)
			a := NewActivations(9, mt.cols)
			if n := testing.AllocsPerRun(20, func() {
				a.Set(x[:4*mt.cols], 4)
				MatMulAct(p, out[:4*256], w, a)
				a.Set(x, 9) // the batch kernels for Q8_0 and Q4_0
				MatMulAct(p, out, w, a)
				a.Set(x[:mt.cols], 1)
				MatMulAct(nil, out[:256], w, a)
			}); n != 0 {
				t.Errorf("%v allocations per run", n)
			}
		})
	}
}

func TestMatMulActPanics(t *testing.T) {
	w, _ := randomMatrix(t, Q8_0, 4, 64, 1)
	a := NewActivations(2, 64)
	for name, f := range map[string]func(){
		"set too many":  func() { a.Set(make([]float32, 3*64), 3) },
		"set wrong len": func() { a.Set(make([]float32, 63), 1) },
		"cols": func() {
			b := NewActivations(1, 32)
			b.Set(make([]float32, 32), 1)
			MatMulAct(nil, make([]float32, 4), w, b)
		},
		"out":  func() { a.Set(make([]float32, 64), 1); MatMulAct(nil, make([]float32, 3), w, a) },
		"type": func() { MatMulAct(nil, nil, Matrix{Type: Q8_K}, a) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}

// BenchmarkDot measures one row of 4096 elements per type and kernel set;
// bytes are weight bytes, so the rate is the weight bandwidth one core's
// kernel sustains from cache.
func BenchmarkDot(b *testing.B) {
	const cols = 4096
	for _, mt := range matTypes {
		w, _ := randomMatrix(b, mt.t, 1, cols, 1)
		a := NewActivations(1, cols)
		a.Set(testData("uniform", cols, 2), 1)
		a.prepare(mt.t)
		for _, im := range implementations {
			b.Run(fmt.Sprintf("%v/%s", mt.t, im.name), func(b *testing.B) {
				im.use(true)
				defer im.use(false)
				b.SetBytes(int64(len(w.Data)))
				b.ReportAllocs()
				loopCPU(b, func() { dotAct(mt.t, w.Data, a, 0, cols) })
			})
		}
	}
}

// BenchmarkMatMulAct measures a 2048x2048 matrix against 1 vector (decode)
// and 16 (a prefill tile) per type on 1 and 2 threads; bytes are weight
// bytes.
func BenchmarkMatMulAct(b *testing.B) {
	const dim = 2048
	for _, n := range []int{1, 16} {
		for _, threads := range []int{1, 2} {
			p := NewPool(threads)
			for _, mt := range matTypes {
				b.Run(fmt.Sprintf("%v/n=%d/threads=%d", mt.t, n, threads), func(b *testing.B) {
					w, _ := randomMatrix(b, mt.t, dim, dim, 1)
					x := testData("uniform", n*dim, 2)
					out := make([]float32, n*dim)
					a := NewActivations(n, dim)
					b.SetBytes(int64(len(w.Data)))
					b.ReportAllocs()
					for b.Loop() {
						a.Set(x, n)
						MatMulAct(p, out, w, a)
					}
				})
			}
			p.Close()
		}
	}
}

// BenchmarkMatMulActTinyF32 measures F32 products of a tiny model's
// shapes (stories260K: the 512x64 output head, a 172x64 FFN matrix and
// its 64x172 down matrix, whose rows end in a tail of 4), for the one
// vector of a decode step and the 2-3 of a checked guess, one thread:
// there the per-output reductions cost about as much as the products.
func BenchmarkMatMulActTinyF32(b *testing.B) {
	for _, shape := range [][2]int{{512, 64}, {172, 64}, {64, 172}} {
		rows, cols := shape[0], shape[1]
		w, _ := randomMatrix(b, F32, rows, cols, 1)
		for _, n := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("%dx%d/n=%d", rows, cols, n), func(b *testing.B) {
				x := testData("uniform", n*cols, 2)
				out := make([]float32, n*rows)
				a := NewActivations(n, cols)
				a.Set(x, n)
				for b.Loop() {
					MatMulAct(nil, out, w, a)
				}
			})
		}
	}
}

// BenchmarkMatMulActBatch measures the batch kernels: a 256x2048 matrix
// against 64 vectors (prefill) per type with a batch form, per kernel set
// (on a CPU with AVX-512 the Q4_K and Q6_K batches of every set use the
// row-sequential form: generic Go where its kernel is not that set's), one
// thread; bytes are weight bytes.
func BenchmarkMatMulActBatch(b *testing.B) {
	const rows, cols, n = 256, 2048, 64
	for _, t := range []Type{Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		w, _ := randomMatrix(b, t, rows, cols, 1)
		x := testData("uniform", n*cols, 2)
		out := make([]float32, n*rows)
		a := NewActivations(n, cols)
		for _, im := range implementations {
			b.Run(fmt.Sprintf("%v/%s", t, im.name), func(b *testing.B) {
				im.use(true)
				defer im.use(false)
				b.SetBytes(int64(len(w.Data)))
				b.ReportAllocs()
				for b.Loop() {
					a.Set(x, n)
					MatMulAct(nil, out, w, a)
				}
			})
		}
	}
}

// BenchmarkQuantizeActs measures quantizing one 4096-vector per form.
func BenchmarkQuantizeActs(b *testing.B) {
	const cols = 4096
	x := testData("normal", cols, 3)
	a := NewActivations(1, cols)
	for _, t := range []Type{Q8_0, Q4_K} {
		for _, im := range implementations {
			b.Run(fmt.Sprintf("%v/%s", t, im.name), func(b *testing.B) {
				im.use(true)
				defer im.use(false)
				b.SetBytes(4 * cols)
				for b.Loop() {
					a.Set(x, 1)
					a.prepare(t)
				}
			})
		}
	}
}

// BenchmarkDot4 measures one row of 4096 elements against four vectors,
// per quantized type, with the multi-vector kernel where there is one.
func BenchmarkDot4(b *testing.B) {
	const cols = 4096
	for _, mt := range []Type{Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		w, _ := randomMatrix(b, mt, 1, cols, 1)
		a := NewActivations(4, cols)
		a.Set(testData("uniform", 4*cols, 2), 4)
		a.prepare(mt)
		var out [4]float32
		for _, im := range implementations {
			b.Run(mt.String()+"/"+im.name, func(b *testing.B) {
				im.use(true)
				defer im.use(false)
				b.SetBytes(int64(len(w.Data)))
				b.ReportAllocs()
				loopCPU(b, func() {
					if !dot4(mt, w.Data, a, 0, cols, &out) {
						for t := range 4 {
							out[t] = dotAct(mt, w.Data, a, t, cols)
						}
					}
				})
			})
		}
	}
}

// Dot and Axpy agree with plain loops within float rounding for every
// length 0..100, with every implementation.
func TestDotAxpy(t *testing.T) {
	a := testData("uniform", 100, 1)
	b := testData("uniform", 100, 2)
	eachImpl(t, func(t *testing.T) {
		for n := 0; n <= 100; n++ {
			got := Dot(a[:n], b[:n])
			if e, mag := dotErr(got, a[:n], b[:n]); e > dotRelTol*mag+1e-30 {
				t.Fatalf("Dot n=%d: %g, error %.3g", n, got, e)
			}
			dst := append([]float32(nil), b[:n]...)
			Axpy(dst, 0.37, a[:n])
			for i := range dst {
				want := float64(b[i]) + 0.37*float64(a[i])
				if d := math.Abs(float64(dst[i]) - want); d > 1e-6*(math.Abs(want)+1) {
					t.Fatalf("Axpy n=%d [%d]: %g, want %g", n, i, dst[i], want)
				}
			}
		}
	})
	for name, f := range map[string]func(){
		"Dot":  func() { Dot(a[:3], b[:4]) },
		"Axpy": func() { Axpy(a[:3], 1, b[:4]) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic on mismatched lengths", name)
				}
			}()
			f()
		}()
	}
}

// Large batches (the interleaved kernels: several tiles along the row,
// more vectors than one accumulator pass, a partial group of rows) equal
// the generic row-sequential form bit for bit.
func TestMatMulActBatch(t *testing.T) {
	const rows, n = 21, 70
	for _, typ := range []Type{Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		t.Run(typ.String(), func(t *testing.T) {
			cols := 32 * 37
			if typ.BlockSize() == qkK {
				cols = qkK * 9 // two tiles, the second of one super-block
			}
			w, deq := randomMatrix(t, typ, rows, cols, 4)
			x := testData("normal", n*cols, 6)
			a := NewActivations(n, cols)
			want := make([]float32, n*rows)
			withGeneric(func() {
				a.Set(x, n)
				MatMulAct(nil, want, w, a)
			})
			for i := range want {
				v, r := i/rows, i%rows
				if e, mag := dotErr(want[i], deq[r*cols:(r+1)*cols], x[v*cols:(v+1)*cols]); e > actQuantTol*mag+1e-30 {
					t.Fatalf("out[%d] = %g, error %.3g", i, want[i], e)
				}
			}
			p := NewPool(2)
			defer p.Close()
			eachImpl(t, func(t *testing.T) {
				for _, pl := range []*Pool{nil, p} {
					a.Set(x, n)
					got := make([]float32, n*rows)
					MatMulAct(pl, got, w, a)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("out[%d] = %g, generic %g", i, got[i], want[i])
						}
					}
				}
			})
		})
	}
}

// SwiGLU agrees with the float64 SiLU within 2e-6 relative for every
// implementation and length 0..40, over gates from -100 to 100 (exp's
// clamped range and beyond).
func TestSwiGLUImplementations(t *testing.T) {
	const n = 40
	gate, up := make([]float32, n), testData("uniform", n, 3)
	for i := range gate {
		gate[i] = float32(i-n/2) * 5 * float32(math.Pow(1.1, float64(i%7)))
	}
	gate[3], gate[4], gate[5] = 0, 1e-30, -1e-30
	eachImpl(t, func(t *testing.T) {
		for m := 0; m <= n; m++ {
			out := make([]float32, m)
			SwiGLU(out, gate[:m], up[:m])
			for i := range out {
				g := float64(gate[i])
				want := g / (1 + math.Exp(-g)) * float64(up[i])
				if d := math.Abs(float64(out[i]) - want); d > 2e-6*math.Abs(want)+1e-30 {
					t.Fatalf("n=%d: SwiGLU(%g, %g) = %g, want %g", m, gate[i], up[i], out[i], want)
				}
			}
		}
	})
}

// Batches against rows of random bytes (every quant and scale value a
// file may hold, Q8_0's -128 included; finite fp16 scales) and activations
// quantized to ±127: every implementation equals the generic batch form
// bit for bit (no 16-bit saturation, exact offset corrections).
func TestMatMulActBatchRandomBlocks(t *testing.T) {
	const rows, n = 16, 13
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []Type{Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		t.Run(typ.String(), func(t *testing.T) {
			cols := 32 * 19
			if typ.BlockSize() == qkK {
				cols = qkK * 3
			}
			bs, bb, _ := layout(typ)
			w := Matrix{Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rows*cols/bs*bb)}
			for i := range w.Data {
				w.Data[i] = byte(r.Uint32())
			}
			for i := 0; i < len(w.Data); i += bb {
				switch typ {
				case Q6_K:
					binary.LittleEndian.PutUint16(w.Data[i+208:], FP32ToFP16(float32(r.NormFloat64())*0.01))
				case Q3_K:
					binary.LittleEndian.PutUint16(w.Data[i+108:], FP32ToFP16(float32(r.NormFloat64())*0.01))
				case Q2_K:
					binary.LittleEndian.PutUint16(w.Data[i+80:], FP32ToFP16(float32(r.NormFloat64())*0.01))
					binary.LittleEndian.PutUint16(w.Data[i+82:], FP32ToFP16(float32(r.NormFloat64())*0.01))
				case Q4_K, Q5_K:
					binary.LittleEndian.PutUint16(w.Data[i+2:], FP32ToFP16(float32(r.NormFloat64())*0.01))
					fallthrough
				default:
					binary.LittleEndian.PutUint16(w.Data[i:], FP32ToFP16(float32(r.NormFloat64())*0.01))
				}
			}
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = float32(1 - 2*int(r.Uint32()&1))
			}
			a := NewActivations(n, cols)
			want := make([]float32, n*rows)
			withGeneric(func() {
				a.Set(x, n)
				MatMulAct(nil, want, w, a)
			})
			eachImpl(t, func(t *testing.T) {
				a.Set(x, n)
				got := make([]float32, n*rows)
				MatMulAct(nil, got, w, a)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("out[%d] = %g, generic %g", i, got[i], want[i])
					}
				}
			})
		})
	}
}

// The multi-row kernels (dotRows, decode's Q8_0, Q4_0 and Q4_K path)
// equal dotAct of each row with the generic kernels bit for bit, for
// every block count 1..40 (the groups of 8 blocks, the pairs and a lone
// last block; Q4_K's super-blocks 1..7: its pairs and a lone last one)
// and 1..5 rows.
func TestDotRowsImplementations(t *testing.T) {
	const maxRows = 5
	for _, typ := range []Type{Q8_0, Q4_0, Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			type tc struct {
				w    Matrix
				a    *Activations
				want []float32
			}
			var cases []tc
			maxBlocks := 40
			if typ == Q4_K {
				maxBlocks = 7
			}
			for nb := 1; nb <= maxBlocks; nb++ {
				cols := typ.BlockSize() * nb
				w, _ := randomMatrix(t, typ, maxRows, cols, uint64(nb)+11)
				a := NewActivations(1, cols)
				a.Set(testData("normal", cols, uint64(nb)+13), 1)
				c := tc{w: w, a: a, want: make([]float32, maxRows)}
				withGeneric(func() {
					a.prepare(typ)
					for r := range maxRows {
						c.want[r] = dotAct(typ, w.Row(r), a, 0, cols)
					}
				})
				cases = append(cases, c)
			}
			eachImpl(t, func(t *testing.T) {
				out := make([]float32, maxRows)
				for _, c := range cases {
					for lo := range maxRows {
						for hi := lo + 1; hi <= maxRows; hi++ {
							clear(out)
							if !dotRows(c.w, c.a, 0, lo, hi, out[:hi-lo]) {
								for r := lo; r < hi; r++ {
									out[r-lo] = dotAct(typ, c.w.Row(r), c.a, 0, c.w.Cols)
								}
							}
							for r := lo; r < hi; r++ {
								if math.Float32bits(out[r-lo]) != math.Float32bits(c.want[r]) {
									t.Fatalf("%d blocks, rows [%d,%d), row %d: %g, generic %g", c.w.Cols/typ.BlockSize(), lo, hi, r, out[r-lo], c.want[r])
								}
							}
						}
					}
				}
			})
		})
	}
}

// The four-row float kernels (dotRows of F32, F16 and BF16) give every
// row the bits the one-row kernel of the same implementation gives it,
// for widths with and without a tail past the last 8, one group of four
// and several, and a last row or three left to the one-row kernel.
// (TestDotRowsPairF32 holds the two-vector kernel to dotRows.)
func TestDotRowsFloat(t *testing.T) {
	const rows = 13
	widths := []int{1, 7, 8, 9, 16, 17, 24, 32, 40, 64, 172, 256, 259}
	for _, ft := range []Type{F32, F16, BF16} {
		t.Run(ft.String(), func(t *testing.T) {
			eachImpl(t, func(t *testing.T) {
				for _, cols := range widths {
					w, _ := randomMatrix(t, ft, rows, cols, uint64(cols)+uint64(ft))
					a := NewActivations(1, cols)
					a.Set(testData("normal", cols, uint64(cols)+7), 1)
					a.prepare(ft)
					want := make([]float32, rows)
					for r := range rows {
						want[r] = dotAct(ft, w.Row(r), a, 0, cols)
					}
					for _, span := range [][2]int{{0, 4}, {0, rows}, {1, 8}, {2, 11}, {5, 12}} {
						lo, hi := span[0], span[1]
						out := make([]float32, hi-lo+1)
						out[hi-lo] = -7
						if !dotRows(w, a, 0, lo, hi, out[:hi-lo]) {
							t.Logf("no four-row %v kernel here", ft)
							return
						}
						if out[hi-lo] != -7 {
							t.Fatalf("cols %d rows [%d,%d): wrote past its rows", cols, lo, hi)
						}
						for r := lo; r < hi; r++ {
							if math.Float32bits(out[r-lo]) != math.Float32bits(want[r]) {
								t.Fatalf("cols %d rows [%d,%d), row %d: %g, one-row kernel %g", cols, lo, hi, r, out[r-lo], want[r])
							}
						}
					}
				}
			})
		})
	}
}

// The four-vector Q8_0 kernel equals dotAct of each vector with the
// generic kernels bit for bit, for every block count 1..20 (pairs and a
// lone last block), both groups of four of eight vectors.
func TestDot4Q8_0(t *testing.T) {
	type tc struct {
		w    Matrix
		a    *Activations
		want [8]float32
	}
	var cases []tc
	for nb := 1; nb <= 20; nb++ {
		cols := 32 * nb
		w, _ := randomMatrix(t, Q8_0, 1, cols, uint64(nb)+17)
		c := tc{w: w, a: NewActivations(8, cols)}
		c.a.Set(testData("normal", 8*cols, uint64(nb)+19), 8)
		withGeneric(func() {
			c.a.prepare(Q8_0)
			for v := range 8 {
				c.want[v] = dotAct(Q8_0, w.Data, c.a, v, cols)
			}
		})
		cases = append(cases, c)
	}
	eachImpl(t, func(t *testing.T) {
		for _, c := range cases {
			c.a.prepare(Q8_0) // the interleaved scales, with this implementation
			for i := 0; i < 8; i += 4 {
				var out [4]float32
				if !dot4(Q8_0, c.w.Data, c.a, i, c.w.Cols, &out) {
					t.Logf("no four-vector Q8_0 kernel here")
					return
				}
				for v := range 4 {
					if math.Float32bits(out[v]) != math.Float32bits(c.want[i+v]) {
						t.Fatalf("%d blocks, vector %d: %g, generic %g", c.w.Cols/32, i+v, out[v], c.want[i+v])
					}
				}
			}
		}
	})
}

// BenchmarkMatVecImpl measures decode's matrix-vector product (one
// vector, one thread, a 1024x4096 matrix: larger than L2, as model
// weights are) per quantized type and kernel set, so that a kernel set's
// one-vector kernels compare with the ones they replace in one run; bytes
// are weight bytes. On Linux it also reports the thread's CPU time per op
// (cpu-ns/op: see loopCPU).
func BenchmarkMatVecImpl(b *testing.B) {
	const rows, cols = 1024, 4096
	for _, t := range []Type{Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		w, _ := randomMatrix(b, t, rows, cols, 1)
		x := testData("uniform", cols, 2)
		out := make([]float32, rows)
		a := NewActivations(1, cols)
		for _, im := range implementations[1:] {
			b.Run(fmt.Sprintf("%v/%s", t, im.name), func(b *testing.B) {
				im.use(true)
				defer im.use(false)
				a.Set(x, 1)
				b.SetBytes(int64(len(w.Data)))
				b.ReportAllocs()
				loopCPU(b, func() { MatMulAct(nil, out, w, a) })
			})
		}
	}
}

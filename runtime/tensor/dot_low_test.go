package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// The four-vector kernels (dot4) equal dotAct of each vector bit for bit,
// for every K-quant and IQ4_XS, on every architecture (the arm64 file has
// its own table), for 1..6 super-blocks and both groups of four of eight
// vectors.
func TestDot4KQuants(t *testing.T) {
	for _, typ := range []Type{Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		t.Run(typ.String(), func(t *testing.T) {
			type tc struct {
				w    Matrix
				a    *Activations
				want [8]float32
			}
			var cases []tc
			for nb := 1; nb <= 6; nb++ {
				cols := nb * qkK
				w, _ := randomMatrix(t, typ, 1, cols, uint64(nb)+3)
				c := tc{w: w, a: NewActivations(8, cols)}
				c.a.Set(testData("normal", 8*cols, uint64(nb)+7), 8)
				withGeneric(func() {
					c.a.prepare(typ)
					for v := range 8 {
						c.want[v] = dotAct(typ, w.Data, c.a, v, cols)
					}
				})
				cases = append(cases, c)
			}
			eachImpl(t, func(t *testing.T) {
				for _, c := range cases {
					for i := 0; i < 8; i += 4 {
						var out [4]float32
						if !dot4(typ, c.w.Data, c.a, i, c.w.Cols, &out) {
							t.Logf("no four-vector kernel for %v here", typ)
							return
						}
						for v := range 4 {
							if math.Float32bits(out[v]) != math.Float32bits(c.want[i+v]) {
								t.Fatalf("%d blocks, vector %d: %g, generic %g", c.w.Cols/qkK, i+v, out[v], c.want[i+v])
							}
						}
					}
				}
			})
		})
	}
}

// Blocks of random bytes (every scale and quant value a file may hold,
// extreme scales included) against activations quantized to ±127: the
// assembly's 16-bit pair sums must not saturate, and one- and
// four-vector kernels must equal the generic dot bit for bit.
func TestLowBitDotRandomBlocks(t *testing.T) {
	const nb = 5
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []Type{Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		t.Run(typ.String(), func(t *testing.T) {
			_, bb, _ := layout(typ)
			w := make([]byte, nb*bb)
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			for b := range nb { // finite fp16 super-scales
				blk := w[b*bb : (b+1)*bb]
				switch typ {
				case Q2_K:
					binary.LittleEndian.PutUint16(blk[80:], FP32ToFP16(0.01))
					binary.LittleEndian.PutUint16(blk[82:], FP32ToFP16(-0.02))
				case Q3_K:
					binary.LittleEndian.PutUint16(blk[108:], FP32ToFP16(0.03))
				case IQ4_XS:
					binary.LittleEndian.PutUint16(blk, FP32ToFP16(-0.004))
				case Q4_K, Q5_K:
					binary.LittleEndian.PutUint16(blk, FP32ToFP16(0.005))
					binary.LittleEndian.PutUint16(blk[2:], FP32ToFP16(-0.03))
				case Q6_K:
					binary.LittleEndian.PutUint16(blk[208:], FP32ToFP16(0.002))
				}
			}
			cols := nb * qkK
			x := make([]float32, 4*cols)
			for i := range x {
				x[i] = float32(1 - 2*int(r.Uint32()&1))
			}
			a := NewActivations(4, cols)
			a.Set(x, 4)
			var want [4]float32
			withGeneric(func() {
				a.prepare(typ)
				for v := range 4 {
					want[v] = dotAct(typ, w, a, v, cols)
				}
			})
			for _, q := range a.qK {
				if q != 127 && q != -127 {
					t.Fatalf("activation quant %d, want ±127", q)
				}
			}
			eachImpl(t, func(t *testing.T) {
				var out [4]float32
				for v := range 4 {
					if got := dotAct(typ, w, a, v, cols); math.Float32bits(got) != math.Float32bits(want[v]) {
						t.Fatalf("vector %d: %g, generic %g", v, got, want[v])
					}
				}
				if dot4(typ, w, a, 0, cols, &out) {
					for v := range 4 {
						if math.Float32bits(out[v]) != math.Float32bits(want[v]) {
							t.Fatalf("four-vector kernel, vector %d: %g, generic %g", v, out[v], want[v])
						}
					}
				}
			})
		})
	}
}

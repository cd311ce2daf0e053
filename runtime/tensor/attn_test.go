package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The attention kernels must give the generic reference's bits in every
// implementation: over head widths 0..N (every tail of the 64-, 32-, 8-
// and 1-element steps), row counts with and without padding between rows.

func randVec(r *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = (r.Float32()*2 - 1) * scale
	}
	return x
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] = %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

func TestDotRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	eachImpl(t, func(t *testing.T) {
		for n := 0; n <= 200; n++ {
			for _, rows := range []int{1, 3, 17, 35} { // 35: two groups of 16 and more (a head of 8)
				for _, pad := range []int{0, 5} {
					stride := n + pad
					q := randVec(r, n, 1)
					kv := randVec(r, rows*stride, 2)
					if rows == 3 || rows == 35 { // zero products, and sums of only signed zeros
						clear(q[:n/2])
						for i := range kv[:stride] {
							kv[i] = float32(math.Copysign(0, -1))
						}
					}
					got := make([]float32, rows)
					DotRows(got, q, kv, stride)
					want := make([]float32, rows)
					dotRowsGeneric(want, q, kv, stride)
					sameBits(t, fmt.Sprintf("n=%d rows=%d stride=%d", n, rows, stride), got, want)
					for i := range rows { // and each is Dot's answer
						if d := Dot(q, kv[i*stride:i*stride+n]); math.Float32bits(d) != math.Float32bits(got[i]) {
							t.Fatalf("n=%d row %d: DotRows %v, Dot %v", n, i, got[i], d)
						}
					}
				}
			}
		}
	})
}

func TestAxpyRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	eachImpl(t, func(t *testing.T) {
		for n := 0; n <= 210; n++ { // 128 + 64 + 8 + 7 reaches every step
			for _, rows := range []int{1, 2, 33} {
				for _, pad := range []int{0, 3} {
					stride := n + pad
					alpha := randVec(r, rows, 1)
					kv := randVec(r, rows*stride, 2)
					dst := randVec(r, n, 1)
					want := append([]float32(nil), dst...)
					AxpyRows(dst, alpha, kv, stride)
					for i, a := range alpha { // row after row, as Axpy would
						axpyGeneric(want, a, kv[i*stride:i*stride+n])
					}
					sameBits(t, fmt.Sprintf("n=%d rows=%d stride=%d", n, rows, stride), dst, want)
				}
			}
		}
	})
}

// TestF16Vec checks the vector conversions against FP16ToFP32 and
// FP32ToFP16 over every half value and over floats around every rounding
// boundary class: normals, subnormals, overflow, infinities and NaNs.
// Each destination of AxpyRowsPair gets AxpyRows's chain, whatever the
// other's weights (heads of 8 take their own kernel).
func TestAxpyRowsPair(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	eachImpl(t, func(t *testing.T) {
		for _, n := range []int{1, 7, 8, 9, 64} {
			for _, rows := range []int{1, 2, 33} {
				for _, pad := range []int{0, 3} {
					stride := n + pad
					a0, a1 := randVec(r, rows, 1), randVec(r, rows, 1)
					a1[0] = float32(math.Copysign(0, -1)) // a signed zero weight in one half only
					kv := randVec(r, rows*stride, 2)
					d0, d1 := randVec(r, n, 1), randVec(r, n, 1)
					w0, w1 := append([]float32(nil), d0...), append([]float32(nil), d1...)
					AxpyRowsPair(d0, d1, a0, a1, kv, stride)
					AxpyRows(w0, a0, kv, stride)
					AxpyRows(w1, a1, kv, stride)
					sameBits(t, fmt.Sprintf("n=%d rows=%d stride=%d dst0", n, rows, stride), d0, w0)
					sameBits(t, fmt.Sprintf("n=%d rows=%d stride=%d dst1", n, rows, stride), d1, w1)
				}
			}
		}
	})
}

func TestAxpyRowsPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	eachImpl(t, func(t *testing.T) {
		for _, k := range []int{1, 2, 3, 4} {
			for _, n := range []int{1, 8, 9, 64} {
				for _, rows := range []int{1, 2, 33} {
					stride := n + 3*(rows%2)
					kv := randVec(r, rows*stride, 2)
					// Every destination in one buffer with a guard after
					// each, so a write past one or to another pair's shows.
					buf := randVec(r, 2*k*(n+1), 1)
					want := append([]float32(nil), buf...)
					var d0, d1, a0, a1 [][]float32
					for p := range k {
						d0 = append(d0, buf[2*p*(n+1):][:n])
						d1 = append(d1, buf[(2*p+1)*(n+1):][:n])
						a0 = append(a0, randVec(r, rows, 1))
						a1 = append(a1, randVec(r, rows, 1))
					}
					a1[k-1][0] = float32(math.Copysign(0, -1)) // a signed zero in one half only
					AxpyRowsPairs(d0, d1, a0, a1, kv, stride)
					for p := range k {
						AxpyRows(want[2*p*(n+1):][:n], a0[p], kv, stride)
						AxpyRows(want[(2*p+1)*(n+1):][:n], a1[p], kv, stride)
					}
					sameBits(t, fmt.Sprintf("k=%d n=%d rows=%d stride=%d", k, n, rows, stride), buf, want)
				}
			}
		}
	})
	for _, bad := range []func(){
		func() { AxpyRowsPairs(nil, nil, nil, nil, nil, 1) },
		func() {
			d, a := [][]float32{make([]float32, 8), make([]float32, 8)}, [][]float32{make([]float32, 2), make([]float32, 3)}
			AxpyRowsPairs(d, d, a, a, make([]float32, 32), 8)
		},
		func() {
			d, a := [][]float32{make([]float32, 8)}, [][]float32{make([]float32, 3)}
			AxpyRowsPairs(d, d, a, a, make([]float32, 23), 8)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("AxpyRowsPairs accepted mismatched arguments")
				}
			}()
			bad()
		}()
	}
}

func TestF16Vec(t *testing.T) {
	halves := make([]uint16, 1<<16)
	for i := range halves {
		halves[i] = uint16(i)
	}
	r := rand.New(rand.NewPCG(7, 8))
	floats := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.99, 65520, -65520, 1e-8, -3e-8, 6e-8, 5.96e-8, 2.98e-8, 2.99e-8,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc12345), 1e-40}
	for range 5000 {
		floats = append(floats, math.Float32frombits(r.Uint32()))
		floats = append(floats, (r.Float32()*2-1)*float32(math.Pow(2, float64(r.IntN(40)-25))))
	}
	eachImpl(t, func(t *testing.T) {
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100, len(halves)} {
			dst := make([]float32, n)
			DecodeF16(dst, halves[:n])
			for i, h := range halves[:n] {
				want := FP16ToFP32(h)
				if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
					want = FP16ToFP32(h | 0x200) // signalling NaNs come back quiet
				}
				if math.Float32bits(dst[i]) != math.Float32bits(want) {
					t.Fatalf("DecodeF16(%#04x) = %#x, want %#x", h, math.Float32bits(dst[i]), math.Float32bits(want))
				}
			}
		}
		for _, n := range []int{0, 1, 7, 8, 15, 40, len(floats)} {
			dst := make([]uint16, n)
			EncodeF16(dst, floats[:n])
			for i, f := range floats[:n] {
				if want := FP32ToFP16(f); dst[i] != want {
					t.Fatalf("EncodeF16(%v = %#x) = %#04x, want %#04x", f, math.Float32bits(f), dst[i], want)
				}
			}
		}
	})
}

func TestSoftmaxScaled(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	eachImpl(t, func(t *testing.T) {
		for n := 1; n <= 300; n++ {
			x := randVec(r, n, 30)
			if n > 3 {
				x[n/2] = float32(math.Inf(-1)) // a masked position
			}
			got := append([]float32(nil), x...)
			SoftmaxScaled(got, 0.125)
			want := append([]float32(nil), x...)
			mx := scaleMaxGeneric(want, 0.125)
			scaleGeneric(want, 1/expSubGeneric(want, mx))
			sameBits(t, fmt.Sprintf("n=%d", n), got, want)

			// And it is a softmax: within float32 rounding of the float64 one.
			ref := make([]float64, n)
			var m, sum float64 = math.Inf(-1), 0
			for i, v := range x {
				ref[i] = float64(v * 0.125)
				m = math.Max(m, ref[i])
			}
			for i := range ref {
				ref[i] = math.Exp(ref[i] - m)
				sum += ref[i]
			}
			for i := range ref {
				if d := math.Abs(float64(got[i]) - ref[i]/sum); d > 1e-6*(ref[i]/sum)+1e-9 {
					t.Fatalf("n=%d [%d]: %v, exact %v", n, i, got[i], ref[i]/sum)
				}
			}
		}
	})
}

func BenchmarkAttnKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const hd, rows = 64, 64
	q, kv, out := randVec(r, hd, 1), randVec(r, rows*hd, 1), make([]float32, rows)
	half := make([]uint16, rows*hd)
	EncodeF16(half, kv)
	q8 := make([]byte, rows*hd/q80Block*q80Bytes)
	EncodeQ8_0(q8, kv)
	for _, im := range implementations {
		im.use(true)
		b.Run("DotRows/"+im.name, func(b *testing.B) {
			b.SetBytes(rows * hd * 4)
			for b.Loop() {
				DotRows(out, q, kv, hd)
			}
		})
		b.Run("AxpyRows/"+im.name, func(b *testing.B) {
			b.SetBytes(rows * hd * 4)
			for b.Loop() {
				AxpyRows(q, out, kv, hd)
			}
		})
		b.Run("DecodeF16/"+im.name, func(b *testing.B) {
			b.SetBytes(rows * hd * 2)
			for b.Loop() {
				DecodeF16(kv, half)
			}
		})
		b.Run("DecodeQ8_0/"+im.name, func(b *testing.B) {
			b.SetBytes(rows * hd / q80Block * q80Bytes)
			for b.Loop() {
				DecodeQ8_0(kv, q8)
			}
		})
		b.Run("Softmax4096/"+im.name, func(b *testing.B) {
			x := randVec(r, 4096, 10)
			y := make([]float32, len(x))
			b.SetBytes(4096 * 4)
			for b.Loop() {
				copy(y, x)
				SoftmaxScaled(y, 0.125)
			}
		})
		im.use(false)
	}
}

// DecodeQ8_0 (the q8_0 KV cache's rows into float32) gives the generic
// decodeQ8_0's bits in every implementation, for 0..40 blocks of random
// quants (-128 included) with every kind of fp16 scale: normal,
// subnormal, zero, infinite and NaN.
func TestDecodeQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const maxBlocks = 40
	src := make([]byte, maxBlocks*q80Bytes)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	special := []uint16{0x3c00, 0x0001, 0x03ff, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfd55}
	for b := range maxBlocks {
		h := FP32ToFP16(float32(r.NormFloat64()) * 0.01)
		if b%3 == 1 {
			h = special[b/3%len(special)]
		}
		src[b*q80Bytes], src[b*q80Bytes+1] = byte(h), byte(h>>8)
	}
	eachImpl(t, func(t *testing.T) {
		for nb := 0; nb <= maxBlocks; nb++ {
			got := make([]float32, nb*q80Block)
			want := make([]float32, nb*q80Block)
			DecodeQ8_0(got, src[:nb*q80Bytes])
			decodeQ8_0(src[:nb*q80Bytes], want)
			sameBits(t, fmt.Sprintf("%d blocks", nb), got, want)
		}
	})
}

package tensor

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// quantTypes are the types Quantize supports, with the round-trip error
// they are held to:
//   - maxErr: |dequant(quant(x)) - x| <= maxErr * max|x| over the block
//     (per element relative to |x| for the float types), from the step
//     size of each encoding: Q8_0 d=amax/127 (half a step plus fp16
//     rounding of d); Q4_0 d=amax/8 (a full step where +amax clips to
//     7d); Q4_K range <= 2*amax in 15 steps plus scale rounding, half a
//     step; Q5_K the same in 31 steps; Q6_K amax/31 per 16 elements, half
//     a step; Q8_K amax/127, half a step. Q2_K, Q3_K and IQ4_XS are
//     least-squares fits, not covers, and held to what ggml's reference
//     quantizers reach on the same data (measured against libggml-base on
//     128K uniform values: max error / block amax 0.42, 0.27 and 0.13
//     where ours reach 0.43, 0.27 and 0.15; relative RMS 0.233, 0.125 and
//     0.065 where ours reach 0.224, 0.118 and 0.062).
//     F16 also has an absolute 2^-25 (half its subnormal spacing).
//   - relRMS: RMS error / RMS(x) on uniform [-1,1] data, about step/sqrt(12).
var quantTypes = []struct {
	t      Type
	maxErr float64
	absErr float64
	relRMS float64
}{
	{F32, 0, 0, 0},
	{F16, 0x1p-11, 0x1p-25, 0.0003},
	{BF16, 0x1p-8, 0, 0.003},
	{Q8_0, 0.0045, 0, 0.005},
	{Q4_0, 0.135, 0, 0.075},
	{Q4_K, 0.075, 0, 0.08},
	{Q5_K, 0.04, 0, 0.04},
	{Q6_K, 0.02, 0, 0.02},
	{Q2_K, 0.45, 0, 0.23},
	{Q3_K, 0.28, 0, 0.125},
	{IQ4_XS, 0.16, 0, 0.065},
	{Q8_K, 0.0045, 0, 0.005},
}

// testData returns n values of a named distribution.
func testData(dist string, n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 99))
	x := make([]float32, n)
	for i := range x {
		switch dist {
		case "uniform":
			x[i] = float32(r.Float64()*2 - 1)
		case "normal": // typical weight scale with a few outliers
			x[i] = float32(r.NormFloat64() * 0.02)
			if r.IntN(500) == 0 {
				x[i] *= 20
			}
		case "positive":
			x[i] = float32(r.Float64()*3 + 1)
		case "negative":
			x[i] = float32(-r.Float64()*3 - 1)
		case "constant":
			x[i] = 0.75
		case "zero":
		case "sparse":
			if r.IntN(7) == 0 {
				x[i] = float32(r.NormFloat64())
			}
		}
	}
	return x
}

func TestQuantizeRoundTrip(t *testing.T) {
	const n = 4 * 256
	for _, qt := range quantTypes {
		for _, dist := range []string{"uniform", "normal", "positive", "negative", "constant", "zero", "sparse"} {
			t.Run(qt.t.String()+"/"+dist, func(t *testing.T) {
				x := testData(dist, n, uint64(qt.t)+7)
				q, err := Quantize(qt.t, x)
				if err != nil {
					t.Fatal(err)
				}
				if want, _ := qt.t.RowBytes(n); int64(len(q)) != want {
					t.Fatalf("len(Quantize) = %d, want %d", len(q), want)
				}
				y := make([]float32, n)
				if err := Dequantize(qt.t, q, y); err != nil {
					t.Fatal(err)
				}
				bs := qt.t.BlockSize()
				var se, sx float64
				for b := 0; b < n; b += bs {
					var amax float64
					for _, v := range x[b : b+bs] {
						amax = math.Max(amax, math.Abs(float64(v)))
					}
					for i := b; i < b+bs; i++ {
						d := math.Abs(float64(y[i]) - float64(x[i]))
						se += d * d
						sx += float64(x[i]) * float64(x[i])
						limit := qt.maxErr * amax
						if bs == 1 {
							limit = qt.maxErr*math.Abs(float64(x[i])) + qt.absErr
						}
						if math.IsNaN(float64(y[i])) || d > limit {
							t.Fatalf("element %d: x=%g dequantized %g, error %.3g > %.3g (block amax %g)", i, x[i], y[i], d, limit, amax)
						}
					}
				}
				if dist == "uniform" {
					if rel := math.Sqrt(se / sx); rel > qt.relRMS {
						t.Errorf("relative RMS error %.4f > %.4f", rel, qt.relRMS)
					} else {
						t.Logf("relative RMS error %.5f (limit %.4f)", rel, qt.relRMS)
					}
				}
				// QuantizeInto gives the same bytes.
				q2 := make([]byte, len(q))
				if err := QuantizeInto(qt.t, x, q2); err != nil {
					t.Fatal(err)
				}
				if string(q2) != string(q) {
					t.Error("QuantizeInto and Quantize differ")
				}
			})
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	x := make([]float32, 256)
	tests := []struct {
		name string
		err  error
		f    func() error
	}{
		{"quantize unsupported", ErrUnsupported, func() error { _, err := Quantize(IQ2_XS, x); return err }},
		{"quantize unknown", ErrUnsupported, func() error { _, err := Quantize(Type(99), x); return err }},
		{"quantize partial block", ErrSize, func() error { _, err := Quantize(Q4_K, x[:100]); return err }},
		{"into short dst", ErrSize, func() error { return QuantizeInto(Q8_0, x, make([]byte, 10)) }},
		{"into partial block", ErrSize, func() error { return QuantizeInto(Q8_0, x[:33], make([]byte, 68)) }},
		{"dequantize unsupported", ErrUnsupported, func() error { return Dequantize(IQ2_XS, nil, nil) }},
		{"dequantize long src", ErrSize, func() error { return Dequantize(Q4_0, make([]byte, 19), make([]float32, 32)) }},
		{"dequantize partial block", ErrSize, func() error { return Dequantize(Q6_K, make([]byte, 210), make([]float32, 255)) }},
		{"matrix unsupported", ErrUnsupported, func() error { _, err := NewMatrix(Q8_K, 1, 256, make([]byte, 292)); return err }},
		{"matrix partial block", ErrSize, func() error { _, err := NewMatrix(Q4_0, 1, 48, make([]byte, 27)); return err }},
		{"matrix short data", ErrSize, func() error { _, err := NewMatrix(F16, 3, 4, make([]byte, 23)); return err }},
		{"matrix negative", ErrSize, func() error { _, err := NewMatrix(F32, -1, 4, nil); return err }},
		{"matrix overflow", ErrSize, func() error { _, err := NewMatrix(F32, math.MaxInt/2, 4, make([]byte, 8)); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f()
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		if !Supported(typ) {
			t.Errorf("Supported(%v) = false", typ)
		}
	}
	for _, typ := range []Type{Q8_K, Q4_1, IQ2_XS, IQ4_NL, Type(99)} {
		if Supported(typ) {
			t.Errorf("Supported(%v) = true", typ)
		}
	}
	if _, err := NewMatrix(Q4_K, 0, 0, nil); err != nil {
		t.Errorf("empty matrix: %v", err)
	}
}

// TestLayoutMatchesTypeTable keeps the kernels' switch in step with type.go.
func TestLayoutMatchesTypeTable(t *testing.T) {
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, Q8_K} {
		bs, bb, ok := layout(typ)
		if !ok || bs != typ.BlockSize() || bb != typ.BlockBytes() {
			t.Errorf("%v: layout %d/%d, type table %d/%d", typ, bs, bb, typ.BlockSize(), typ.BlockBytes())
		}
	}
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

func checkDecoded(t *testing.T, typ Type, block []byte, want []float32) {
	t.Helper()
	got := make([]float32, len(want))
	if err := Dequantize(typ, block, got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d = %g, want %g", i, got[i], want[i])
		}
	}
	// The dot-product path must read the layout the same way.
	x := make([]float32, len(want))
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	var ref float64
	for i := range x {
		ref += float64(want[i]) * float64(x[i])
	}
	if d := DotRow(typ, block, x); float64(d) != ref {
		t.Errorf("DotRow = %g, want %g", d, ref)
	}
}

// The known-block tests build bytes by hand from the ggml layout, so a
// misread layout fails. Values are small multiples of powers of two, exact
// in float32 whatever the operation order.

func TestKnownQ4_0(t *testing.T) {
	// Block 0: d = 0.5, qs[j] = j | (15-j)<<4: element j is (j-8)*0.5,
	// element 16+j is (15-j-8)*0.5. Block 1: d = -2, qs all 0x9f: the low
	// nibbles (elements 0-15) are 15 -> 7*-2, the high ones 9 -> 1*-2.
	var block []byte
	block = append(block, le16(0x3800)...)
	for j := range 16 {
		block = append(block, byte(j)|byte(15-j)<<4)
	}
	block = append(block, le16(0xc000)...)
	for range 16 {
		block = append(block, 0x9f)
	}
	want := make([]float32, 64)
	for j := range 16 {
		want[j] = float32(j-8) * 0.5
		want[16+j] = float32(7-j) * 0.5
		want[32+j] = -14
		want[48+j] = -2
	}
	if want[0] != -4 || want[15] != 3.5 || want[16] != 3.5 || want[31] != -4 {
		t.Fatal("bad hand computation")
	}
	checkDecoded(t, Q4_0, block, want)
}

func TestKnownQ8_0(t *testing.T) {
	// d = 0.25, qs[j] = j*8-128: element j is 2j-32. Second block d = -1,
	// qs[j] = 127-j.
	var block []byte
	block = append(block, le16(0x3400)...)
	for j := range 32 {
		block = append(block, byte(int8(j*8-128)))
	}
	block = append(block, le16(0xbc00)...)
	for j := range 32 {
		block = append(block, byte(int8(127-j)))
	}
	want := make([]float32, 64)
	for j := range 32 {
		want[j] = float32(2*j - 32)
		want[32+j] = float32(j - 127)
	}
	checkDecoded(t, Q8_0, block, want)
}

// k4Scales packs sub-block scales {1,2,3,4,17,33,50,63} and mins
// {0,1,2,3,20,40,60,63} by hand:
//
//	bytes 0-3:  sc[j] | (sc[j+4]>>4)<<6      = 1|1<<6, 2|2<<6, 3|3<<6, 4|3<<6
//	bytes 4-7:  m[j] | (m[j+4]>>4)<<6        = 0|1<<6, 1|2<<6, 2|3<<6, 3|3<<6
//	bytes 8-11: sc[j+4]&15 | (m[j+4]&15)<<4  = 1|4<<4, 1|8<<4, 2|12<<4, 15|15<<4
var (
	k4Scales = []byte{65, 130, 195, 196, 64, 129, 194, 195, 65, 129, 194, 255}
	k4Sc     = [8]float32{1, 2, 3, 4, 17, 33, 50, 63}
	k4Min    = [8]float32{0, 1, 2, 3, 20, 40, 60, 63}
)

func TestScaleMinK4(t *testing.T) {
	for j := range 8 {
		sc, m := scaleMinK4(j, k4Scales)
		if float32(sc) != k4Sc[j] || float32(m) != k4Min[j] {
			t.Errorf("sub-block %d: scale %d min %d, want %g %g", j, sc, m, k4Sc[j], k4Min[j])
		}
	}
	var sc, m [8]uint8
	for j := range 8 {
		sc[j], m[j] = uint8(k4Sc[j]), uint8(k4Min[j])
	}
	got := make([]byte, 12)
	putScaleMinK4(got, &sc, &m)
	if string(got) != string(k4Scales) {
		t.Errorf("putScaleMinK4 = %v, want %v", got, k4Scales)
	}
}

func TestKnownQ4_K(t *testing.T) {
	// d = 1, dmin = 0.5, scales k4Scales, qs[i] = i. Element e lies in
	// 64-group g = e/64; the first 32 of the group take the low nibble of
	// qs[32g + e%32], the second 32 the high nibble. Value
	// d*sc[e/32]*q - dmin*min[e/32].
	block := append(append(le16(0x3c00), le16(0x3800)...), k4Scales...)
	for i := range 128 {
		block = append(block, byte(i))
	}
	want := make([]float32, 256)
	for e := range want {
		b := byte(32*(e/64) + e%32)
		q := b & 15
		if e%64 >= 32 {
			q = b >> 4
		}
		want[e] = k4Sc[e/32]*float32(q) - 0.5*k4Min[e/32]
	}
	// Spot values worked by hand.
	for e, v := range map[int]float32{0: 0, 33: -0.5, 150: 92, 200: 370, 255: 409.5} {
		if want[e] != v {
			t.Fatalf("hand value %d: formula %g, hand %g", e, want[e], v)
		}
	}
	checkDecoded(t, Q4_K, block, want)
}

func TestKnownQ5_K(t *testing.T) {
	// As Q4_K plus qh: qh[l] = 0xaa for even l, 0x55 for odd l. Bit 2g of
	// qh[l] adds 16 to element 64g+l, bit 2g+1 to element 64g+32+l.
	block := append(append(le16(0x3c00), le16(0x3800)...), k4Scales...)
	for l := range 32 {
		block = append(block, []byte{0xaa, 0x55}[l%2])
	}
	for i := range 128 {
		block = append(block, byte(i))
	}
	want := make([]float32, 256)
	for e := range want {
		g, l, hi := e/64, e%32, e%64 >= 32
		b := byte(32*g + l)
		q := b & 15
		bit := 2 * g
		if hi {
			q, bit = b>>4, bit+1
		}
		if []byte{0xaa, 0x55}[l%2]>>bit&1 == 1 {
			q += 16
		}
		want[e] = k4Sc[e/32]*float32(q) - 0.5*k4Min[e/32]
	}
	for e, v := range map[int]float32{0: 0, 1: 17, 32: 31.5, 33: -0.5, 224: 1354.5, 255: 409.5} {
		if want[e] != v {
			t.Fatalf("hand value %d: formula %g, hand %g", e, want[e], v)
		}
	}
	checkDecoded(t, Q5_K, block, want)
}

func TestKnownQ6_K(t *testing.T) {
	// ql[i] = i, qh[i] = i, scales[j] = j-8, d = 1. Element e: half h =
	// e/128, quarter k = e%128/32, l = e%32; low bits from
	// ql[64h+32(k&1)+l] (low nibble for k<2, high for k>=2), high bits
	// (qh[32h+l]>>2k)&3; value d*scales[e/16]*(q-32).
	var block []byte
	for i := range 128 {
		block = append(block, byte(i))
	}
	for i := range 64 {
		block = append(block, byte(i))
	}
	for j := range 16 {
		block = append(block, byte(int8(j-8)))
	}
	block = append(block, le16(0x3c00)...)
	want := make([]float32, 256)
	for e := range want {
		h, k, l := e/128, e%128/32, e%32
		b := byte(64*h + 32*(k&1) + l)
		q := b & 15
		if k >= 2 {
			q = b >> 4
		}
		q |= (byte(32*h+l) >> (2 * k) & 3) << 4
		want[e] = float32(e/16-8) * float32(int(q)-32)
	}
	for e, v := range map[int]float32{0: 256, 1: 120, 40: -48, 70: 128, 100: 60, 200: 16, 255: -175} {
		if want[e] != v {
			t.Fatalf("hand value %d: formula %g, hand %g", e, want[e], v)
		}
	}
	checkDecoded(t, Q6_K, block, want)
}

func TestKnownQ8_K(t *testing.T) {
	// d = 0.5 as float32, qs[j] = j-128, bsums ignored by dequantization.
	block := binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.5))
	for j := range 256 {
		block = append(block, byte(int8(j-128)))
	}
	block = append(block, make([]byte, 32)...)
	want := make([]float32, 256)
	for j := range want {
		want[j] = float32(j-128) * 0.5
	}
	checkDecoded(t, Q8_K, block, want)
}

// TestQ8_KBsums checks the activation quantizer's block sums.
func TestQ8_KBsums(t *testing.T) {
	x := testData("uniform", 512, 3)
	q, err := Quantize(Q8_K, x)
	if err != nil {
		t.Fatal(err)
	}
	for b := range 2 {
		blk := q[b*292 : (b+1)*292]
		for j := range 16 {
			var s int
			for _, v := range blk[4+16*j : 4+16*j+16] {
				s += int(int8(v))
			}
			if got := int16(binary.LittleEndian.Uint16(blk[260+2*j:])); int(got) != s {
				t.Errorf("block %d bsum %d = %d, want %d", b, j, got, s)
			}
		}
	}
}

func TestQuantizeIntoNoAlloc(t *testing.T) {
	x := testData("uniform", 1024, 5)
	for _, qt := range quantTypes {
		t.Run(qt.t.String(), func(t *testing.T) {
			dst := make([]byte, 1024/qt.t.BlockSize()*qt.t.BlockBytes())
			y := make([]float32, 1024)
			if a := testing.AllocsPerRun(10, func() {
				if err := QuantizeInto(qt.t, x, dst); err != nil {
					t.Fatal(err)
				}
				if err := Dequantize(qt.t, dst, y); err != nil {
					t.Fatal(err)
				}
			}); a != 0 {
				t.Errorf("%v allocations per QuantizeInto+Dequantize", a)
			}
		})
	}
}

// Type names are accepted in any case, as users type them.
func TestParseTypeAnyCase(t *testing.T) {
	for _, name := range []string{"Q4_K", "q4_k", "Q4_k", "iq4_xs", "bf16", "F32"} {
		typ, err := ParseType(name)
		if err != nil || !strings.EqualFold(typ.String(), name) {
			t.Errorf("ParseType(%q) = %v, %v", name, typ, err)
		}
	}
	if _, err := ParseType("Q4_Z"); err == nil {
		t.Error("Q4_Z accepted")
	}
}

package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFP16Special(t *testing.T) {
	tests := []struct {
		name string
		f    float32
		h    uint16
	}{
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"inf", float32(math.Inf(1)), 0x7c00},
		{"-inf", float32(math.Inf(-1)), 0xfc00},
		{"max half", 65504, 0x7bff},
		{"below overflow tie", 65519, 0x7bff},
		{"overflow tie rounds to even (inf)", 65520, 0x7c00},
		{"huge", 1e10, 0x7c00},
		{"smallest normal", 0x1p-14, 0x0400},
		{"largest subnormal", 1023 * 0x1p-24, 0x03ff},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half of smallest subnormal ties to zero", 0x1p-25, 0x0000},
		{"just above half of smallest subnormal", 0x1.000002p-25, 0x0001},
		{"1.5 subnormal ulps ties to even 2", 3 * 0x1p-25, 0x0002},
		{"2.5 subnormal ulps ties to even 2", 5 * 0x1p-25, 0x0002},
		{"negative subnormal", -3 * 0x1p-24, 0x8003},
		{"subnormal rounds up to smallest normal", 0x1p-14 - 0x1p-26, 0x0400},
		{"tiny", 1e-30, 0x0000},
		{"float32 subnormal", 1e-40, 0x0000},
		{"1+ulp/2 ties to even 1", 1 + 0x1p-11, 0x3c00},
		{"1+3ulp/2 ties to even 1+2ulp", 1 + 3*0x1p-11, 0x3c02},
		{"1+ulp/2+tiny rounds up", 1 + 0x1p-11 + 0x1p-20, 0x3c01},
		{"mantissa carry into exponent", 2 - 0x1p-12, 0x4000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FP32ToFP16(tc.f); got != tc.h {
				t.Errorf("FP32ToFP16(%g) = %#04x, want %#04x", tc.f, got, tc.h)
			}
		})
	}
	nan := FP32ToFP16(float32(math.NaN()))
	if nan&0x7c00 != 0x7c00 || nan&0x3ff == 0 {
		t.Errorf("FP32ToFP16(NaN) = %#04x, not a NaN", nan)
	}
	if f := FP16ToFP32(0x7e00); !math.IsNaN(float64(f)) {
		t.Errorf("FP16ToFP32(0x7e00) = %g, want NaN", f)
	}
	if f := FP16ToFP32(0x8000); f != 0 || !math.Signbit(float64(f)) {
		t.Errorf("FP16ToFP32(0x8000) = %g, want -0", f)
	}
	for _, c := range []struct {
		h uint16
		f float32
	}{{0x0001, 0x1p-24}, {0x03ff, 1023 * 0x1p-24}, {0x0400, 0x1p-14}, {0x7bff, 65504}, {0xfc00, float32(math.Inf(-1))}, {0x3555, 0x1.554p-2}} {
		if got := FP16ToFP32(c.h); got != c.f {
			t.Errorf("FP16ToFP32(%#04x) = %g, want %g", c.h, got, c.f)
		}
	}
}

// TestFP16AllValues checks every half value against the binary16 formula,
// and the F16 decoder (which inlines the normal case) against FP16ToFP32.
func TestFP16AllValues(t *testing.T) {
	src := make([]byte, 2<<16)
	for h := range 1 << 16 {
		src[2*h], src[2*h+1] = byte(h), byte(h>>8)
	}
	dec := make([]float32, 1<<16)
	if err := Dequantize(F16, src, dec); err != nil {
		t.Fatal(err)
	}
	for h := range 1 << 16 {
		sign := 1.0
		if h&0x8000 != 0 {
			sign = -1
		}
		e, m := h>>10&0x1f, float64(h&0x3ff)
		var want float64
		switch e {
		case 0:
			want = sign * m * 0x1p-24
		case 0x1f:
			want = sign * math.Inf(1)
			if m != 0 {
				want = math.NaN()
			}
		default:
			want = sign * math.Ldexp(1+m/1024, e-15)
		}
		got := FP16ToFP32(uint16(h))
		if math.IsNaN(want) != math.IsNaN(float64(got)) || !math.IsNaN(want) && (float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want)) {
			t.Fatalf("FP16ToFP32(%#04x) = %g, want %g", h, got, want)
		}
		if math.Float32bits(dec[h]) != math.Float32bits(got) {
			t.Fatalf("Dequantize(F16 %#04x) = %#08x, FP16ToFP32 %#08x", h, math.Float32bits(dec[h]), math.Float32bits(got))
		}
	}
}

// TestFP16RoundTrip checks every half value survives half -> float32 -> half.
func TestFP16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		f := FP16ToFP32(uint16(h))
		if math.IsNaN(float64(f)) {
			if g := FP16ToFP32(FP32ToFP16(f)); !math.IsNaN(float64(g)) {
				t.Fatalf("NaN %#04x did not stay NaN", h)
			}
			continue
		}
		if got := FP32ToFP16(f); got != uint16(h) {
			t.Fatalf("FP32ToFP16(FP16ToFP32(%#04x)=%g) = %#04x", h, f, got)
		}
	}
}

// TestFP16Nearest checks random float32 values against a float64
// nearest-even search over the neighbouring half values.
func TestFP16Nearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		f := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) || abs32(f) > 65504 {
			continue
		}
		h := FP32ToFP16(f)
		got := float64(FP16ToFP32(h))
		err := math.Abs(got - float64(f))
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7c00 == 0x7c00 || (h&0x7fff == 0 && nb == h-1) {
				continue
			}
			alt := float64(FP16ToFP32(nb))
			altErr := math.Abs(alt - float64(f))
			if altErr < err || altErr == err && nb&1 == 0 {
				t.Fatalf("FP32ToFP16(%g) = %#04x (%g), but %#04x (%g) is nearer or an even tie", f, h, got, nb, alt)
			}
		}
	}
}

func TestBF16(t *testing.T) {
	tests := []struct {
		name string
		f    float32
		h    uint16
	}{
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3f80},
		{"inf", float32(math.Inf(1)), 0x7f80},
		{"-inf", float32(math.Inf(-1)), 0xff80},
		{"tie to even down", 1 + 0x1p-8, 0x3f80},
		{"tie to even up", 1 + 3*0x1p-8, 0x3f82},
		{"above tie", 1 + 0x1p-8 + 0x1p-20, 0x3f81},
		{"max float32 overflows to inf", math.MaxFloat32, 0x7f80},
		{"subnormal kept", math.Float32frombits(0x00012345), 0x0001},
		{"smallest normal", 0x1p-126, 0x0080},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FP32ToBF16(tc.f); got != tc.h {
				t.Errorf("FP32ToBF16(%g) = %#04x, want %#04x", tc.f, got, tc.h)
			}
		})
	}
	for _, bits := range []uint32{0x7fc00000, 0x7f800001, 0xffffffff} {
		h := FP32ToBF16(math.Float32frombits(bits))
		if f := BF16ToFP32(h); !math.IsNaN(float64(f)) {
			t.Errorf("FP32ToBF16(NaN %#08x) = %#04x, not a NaN", bits, h)
		}
	}
	for h := range 1 << 16 {
		f := BF16ToFP32(uint16(h))
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToFP32(%#04x) = %#08x", h, math.Float32bits(f))
		}
		if !math.IsNaN(float64(f)) && FP32ToBF16(f) != uint16(h) {
			t.Fatalf("BF16 %#04x does not round-trip", h)
		}
	}
}

package allreduce_test

import (
	"math"
	"testing"

	"strata/peers/allreduce"
	"strata/runtime/tensor"
)

// TestWireHalf: the wire's own half conversions agree with the engine's
// (runtime/tensor, itself tested against F16C) on every half and on
// float32s spread over the whole range, their neighbours included.
func TestWireHalf(t *testing.T) {
	for h := range 1 << 16 {
		got, want := allreduce.F16ToF32(uint16(h)), tensor.FP16ToFP32(uint16(h))
		if math.Float32bits(got) != math.Float32bits(want) && !(isNaN(got) && isNaN(want)) {
			t.Fatalf("half %#04x: %v, want %v", h, got, want)
		}
	}
	for b := uint64(0); b < 1<<32; b += 4093 {
		for d := range uint32(3) {
			f := math.Float32frombits(uint32(b) + d)
			got, want := allreduce.F32ToF16(f), tensor.FP32ToFP16(f)
			if isNaN(f) {
				if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
					t.Fatalf("%v: %#04x is not a NaN", f, got)
				}
				continue
			}
			if got != want {
				t.Fatalf("%v (%#08x): %#04x, want %#04x", f, math.Float32bits(f), got, want)
			}
		}
	}
}

func isNaN(f float32) bool { return f != f }

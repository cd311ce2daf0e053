package allreduce

import (
	"math"
	"testing"
)

// FuzzWireDecode decodes any payload as each wire format: nothing may
// panic, a wrong length is an error, and whatever decodes is finite.
func FuzzWireDecode(f *testing.F) {
	f.Add(uint8(WireF32), uint16(3), make([]byte, 12))
	f.Add(uint8(WireF16), uint16(5), []byte{0, 0x7c, 0, 0x3c, 1, 2, 3, 4, 5, 6})
	f.Add(uint8(WireQ8_0), uint16(33), make([]byte, 2*q8Bytes))
	f.Fuzz(func(t *testing.T, wire uint8, count uint16, p []byte) {
		w := Wire(wire)
		x := make([]float32, int(count))
		err := w.decode(x, p)
		if err != nil {
			return
		}
		if !w.valid() || len(p) != w.bytes(len(x)) {
			t.Fatalf("wire %d: %d bytes for %d values decoded", wire, len(p), len(x))
		}
		for i, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("value %d is %v", i, v)
			}
		}
	})
}

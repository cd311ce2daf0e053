package tensor

import (
	"math"
	"testing"
)

// Shapes come from model files: byte sizes computed from them must not
// wrap around to a small number that some buffer appears to satisfy.
func TestSizeOverflow(t *testing.T) {
	for _, c := range []struct {
		t Type
		n int64
	}{{F32, 1 << 62}, {F16, math.MaxInt64}, {Q8_0, math.MaxInt64 / 32 * 32}} {
		if b, err := c.t.RowBytes(c.n); err == nil {
			t.Errorf("%v.RowBytes(%d) = %d, want an error", c.t, c.n, b)
		}
	}
	if b, err := F32.RowBytes(1 << 40); err != nil || b != 4<<40 {
		t.Errorf("F32.RowBytes(2^40) = %d, %v", b, err)
	}
	// One row of 2^62 F32 columns is 2^64 bytes, which wraps to 0: an
	// empty buffer must not pass for it.
	if m, err := NewMatrix(F32, 1, 1<<62, nil); err == nil {
		t.Errorf("NewMatrix(F32, 1, 2^62, nil) = %d rows of %d bytes, want an error", m.Rows, m.RowBytes())
	}
	if _, err := NewMatrix(Q8_0, 2, 1<<62, make([]byte, 0)); err == nil {
		t.Error("NewMatrix(Q8_0, 2, 2^62, empty) accepted")
	}
}

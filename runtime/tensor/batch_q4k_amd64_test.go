//go:build !purego

package tensor

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// The assembly Q4_K tile repack writes exactly what the Go one does, for
// blocks of random bytes (every scale, min and nibble value; finite d
// and dmin).
func TestRepackQ4_Kx8(t *testing.T) {
	if !hasAVX512 {
		t.Log("no AVX-512 here: repackQ4_Kx8Asm not run")
		return
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, nb := range []int{1, 2, 5, 8} {
		const rows, extra = 8, 3 // rows further apart than a row's blocks
		rs := (nb + extra) * q4KBytes
		w := make([]byte, rows*rs)
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		for i := 0; i+4 <= len(w); i += q4KBytes { // finite d and dmin (NaN payloads may differ)
			binary.LittleEndian.PutUint16(w[i:], FP32ToFP16(float32(r.NormFloat64())))
			binary.LittleEndian.PutUint16(w[i+2:], FP32ToFP16(float32(r.NormFloat64())))
		}
		want := make([]byte, nb*q4KTileSB)
		got := make([]byte, nb*q4KTileSB)
		repackQ4_Kx8Go(want, w, rs, nb)
		repackQ4_Kx8Asm(&got[0], &w[0], rs, nb)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%d blocks: byte %d (block %d, offset %d) = %d, want %d", nb, i, i/q4KTileSB, i%q4KTileSB, got[i], want[i])
		}
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

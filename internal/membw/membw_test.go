package membw

import (
	"math/rand/v2"
	"testing"
)

// Read matches the generic XOR for every length 0..N in whole 256-byte
// chunks, with and without the assembly.
func TestRead(t *testing.T) {
	b := make([]byte, 256*40)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	saved := useAVX2
	defer func() { useAVX2 = saved }()
	for _, on := range []bool{false, saved} {
		useAVX2 = on
		for n := 0; n <= len(b); n += 256 {
			if got, want := Read(b[:n]), readGeneric(b[:n]); got != want {
				t.Fatalf("avx2=%v n=%d: %x, want %x", on, n, got, want)
			}
		}
	}
}

func TestReadPanicsOnOddLength(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	Read(make([]byte, 100))
}

func TestMeasure(t *testing.T) {
	gbs, err := Measure(Options{Threads: 2, Bytes: 8 << 20, Passes: 2, MinTime: 1})
	if err != nil || gbs <= 0 {
		t.Fatalf("Measure = %v, %v", gbs, err)
	}
	if _, err := Measure(Options{Threads: 4, Bytes: 256}); err == nil {
		t.Error("tiny buffer accepted")
	}
	if PeakRSS() <= 0 {
		t.Error("no peak RSS")
	}
}

func BenchmarkRead(b *testing.B) {
	buf := make([]byte, 256<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		Read(buf)
	}
}

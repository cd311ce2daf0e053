package verbs

import (
	"context"
	"hash/crc32"
	"testing"
)

// The component costs of one message on the side channel. These are CPU
// costs in one process, meaningful on a shared machine; the end-to-end
// time between processes is strata bench link.

func BenchmarkCRC32C(b *testing.B) {
	for _, n := range []int{8 << 10, 64 << 10} {
		buf := make([]byte, n)
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for range b.N {
				crc32.Checksum(buf, castagnoli)
			}
		})
	}
}

// BenchmarkSendRecv is Sender.Send then Receiver.Recv in one goroutine
// over the loop ring: framing, copies and checksums, no wake-ups.
func BenchmarkSendRecv(b *testing.B) {
	for _, n := range []int{8 << 10, 64 << 10} {
		b.Run(sizeName(n), func(b *testing.B) {
			a, c, err := Loop(Caps{FrameBytes: 1<<20 + 4096, Depth: 16})
			if err != nil {
				b.Fatal(err)
			}
			s, _ := NewSender(a)
			r, _ := NewReceiver(c, 1)
			msg := make([]byte, n)
			ctx := context.Background()
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := s.Send(ctx, uint64(i+1), msg); err != nil {
					b.Fatal(err)
				}
				if _, _, err := r.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriteInPlace is the fast path: the message is written straight
// into the peer's receive slot (Sender.Write), read in place.
func BenchmarkWriteInPlace(b *testing.B) {
	for _, n := range []int{8 << 10, 64 << 10} {
		b.Run(sizeName(n), func(b *testing.B) {
			a, c, err := Loop(Caps{FrameBytes: 1<<20 + 4096, Depth: 16})
			if err != nil {
				b.Fatal(err)
			}
			s, _ := NewSender(a)
			r, _ := NewReceiver(c, 1)
			msg := make([]byte, n)
			ctx := context.Background()
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				err := s.Write(ctx, uint64(i+1), n, func(dst []byte) { copy(dst, msg) })
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := r.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPingPong is a round trip between two goroutines over two loop
// rings (spin, then channel wake-ups): half of it is the one-way time
// without a process boundary.
func BenchmarkPingPong(b *testing.B) {
	const n = 8 << 10
	caps := Caps{FrameBytes: 16 << 10, Depth: 16}
	a1, b1, _ := Loop(caps)
	a2, b2, _ := Loop(caps)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		s, _ := NewSender(b2)
		r, _ := NewReceiver(b1, 1)
		for seq := uint64(1); ; seq++ {
			_, m, err := r.Recv(ctx)
			if err != nil {
				return
			}
			if s.Send(ctx, seq, m) != nil {
				return
			}
		}
	}()
	s, _ := NewSender(a1)
	r, _ := NewReceiver(a2, 1)
	msg := make([]byte, n)
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Send(ctx, uint64(i+1), msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := r.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return itoa(n>>20) + "MiB"
	}
	return itoa(n>>10) + "KiB"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// Package membw measures how fast this machine reads memory: every thread
// streams its share of a buffer far larger than the caches with vector
// loads, which is the bound of decoding a model (every weight is read once
// per token).
//
// Measure returns GB/s (ExampleMeasure).
package membw

import (
	"errors"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Options configures Measure. Zero values pick the defaults noted.
type Options struct {
	Threads int           // reading threads; 0 = GOMAXPROCS
	Bytes   int           // buffer size; 0 = 1 GiB (far larger than any L3)
	Passes  int           // timed passes over the buffer, the fastest is reported; 0 = 5
	MinTime time.Duration // keep passing until this much time is spent, at most 4*Passes passes; 0 = 1s
}

// Measure allocates the buffer, touches every page, and returns the
// fastest pass's read rate in GB/s (10^9 bytes per second). The buffer is
// released when it returns.
func Measure(o Options) (float64, error) {
	if o.Threads <= 0 {
		o.Threads = runtime.GOMAXPROCS(0)
	}
	if o.Bytes <= 0 {
		o.Bytes = 1 << 30
	}
	if o.Passes <= 0 {
		o.Passes = 5
	}
	if o.MinTime <= 0 {
		o.MinTime = time.Second
	}
	// Each thread reads a share that is a whole number of 256-byte chunks.
	share := o.Bytes / o.Threads &^ 255
	if share == 0 {
		return 0, errors.New("membw: buffer too small for the thread count")
	}
	buf := make([]byte, share*o.Threads)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(i) // fault the pages in with distinct contents
	}
	best := time.Duration(0)
	var sink uint64
	var mu sync.Mutex
	start := time.Now()
	for pass := 0; pass < 4*o.Passes && (pass < o.Passes || time.Since(start) < o.MinTime); pass++ {
		var ready, done sync.WaitGroup
		gate := make(chan struct{})
		ready.Add(o.Threads)
		done.Add(o.Threads)
		for t := range o.Threads {
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				ready.Done()
				<-gate
				s := Read(buf[t*share : (t+1)*share])
				mu.Lock()
				sink ^= s
				mu.Unlock()
				done.Done()
			}()
		}
		ready.Wait()
		t0 := time.Now()
		close(gate)
		done.Wait()
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	runtime.KeepAlive(sink)
	n := len(buf)
	buf = nil
	debug.FreeOSMemory() // hand the buffer's pages back now, not at some later GC
	return float64(n) / best.Seconds() / 1e9, nil
}

// Read reads every byte of b (whose length must be a multiple of 256) and
// returns the XOR of its 64-bit words, so that no load can be skipped.
func Read(b []byte) uint64 {
	if len(b)%256 != 0 {
		panic("membw: Read of a length that is not a multiple of 256")
	}
	if len(b) == 0 {
		return 0
	}
	return read(b)
}

// readGeneric is the reference for read: the XOR of the little-endian
// 64-bit words of b.
func readGeneric(b []byte) uint64 {
	var x0, x1, x2, x3 uint64
	for i := 0; i+32 <= len(b); i += 32 {
		x0 ^= le64(b[i:])
		x1 ^= le64(b[i+8:])
		x2 ^= le64(b[i+16:])
		x3 ^= le64(b[i+24:])
	}
	return x0 ^ x1 ^ x2 ^ x3
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

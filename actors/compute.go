package actors

import (
	"sync"
	"time"

	"strata/internal/membw"
	"strata/runtime/tensor"
)

// MeasureCompute estimates the node's compute rate in FLOP/s: every
// worker of pool runs the f32 dot kernel on cache-resident vectors for
// about d. It is a relative number for placement (layers in proportion
// to it), not a peak rating.
func MeasureCompute(pool *tensor.Pool, d time.Duration) float64 {
	const n = 4096 // 32 KB of operands: L1/L2 resident
	threads := pool.Threads()
	ops := make([]float64, threads)
	deadline := time.Now().Add(d)
	pool.Run(threads, func(lo, hi int) {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = 1, 0.5
		}
		for w := lo; w < hi; w++ {
			var sink float32
			for count := 0; ; count++ {
				sink += tensor.Dot(a, b)
				if count%64 == 63 {
					ops[w] += 64 * 2 * n
					if time.Now().After(deadline) {
						break
					}
				}
			}
			_ = sink
		}
	})
	var total float64
	for _, o := range ops {
		total += o
	}
	return total / d.Seconds()
}

// MeasureMemoryBandwidth measures how fast the node reads memory, in
// bytes/s, with threads readers over a buffer larger than any cache (256
// MiB, the best of two passes, about a tenth of a second): what decode
// speed is proportional to, announced for the cost model. 0 if the
// measurement failed. Nodes in one process share the machine, so the
// first measurement for a thread count is reused (tests start many nodes).
func MeasureMemoryBandwidth(threads int) float64 {
	membwMu.Lock()
	defer membwMu.Unlock()
	if bw, ok := membwByThreads[threads]; ok {
		return bw
	}
	gbs, err := membw.Measure(membw.Options{Threads: threads, Bytes: 256 << 20, Passes: 2, MinTime: 50 * time.Millisecond})
	if err != nil {
		return 0
	}
	membwByThreads[threads] = gbs * 1e9
	return gbs * 1e9
}

var (
	membwMu        sync.Mutex
	membwByThreads = map[int]float64{}
)

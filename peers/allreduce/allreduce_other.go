//go:build !linux

package allreduce

// osYield is sched_yield where the runtime offers it; elsewhere the spin
// yields to goroutines only (runtime.Gosched).
func osYield() {}

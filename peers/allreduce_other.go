//go:build !linux

package peers

// osYield is sched_yield where the runtime offers it; elsewhere the spin
// yields to goroutines only (runtime.Gosched).
func osYield() {}

//go:build !linux

package tensor

import (
	"testing"
	"time"
)

// threadCPU reports no thread CPU time outside Linux.
func threadCPU() (time.Duration, bool) { return 0, false }

// loopCPU runs f in b.Loop (the thread CPU time is read on Linux only).
func loopCPU(b *testing.B, f func()) {
	for b.Loop() {
		f()
	}
}

//go:build !linux

package tensor

import "testing"

// loopCPU runs f in b.Loop (the thread CPU time is read on Linux only).
func loopCPU(b *testing.B, f func()) {
	for b.Loop() {
		f()
	}
}

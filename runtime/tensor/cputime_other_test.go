//go:build !linux

package tensor

import "time"

// threadCPU reports no thread CPU time outside Linux.
func threadCPU() (time.Duration, bool) { return 0, false }

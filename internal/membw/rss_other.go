//go:build !unix

package membw

import "time"

// PeakRSS returns 0: this system's peak resident set size is not read.
func PeakRSS() int64 { return 0 }

// ResetPeakRSS reports false: the peak RSS is not read here.
func ResetPeakRSS() bool { return false }

// CPUTime returns 0: this system's process CPU time is not read.
func CPUTime() time.Duration { return 0 }

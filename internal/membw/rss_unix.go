//go:build unix

package membw

import (
	"runtime"
	"syscall"
	"time"
)

// PeakRSS returns the process's peak resident set size in bytes since
// the start or the last successful ResetPeakRSS (0 if the system does not
// say).
func PeakRSS() int64 {
	if n, ok := peakRSSProc(); ok {
		return n
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss) // bytes there
	}
	return int64(ru.Maxrss) * 1024 // kilobytes on Linux and the BSDs
}

// CPUTime returns the CPU time (user + system) the process has used so far,
// for telling how many cores a phase really got.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package tensor

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling OS thread has used (the caller
// holds runtime.LockOSThread): a benchmark measure that other processes
// on a shared machine change much less than the wall clock.
func threadCPU() (time.Duration, bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

package tensor

import (
	"runtime"
	"testing"
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

// loopCPU runs f in b.Loop on one locked OS thread and reports the
// thread's CPU time per op as "cpu-ns/op" besides the wall time: on a
// shared machine the wall time counts the time other processes ran,
// the thread's CPU time does not (so benchstat compares kernels on it).
func loopCPU(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n int
	t0, _ := threadCPU()
	for b.Loop() {
		f()
		n++
	}
	t1, _ := threadCPU()
	b.ReportMetric(float64(t1-t0)/float64(n), "cpu-ns/op")
}

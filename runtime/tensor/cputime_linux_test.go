package tensor

import (
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// threadCPU returns the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// loopCPU runs f in b.Loop on one locked OS thread and reports the
// thread's CPU time per op as "cpu-ns/op" besides the wall time: on a
// shared machine the wall time counts the time other processes ran,
// the thread's CPU time does not (so benchstat compares kernels on it).
func loopCPU(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n int
	t0 := threadCPU()
	for b.Loop() {
		f()
		n++
	}
	b.ReportMetric(float64(threadCPU()-t0)/float64(n), "cpu-ns/op")
}

package verbs

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futexWaker parks on a futex in the shared mapping (not the private
// kind: the two sides are different processes).
type futexWaker struct{}

// Futex operations (linux/futex.h), shared (not FUTEX_PRIVATE_FLAG).
const (
	futexWait = 0
	futexWake = 1
)

// parkFor bounds one futex wait, so a cancelled ctx is noticed, and
// stays under the Go runtime's 10 ms time slice (see ring.Wait).
const parkFor = 5 * time.Millisecond

func (futexWaker) wait(ctx context.Context, ev *uint32, seen uint32, _ int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if atomic.LoadUint32(ev) != seen {
		return nil
	}
	ts := unix.NsecToTimespec(int64(parkFor))
	// EAGAIN (the word changed), EINTR and ETIMEDOUT all mean: look again.
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(ev)), futexWait, uintptr(seen), uintptr(unsafe.Pointer(&ts)), 0, 0)
	return ctx.Err()
}

func (futexWaker) wake(ev *uint32, _ int) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(ev)), futexWake, 1, 0, 0, 0)
}

func shmWaker() waker { return futexWaker{} }

// shmDir is where rings between processes live.
const shmDir = "/dev/shm"

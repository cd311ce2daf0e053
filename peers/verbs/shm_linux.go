package verbs

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// pipeWaker parks a side of a ring on a named pipe beside the ring file,
// through Go's network poller: the waiting goroutine gives its processor
// back to the scheduler at once. (A futex wait is a blocking system call
// that keeps its processor until the runtime's monitor takes it back, up
// to 10 ms later when it is idle: with one waiting receiver per incoming
// link, a node's shard computed on fewer cores than it had, and three
// processes over shared memory ran slower than over TCP.) The peer wakes
// a side by writing a byte into its pipe; the side drains it when it
// wakes. A byte written before the side parks makes its wait return at
// once, so no wake-up is lost; extra ones are spurious wake-ups, which
// callers allow.
type pipeWaker struct {
	side int
	own  *os.File // this side's pipe, read through the poller
	peer int      // the peer's pipe, written without blocking
}

// parkFor bounds one wait, so a cancelled ctx is noticed.
const parkFor = 20 * time.Millisecond

// pipePath is the named pipe that wakes side s of the ring at path.
func pipePath(path string, s int) string { return fmt.Sprintf("%s-wake%d", path, s) }

// newPipeWaker opens the pipes of the ring at path for side (the creating
// side makes them first, mode 0600, as it makes the ring).
func newPipeWaker(path string, side int, create bool) (*pipeWaker, error) {
	if create {
		for s := range 2 {
			if err := unix.Mkfifo(pipePath(path, s), 0o600); err != nil {
				removePipes(path)
				return nil, fmt.Errorf("verbs: mkfifo: %w", err)
			}
		}
	}
	// Read-write, so that neither open waits for the other end and a
	// read never sees end-of-file; non-blocking, so that the read goes
	// through the poller and a full pipe drops a write (a wake-up is
	// already pending then).
	own, err := unix.Open(pipePath(path, side), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("verbs: wake pipe: %w", err)
	}
	peer, err := unix.Open(pipePath(path, 1-side), unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(own)
		return nil, fmt.Errorf("verbs: wake pipe: %w", err)
	}
	return &pipeWaker{side: side, own: os.NewFile(uintptr(own), pipePath(path, side)), peer: peer}, nil
}

func (w *pipeWaker) wait(ctx context.Context, ev *uint32, seen uint32, _ int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if atomic.LoadUint32(ev) != seen {
		return nil
	}
	var buf [64]byte
	w.own.SetReadDeadline(time.Now().Add(parkFor))
	w.own.Read(buf[:]) // a wake-up, the deadline, or closed: look again
	return ctx.Err()
}

func (w *pipeWaker) wake(_ *uint32, side int) {
	if side == w.side {
		return // only the peer is woken through its pipe
	}
	unix.Write(w.peer, []byte{1}) // EAGAIN: the pipe is full of wake-ups already
}

func (w *pipeWaker) close() {
	w.own.Close()
	unix.Close(w.peer)
}

// removePipes removes the ring's pipes' names.
func removePipes(path string) {
	for s := range 2 {
		os.Remove(pipePath(path, s))
	}
}

func shmWaker(path string, side int, create bool) (waker, func(), error) {
	w, err := newPipeWaker(path, side, create)
	if err != nil {
		return nil, nil, err
	}
	return w, w.close, nil
}

// shmDir is where rings between processes live.
const shmDir = "/dev/shm"

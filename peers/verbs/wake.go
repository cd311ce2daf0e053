package verbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// fifoWaker parks a side of a shared-memory ring on a named pipe (FIFO)
// beside the ring, one per side: the side reads its own pipe, and the
// peer writes one byte to it only when the side's sleeping flag is set
// (ring.notify). The read goes through the Go runtime's network poller,
// so a parked reader holds no processor: the goroutines it has just
// handed work to run at once, and it wakes as soon as the byte comes.
// (A futex wait, as before, is a system call that keeps its processor:
// on a node whose processors were all parked in one, every other
// goroutine waited for the runtime's monitor, up to 10 ms a hop.)
type fifoWaker struct {
	self *os.File // our pipe, read end (pollable)
	peer int      // the peer's pipe, write end (non-blocking)
	buf  [64]byte
}

// parkFor bounds one wait, in case a wake-up is lost (it is not by
// design: the sleeping flag and the event word are ordered as Dekker's
// algorithm needs); a cancelled ctx wakes the wait at once.
const parkFor = time.Second

// one is the byte a wake-up writes.
var one = []byte{1}

// wakePaths are the pipes beside the ring at path, for side 0 and 1.
func wakePaths(path string) [2]string {
	return [2]string{path + ".wake0", path + ".wake1"}
}

// makeWakePipes creates the two pipes of a new ring (mode 0600).
func makeWakePipes(path string) error {
	for _, p := range wakePaths(path) {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			return fmt.Errorf("verbs: mkfifo %s: %w", p, err)
		}
	}
	return nil
}

// openWaker opens the pipes of the ring at path for side.
func openWaker(path string, side int) (*fifoWaker, error) {
	paths := wakePaths(path)
	selfFD, err := openOwned(paths[side], unix.S_IFIFO)
	if err != nil {
		return nil, err
	}
	peerFD, err := openOwned(paths[1-side], unix.S_IFIFO)
	if err != nil {
		unix.Close(selfFD)
		return nil, err
	}
	// Non-blocking, so os.NewFile gives a file the poller waits on.
	self := os.NewFile(uintptr(selfFD), paths[side])
	return &fifoWaker{self: self, peer: peerFD}, nil
}

// openOwned opens path read-write and non-blocking (a FIFO opened so
// needs no reader or writer on the other end), refusing a symbolic link,
// a file of another type than kind, or one that is not this user's alone:
// whoever else could write or truncate it could crash this process
// (SIGBUS on a shrunk mapping) or feed it frames.
func openOwned(path string, kind uint32) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("verbs: open %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("verbs: stat %s: %w", path, err)
	}
	if err := checkOwned(path, uint32(st.Mode), st.Uid, kind); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// checkOwned is openOwned's rule: the file's type is kind, its owner this
// process's effective user, and no one else has any access to it.
func checkOwned(path string, mode, uid, kind uint32) error {
	if mode&unix.S_IFMT != kind {
		return fmt.Errorf("verbs: %s: not a %s", path, map[uint32]string{unix.S_IFIFO: "named pipe", unix.S_IFREG: "regular file"}[kind])
	}
	if int(uid) != os.Geteuid() {
		return fmt.Errorf("verbs: %s belongs to user %d, not this process's (%d)", path, uid, os.Geteuid())
	}
	if mode&0o077 != 0 {
		return fmt.Errorf("verbs: %s has mode %#o: others may use it", path, mode&0o777)
	}
	return nil
}

func (w *fifoWaker) wait(ctx context.Context, ev *uint32, seen uint32, _ int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if atomic.LoadUint32(ev) != seen {
		return nil
	}
	deadline := time.Now().Add(parkFor)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := w.self.SetReadDeadline(deadline); err != nil {
		return err
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, w.poke)
		defer stop()
	}
	// One read drains the wake-ups written meanwhile (a byte left over
	// costs one spurious wake-up, which the caller's loop absorbs).
	_, err := w.self.Read(w.buf[:])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("verbs: wake-up pipe: %w", err)
	}
	return nil
}

// poke wakes this side's own wait (its ctx ended).
func (w *fifoWaker) poke() {
	if fd, err := w.self.SyscallConn(); err == nil {
		fd.Write(func(fd uintptr) bool {
			unix.Write(int(fd), one)
			return true
		})
	}
}

// wake writes one byte to the peer's pipe; a full pipe (EAGAIN) already
// holds a wake-up.
func (w *fifoWaker) wake(*uint32, int) {
	unix.Write(w.peer, one)
}

func (w *fifoWaker) close() {
	w.self.Close()
	unix.Close(w.peer)
}

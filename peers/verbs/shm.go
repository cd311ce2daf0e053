package verbs

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Shm is a Conn between two processes on one host: a ring (see ring) in a
// file under /dev/shm that both map. Waiting spins for a few microseconds,
// then parks on a named pipe beside the ring (see fifoWaker).
//
// The creating side names the file after a random per-link token that it
// gives the other side over an authenticated stream; the file is mode 0600
// and holds the token, which Open checks, and the creator removes the name
// as soon as the other side has mapped it (Unlink), so nothing else can
// join and nothing is left behind when a process dies. Open maps only a
// regular file of this user's that no one else may access (O_NOFOLLOW,
// then fstat): a ring another user made could be truncated under the
// mapping, and a process touching a shrunk mapping dies of SIGBUS, which
// Go cannot recover. A peer running as this same user is trusted as far
// as this process is (it could as well attach a debugger).
type Shm struct {
	*ring
	waker   *fifoWaker
	path    string
	creator bool
}

var (
	_ Conn    = (*Shm)(nil)
	_ InPlace = (*Shm)(nil)
)

// BootID identifies this boot of this machine: two processes that see the
// same one may share memory (the ring's token proves they can).
func BootID() string {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		return strings.TrimSpace(string(b))
	}
	h, _ := os.Hostname()
	return runtime.GOOS + ":" + h
}

// ShmPath is where a ring for token lives.
func ShmPath(token []byte) string {
	return filepath.Join(shmDir, fmt.Sprintf("strata-verbs-%x", token))
}

// CreateShm makes the file for a new link and maps it as side 0. With
// c.EqualSizes the ring enforces the Apple constraints on both sides.
func CreateShm(c Caps, token []byte) (*Shm, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(token) != tokenBytes {
		return nil, fmt.Errorf("verbs: token of %d bytes, want %d", len(token), tokenBytes)
	}
	path := ShmPath(token)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("verbs: %w", err)
	}
	defer f.Close()
	s := &Shm{path: path, creator: true}
	fail := func(err error) (*Shm, error) {
		s.Unlink()
		return nil, err
	}
	size := ringBytes(c)
	if err := f.Truncate(int64(size)); err != nil {
		return fail(fmt.Errorf("verbs: %w", err))
	}
	if err := makeWakePipes(path); err != nil {
		return fail(err)
	}
	if s.waker, err = openWaker(path, 0); err != nil {
		return fail(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		s.waker.close()
		return fail(fmt.Errorf("verbs: mmap %s: %w", path, err))
	}
	var flags uint32
	if c.EqualSizes {
		flags |= flagApple
	}
	initRing(mem, c, flags, token)
	if s.ring, err = newRing(mem, 0, s.waker); err != nil {
		unix.Munmap(mem)
		s.waker.close()
		return fail(err)
	}
	return s, nil
}

// OpenShm maps the file of a link another process created, as side 1,
// checking that it carries token.
func OpenShm(token []byte) (*Shm, error) {
	path := ShmPath(token)
	fd, err := openOwned(path, unix.S_IFREG)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("verbs: %w", err)
	}
	if st.Size < headerBytes || st.Size > 1<<34 {
		return nil, fmt.Errorf("verbs: %s: %d bytes is no ring", path, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("verbs: mmap %s: %w", path, err)
	}
	_, _, got, err := readHeader(mem)
	if err == nil && subtle.ConstantTimeCompare(got, token) != 1 {
		err = errors.New("verbs: the ring's token does not match")
	}
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	w, err := openWaker(path, 1)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	r, err := newRing(mem, 1, w)
	if err != nil {
		unix.Munmap(mem)
		w.close()
		return nil, err
	}
	return &Shm{ring: r, waker: w, path: path}, nil
}

// Path is the ring's file.
func (s *Shm) Path() string { return s.path }

// Unlink removes the names of the ring and its wake-up pipes; both
// mappings and the open pipes stay valid.
func (s *Shm) Unlink() {
	w := wakePaths(s.path)
	for _, p := range []string{s.path, w[0], w[1]} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			_ = err // another process may have removed it: nothing to do
		}
	}
}

// Close tells the peer, unmaps the ring and (on the creating side)
// removes its name.
func (s *Shm) Close() error {
	if s.ring.closed {
		return nil
	}
	s.ring.Close()
	s.waker.close()
	if s.creator {
		s.Unlink()
	}
	return unix.Munmap(s.mem)
}

// IsShmPath reports whether path names a strata ring (for cleanup).
func IsShmPath(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "strata-verbs-")
}

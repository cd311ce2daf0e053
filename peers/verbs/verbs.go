package verbs

import (
	"context"
	"errors"
	"fmt"
)

// Conn is one queue pair: a connected, two-way channel that moves frames
// between registered memory on one side and posted receive slots on the
// other, the way ibverbs does. It does not promise delivery: a backend with
// unreliable-connected semantics (Apple RDMA, the fault backend) may drop,
// truncate, reorder or corrupt frames silently, so the framing above it
// (Sender, Receiver) checks every frame.
//
// Receive buffers belong to the Conn: Caps().Depth slots of
// Caps().FrameBytes bytes each. The receiver posts a slot (a credit for the
// peer), a receive completion names the slot and the byte count, RecvBuf
// gives the slot's bytes in place (no copy), and the receiver posts the
// slot again once it is done with them.
//
// A Conn is used by one goroutine at a time, except Close.
type Conn interface {
	// Caps reports what the link allows, agreed by both ends.
	Caps() Caps
	// Register returns size bytes of memory registered for sends: the
	// caller writes a frame there once and posts it.
	Register(size int) (*Region, error)
	// PostSend queues a send of r.Buf[off:off+n] with work request id wr.
	// ErrNoCredit: the peer has no receive posted (wait and retry);
	// ErrQueueFull: Caps().Depth sends are outstanding (poll first).
	PostSend(wr uint64, r *Region, off, n int) error
	// PostRecv gives receive slot back to the Conn (to be filled by the
	// peer), with work request id wr.
	PostRecv(wr uint64, slot int) error
	// RecvBuf is receive slot's memory, valid to read from its receive
	// completion until the slot is posted again.
	RecvBuf(slot int) []byte
	// Poll moves up to len(cs) finished work requests into cs without
	// waiting.
	Poll(cs []Completion) (int, error)
	// Wait blocks until a completion may be ready or the peer posted
	// receives (spinning briefly, then parking), or ctx ends. It may return
	// early; callers poll and wait again.
	Wait(ctx context.Context) error
	// Close releases the Conn; a peer waiting on it gets ErrClosed.
	Close() error
}

// Caps are a link's limits, as both ends agreed them.
type Caps struct {
	// FrameBytes is the size of one receive slot: the largest send.
	FrameBytes int
	// Depth is the number of receive slots each side posts, and the most
	// sends one side may have outstanding (the granted queue depth).
	Depth int
	// EqualSizes: every send must be exactly FrameBytes long (the
	// receive it lands in has that size; Apple RDMA's UC queue pairs).
	EqualSizes bool
	// Write: one-sided RDMA writes are supported (none of our backends
	// use them; Apple's do not exist).
	Write bool
	// Reliable: the backend delivers every frame intact and in order
	// (shared memory); false on unreliable-connected links.
	Reliable bool
}

// MaxMessage is the largest message a Sender built on these caps carries:
// it splits messages into frames, at most maxFrames of them.
func (c Caps) MaxMessage() int { return maxFrames * (c.FrameBytes - frameHeader) }

// AppleCaps are the constraints of Apple's RDMA over Thunderbolt (macOS
// 26.2+ librdma): unreliable-connected queue pairs, SEND/RECV only, 4 KiB
// frames, a send the size of its receive, at most 32 outstanding work
// requests.
var AppleCaps = Caps{FrameBytes: 4096, Depth: 32, EqualSizes: true}

// Validate reports caps that cannot work.
func (c Caps) Validate() error {
	if c.FrameBytes < minFrame || c.FrameBytes > maxFrameBytes || c.FrameBytes%64 != 0 {
		return fmt.Errorf("verbs: frame of %d bytes (want a multiple of 64 in %d..%d)", c.FrameBytes, minFrame, maxFrameBytes)
	}
	if c.Depth < 2 || c.Depth > maxDepth {
		return fmt.Errorf("verbs: queue depth %d (want 2..%d)", c.Depth, maxDepth)
	}
	return nil
}

const (
	minFrame      = 256
	maxFrameBytes = 16 << 20
	maxDepth      = 1024
)

// Region is memory registered with a Conn for sends.
type Region struct {
	Buf []byte
	// h is the backend's handle (an ibverbs memory region, say).
	h any //lint:ignore U1000 set and read by the ibverbs backend (build tag ibverbs)
}

// Op is the kind of a finished work request.
type Op uint8

// Ops.
const (
	OpSend Op = iota + 1
	OpRecv
)

// Completion is one finished work request.
type Completion struct {
	WR    uint64
	Op    Op
	Slot  int   // OpRecv: the receive slot that holds the frame
	Bytes int   // OpRecv: bytes received
	Err   error // the work request failed (the frame is lost)
}

// Errors.
var (
	ErrClosed      = errors.New("verbs: link closed")
	ErrNoCredit    = errors.New("verbs: peer has no receive posted")
	ErrQueueFull   = errors.New("verbs: send queue full")
	ErrUnsupported = errors.New("verbs: not supported by this link")
	ErrBadSend     = errors.New("verbs: send does not fit the link's frames")
)

// checkSend validates a send against the caps and the region.
func checkSend(c Caps, r *Region, off, n int) error {
	if r == nil || off < 0 || n <= 0 || off+n > len(r.Buf) {
		return fmt.Errorf("%w: %d bytes at %d outside the region", ErrBadSend, n, off)
	}
	if n > c.FrameBytes || c.EqualSizes && n != c.FrameBytes {
		return fmt.Errorf("%w: %d bytes, frames are %d (equal sizes: %v)", ErrBadSend, n, c.FrameBytes, c.EqualSizes)
	}
	return nil
}

// InPlace is a Conn whose sends can be written straight into the receive
// slot the peer posted (shared memory): the sender writes a frame once,
// where the receiver reads it, with no registered buffer and no copy.
// Backends that move frames between separate memories (RDMA, the fault
// backend) do not implement it.
type InPlace interface {
	// SendSlot is the memory of the peer's receive slot the next send lands
	// in (ErrNoCredit: none posted; ErrQueueFull: poll first). It stays
	// the next send's until PostSendSlot.
	SendSlot() ([]byte, error)
	// PostSendSlot sends the first n bytes written into SendSlot's memory,
	// with work request id wr.
	PostSendSlot(wr uint64, n int) error
}

package side

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"strata/peers/internal/frame"
	"strata/peers/internal/readgrow"
	"strata/peers/verbs"
)

// Link kinds on the wire.
const (
	ctlHello byte = iota + 1
	ctlReply
	ctlData  // seq u64, frame body: a message that the side channel did not carry
	ctlAck   // seq u64: every message up to it was delivered
	ctlFault // seq u64: the side channel failed; resend from there
	ctlPing  // nonce u64
	ctlPong  // nonce u64
)

// sideTiming.
const (
	verbsOpenTimeout = 5 * time.Second
	pingEvery        = time.Second
	linkDeadAfter    = 10 * time.Second // no pong for this long: the link is dead
	maxRetained      = 256 << 20
)

// hello is what the opening side offers.
type hello struct {
	Want   string `json:"want"`
	BootID string `json:"boot_id,omitempty"`
	// Token binds the side channel to this stream: only the peer this
	// authenticated stream reaches learns it. It names the ring the opener
	// made (shared memory), and is the first message on an RDMA link.
	Token string `json:"token,omitempty"`
	// Shm: the opener made a ring with Caps.
	Shm  bool       `json:"shm,omitempty"`
	Caps verbs.Caps `json:"caps"`
	// RDMA: the opener's queue pair, when it has a device.
	RDMA *rdmaOffer `json:"rdma,omitempty"`
}

// rdmaOffer is one end of an RDMA link: its queue pair's endpoint and the
// caps both ends use.
type rdmaOffer struct {
	Caps     verbs.Caps     `json:"caps"`
	Endpoint verbs.Endpoint `json:"endpoint"`
}

// reply is the answer: the transport chosen, and why not a better one.
type reply struct {
	Transport string `json:"transport"`
	Why       string `json:"why,omitempty"`
	// RDMA: the answerer's queue pair, connected to the opener's.
	RDMA *rdmaOffer `json:"rdma,omitempty"`
}

// rdmaCaps are the frames of RDMA links: Apple's constraints on a Mac (or
// when asked for), else 64 KiB frames.
func rdmaCaps(apple bool) verbs.Caps {
	if apple || runtime.GOOS == "darwin" {
		return verbs.AppleCaps
	}
	return verbs.Caps{FrameBytes: 64 << 10, Depth: 32}
}

// checkOffer validates a peer's RDMA offer before any of it is used.
func checkOffer(o *rdmaOffer, want verbs.Caps) error {
	if err := o.Endpoint.Validate(); err != nil {
		return err
	}
	if err := o.Caps.Validate(); err != nil {
		return err
	}
	if o.Caps.FrameBytes != want.FrameBytes || o.Caps.Depth != want.Depth || o.Caps.EqualSizes != want.EqualSizes {
		return fmt.Errorf("RDMA caps %+v, this node uses %+v", o.Caps, want)
	}
	return nil
}

// ctlWriter writes control messages: a kind byte, a 4-byte big-endian
// length, the payload. Safe for concurrent use.
type ctlWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
	s  network.Stream
}

func (c *ctlWriter) raw(kind byte, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var h [5]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	c.w.Write(h[:])
	_, err := c.w.Write(payload)
	return err
}

func (c *ctlWriter) ctl(kind byte, v uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return c.raw(kind, b[:])
}

func (c *ctlWriter) data(seq uint64, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var h [13]byte
	h[0] = ctlData
	binary.BigEndian.PutUint32(h[1:], uint32(8+len(body)))
	binary.BigEndian.PutUint64(h[5:], seq)
	c.w.Write(h[:])
	_, err := c.w.Write(body)
	return err
}

func (c *ctlWriter) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.SetWriteDeadline(time.Now().Add(frame.TransferTimeout(c.w.Buffered())))
	return c.w.Flush()
}

// readCtl reads one control message of at most limit payload bytes. The
// payload is allocated as its bytes arrive, not as announced (a peer that
// announces 64 MiB and sends nothing holds nothing); with hold, every
// growth is first counted in the sending peer's budget (bridge.hold), and
// the caller gives back cap(payload) when done with it.
func readCtl(r *bufio.Reader, limit int, hold func(n int) error) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(h[1:]))
	if n > limit {
		return 0, nil, fmt.Errorf("control message of %d bytes (cap %d)", n, limit)
	}
	b, err := readgrow.Read(r, nil, n, hold)
	if err != nil {
		return 0, nil, err
	}
	return h[0], b, nil
}

// shmCaps are the frames of shared-memory links: big enough that most
// activations are one frame, read in place; or Apple's.
func shmCaps(apple bool) verbs.Caps {
	if apple {
		return verbs.AppleCaps
	}
	return verbs.Caps{FrameBytes: 1<<20 + 4096, Depth: 16}
}

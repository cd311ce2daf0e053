package verbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"
)

// Every frame starts with a header that makes an unreliable link safe: a
// frame that was dropped, truncated, corrupted, reordered or held back is
// detected by the Receiver and never delivered as data.
//
//	0  magic    u32 "SVF1"
//	4  crc      u32 CRC-32C of bytes 8..32+len (the rest of the header
//	            and the payload; on equal-size links, up to the frame's end)
//	8  seq      u64 message number (the caller's; consecutive)
//	16 msgLen   u32 bytes of the whole message
//	20 index    u32 this frame's place in the message
//	24 count    u32 frames in the message
//	28 len      u32 payload bytes in this frame
//	32 payload
//
// On a link with EqualSizes every frame is padded to FrameBytes.
const (
	frameHeader = 32
	frameMagic  = 0x31465653 // "SVF1"
	maxFrames   = 1 << 16
	// keepAssembly bounds the buffer a Receiver keeps between messages
	// that span frames.
	keepAssembly = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Fault kinds a Receiver or Sender reports.
var (
	ErrCorrupt = errors.New("verbs: corrupt frame")
	ErrGap     = errors.New("verbs: frame missing or out of order")
	ErrStall   = errors.New("verbs: link stalled")
)

// FaultError is a detected fault: the link can no longer be trusted, and
// messages from Next on must travel another way.
type FaultError struct {
	Err  error  // ErrCorrupt, ErrGap or ErrStall
	Next uint64 // the first message not delivered
	What string
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("%v at message %d: %s", e.Err, e.Next, e.What)
}

func (e *FaultError) Unwrap() error { return e.Err }

// Sender splits messages into frames and posts them on a Conn.
type Sender struct {
	conn   Conn
	caps   Caps
	region *Region
	free   []int // indexes of free frame buffers in region
	cs     []Completion
	// scratch holds a message Write could not write in place.
	scratch []byte
	// Stall is how long a send may wait for credits before it fails with
	// ErrStall. Zero: 2 s.
	Stall time.Duration
}

// NewSender registers Caps().Depth frame buffers on c. On an InPlace
// Conn they are registered at the first message that needs them (one of
// several frames): Write puts the others straight into the peer's slots,
// and a shared-memory link's buffers are 16 MiB a peer that the heap
// would otherwise hold (and, reused from freed heap, zero page by page).
func NewSender(c Conn) (*Sender, error) {
	caps := c.Caps()
	s := &Sender{conn: c, caps: caps, cs: make([]Completion, caps.Depth)}
	if _, ok := c.(InPlace); !ok {
		if err := s.register(); err != nil {
			return nil, err
		}
	}
	for i := caps.Depth - 1; i >= 0; i-- {
		s.free = append(s.free, i)
	}
	return s, nil
}

func (s *Sender) register() error {
	reg, err := s.conn.Register(s.caps.Depth * s.caps.FrameBytes)
	if err != nil {
		return err
	}
	s.region = reg
	return nil
}

// Send posts msg as message seq. It returns once every frame is posted;
// messages must be sent with consecutive seq.
func (s *Sender) Send(ctx context.Context, seq uint64, msg []byte) error {
	per := s.caps.FrameBytes - frameHeader
	count := max(1, (len(msg)+per-1)/per)
	if count > maxFrames {
		return fmt.Errorf("verbs: message of %d bytes exceeds %d", len(msg), s.caps.MaxMessage())
	}
	if _, ok := s.conn.(InPlace); ok && count == 1 && len(msg) > 0 {
		return s.Write(ctx, seq, len(msg), func(dst []byte) { copy(dst, msg) })
	}
	if s.region == nil {
		if err := s.register(); err != nil {
			return err
		}
	}
	for i := 0; i < count; i++ {
		part := msg[min(i*per, len(msg)):min((i+1)*per, len(msg))]
		if err := s.sendFrame(ctx, seq, len(msg), i, count, part); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sender) sendFrame(ctx context.Context, seq uint64, msgLen, index, count int, part []byte) error {
	var deadline time.Time
	for len(s.free) == 0 {
		if err := s.reap(); err != nil {
			return err
		}
		if len(s.free) > 0 {
			break
		}
		if err := s.wait(ctx, &deadline, seq); err != nil {
			return err
		}
	}
	b := s.free[len(s.free)-1]
	fb := s.caps.FrameBytes
	buf := s.region.Buf[b*fb : (b+1)*fb]
	n := putFrame(buf, seq, msgLen, index, count, part)
	if s.caps.EqualSizes {
		// The padding is checked too: every byte the link carried is.
		clear(buf[n:])
		n = fb
		binary.LittleEndian.PutUint32(buf[4:], crc32.Checksum(buf[8:n], castagnoli))
	}
	for {
		err := s.conn.PostSend(uint64(b), s.region, b*fb, n)
		if err == nil {
			s.free = s.free[:len(s.free)-1]
			return nil
		}
		if !errors.Is(err, ErrNoCredit) && !errors.Is(err, ErrQueueFull) {
			return err
		}
		if err := s.reap(); err != nil {
			return err
		}
		if err := s.wait(ctx, &deadline, seq); err != nil {
			return err
		}
	}
}

// reap returns the buffers of finished sends to the free list.
func (s *Sender) reap() error {
	n, err := s.conn.Poll(s.cs)
	for _, c := range s.cs[:n] {
		if c.Op == OpSend && c.WR != inPlaceWR {
			s.free = append(s.free, int(c.WR))
		}
	}
	return err
}

func (s *Sender) wait(ctx context.Context, deadline *time.Time, seq uint64) error {
	stall := s.Stall
	if stall <= 0 {
		stall = 2 * time.Second
	}
	if deadline.IsZero() {
		*deadline = time.Now().Add(stall)
	}
	if time.Now().After(*deadline) {
		return &FaultError{Err: ErrStall, Next: seq, What: fmt.Sprintf("no credit from the peer for %v", stall)}
	}
	wctx, cancel := context.WithDeadline(ctx, *deadline)
	err := s.conn.Wait(wctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// putFrame writes a frame into buf and returns its length.
func putFrame(buf []byte, seq uint64, msgLen, index, count int, part []byte) int {
	copy(buf[frameHeader:], part)
	return putHeader(buf, seq, msgLen, index, count, len(part))
}

// putHeader writes the header of a frame whose n payload bytes are in
// place after it, and returns the frame's length.
func putHeader(buf []byte, seq uint64, msgLen, index, count, n int) int {
	binary.LittleEndian.PutUint32(buf[0:], frameMagic)
	binary.LittleEndian.PutUint64(buf[8:], seq)
	binary.LittleEndian.PutUint32(buf[16:], uint32(msgLen))
	binary.LittleEndian.PutUint32(buf[20:], uint32(index))
	binary.LittleEndian.PutUint32(buf[24:], uint32(count))
	binary.LittleEndian.PutUint32(buf[28:], uint32(n))
	n += frameHeader
	binary.LittleEndian.PutUint32(buf[4:], crc32.Checksum(buf[8:n], castagnoli))
	return n
}

// inPlaceWR marks the completion of a send written in place (no buffer
// of the Sender's to free).
const inPlaceWR = ^uint64(0)

// Write sends message seq of n bytes that fill writes. On an InPlace Conn
// a message of one frame is written once, straight into the receive slot
// the peer posted (where its Receiver reads it in place); otherwise fill
// writes into a buffer the Sender keeps and Send frames it. fill must
// write all n bytes and must not keep dst.
func (s *Sender) Write(ctx context.Context, seq uint64, n int, fill func(dst []byte)) error {
	ip, ok := s.conn.(InPlace)
	if !ok || n == 0 || n > s.caps.FrameBytes-frameHeader {
		if cap(s.scratch) < n {
			s.scratch = make([]byte, n)
		}
		b := s.scratch[:n]
		fill(b)
		return s.Send(ctx, seq, b)
	}
	var deadline time.Time
	for {
		dst, err := ip.SendSlot()
		if err == nil {
			fill(dst[frameHeader : frameHeader+n])
			m := putHeader(dst, seq, n, 0, 1, n)
			if s.caps.EqualSizes {
				clear(dst[m:])
				m = len(dst)
				binary.LittleEndian.PutUint32(dst[4:], crc32.Checksum(dst[8:m], castagnoli))
			}
			return ip.PostSendSlot(inPlaceWR, m)
		}
		if !errors.Is(err, ErrNoCredit) && !errors.Is(err, ErrQueueFull) {
			return err
		}
		if err := s.reap(); err != nil {
			return err
		}
		if err := s.wait(ctx, &deadline, seq); err != nil {
			return err
		}
	}
}

// Receiver posts every receive slot of a Conn and hands out whole, checked
// messages in order.
type Receiver struct {
	conn  Conn
	caps  Caps
	cs    []Completion
	got   []Completion // polled (in cs), consumed up to gotAt
	gotAt int
	next  uint64 // the message expected
	hold  int    // slot handed out by the last Recv, -1 if none
	asm   []byte // a message of several frames being put together
	// lend: slots lent out (Lend) live outside the Conn until Return;
	// another goroutine returns them, so they meet here.
	lend lending
	// Stall is how long a message may stay incomplete before Recv fails
	// with ErrStall. Zero: 2 s.
	Stall time.Duration
}

// NewReceiver posts all of c's receive slots; the first message expected
// is number first.
func NewReceiver(c Conn, first uint64) (*Receiver, error) {
	caps := c.Caps()
	r := &Receiver{conn: c, caps: caps, cs: make([]Completion, caps.Depth), next: first, hold: -1}
	for i := 0; i < caps.Depth; i++ {
		if err := c.PostRecv(uint64(i), i); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Next is the number of the first message not yet delivered.
func (r *Receiver) Next() uint64 { return r.next }

// Caps are the link's caps.
func (r *Receiver) Caps() Caps { return r.caps }

// lending is the account of slots lent out of a Receiver. Its own
// goroutine posts returned slots again (a Conn has one user); Close waits
// for every lent slot before it closes the Conn, whose memory they are.
type lending struct {
	mu       sync.Mutex
	out      int   // lent and not yet posted again (returned ones included)
	returned []int // back from the borrower, to post again
	closing  bool  // Close was called: the last Return closes conn
	closed   bool
}

// Lend takes the receive slot of the message the last Recv returned in
// place out of the Receiver's hands: it is not posted again (so the peer
// cannot write into it) until Return(slot). ok is false when the message
// was not in a slot (several frames, put together in a buffer): nothing
// to lend. The message's bytes stay valid until Return.
//
// Every lent slot is a credit the peer lacks: a borrower that does not
// return it in time slows the link, and one that never does closes it
// down to the slots left. Callers bound what they lend (Lent).
func (r *Receiver) Lend() (slot int, ok bool) {
	if r.hold < 0 {
		return 0, false
	}
	slot, r.hold = r.hold, -1
	r.lend.mu.Lock()
	r.lend.out++
	r.lend.mu.Unlock()
	return slot, true
}

// Lent is the number of slots lent and not yet posted again.
func (r *Receiver) Lent() int {
	r.lend.mu.Lock()
	defer r.lend.mu.Unlock()
	return r.lend.out
}

// Return gives back a slot Lend took, from any goroutine, once the
// borrower is done reading it. The Receiver posts it again on its next
// Recv; after Close, the last slot returned closes the Conn.
func (r *Receiver) Return(slot int) {
	l := &r.lend
	l.mu.Lock()
	if l.closing {
		l.out--
		last := l.out == 0 && !l.closed
		l.closed = l.closed || last
		l.mu.Unlock()
		if last {
			r.conn.Close()
		}
		return
	}
	l.returned = append(l.returned, slot)
	l.mu.Unlock()
}

// repost posts the returned slots again (the Receiver's goroutine).
func (r *Receiver) repost() error {
	l := &r.lend
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.returned) > 0 {
		slot := l.returned[len(l.returned)-1]
		if err := r.conn.PostRecv(uint64(slot), slot); err != nil {
			return err
		}
		l.returned = l.returned[:len(l.returned)-1]
		l.out--
	}
	return nil
}

// Close closes the Conn once no slot is lent: at once, or when the last
// lent slot comes back (a borrower may still be reading one; the Conn's
// memory must outlive it). The Receiver must not be used after.
func (r *Receiver) Close() error {
	l := &r.lend
	l.mu.Lock()
	l.closing = true
	l.out -= len(l.returned) // returned, never to be posted: not out
	l.returned = nil
	last := l.out == 0 && !l.closed
	l.closed = l.closed || last
	l.mu.Unlock()
	if last {
		return r.conn.Close()
	}
	return nil
}

// Recv returns the next message. A message of one frame is returned in
// place, in the receive slot (valid until the next Recv); a longer one is
// put together in a buffer Recv reuses. Any fault is a *FaultError, and
// the Receiver must not be used after one.
func (r *Receiver) Recv(ctx context.Context) (seq uint64, msg []byte, err error) {
	if r.hold >= 0 {
		if err := r.conn.PostRecv(uint64(r.hold), r.hold); err != nil {
			return 0, nil, err
		}
		r.hold = -1
	}
	if err := r.repost(); err != nil {
		return 0, nil, err
	}
	var (
		msgLen, count, index int
		asm                  []byte
		deadline             time.Time
	)
	for {
		c, err := r.take(ctx, index > 0, &deadline)
		if err != nil {
			return 0, nil, err
		}
		if c.Err != nil {
			return 0, nil, r.fault(ErrGap, "receive failed: %v", c.Err)
		}
		f := r.conn.RecvBuf(c.Slot)[:c.Bytes]
		fseq, fmsgLen, findex, fcount, payload, err := r.check(f)
		if err != nil {
			r.conn.PostRecv(uint64(c.Slot), c.Slot)
			return 0, nil, err
		}
		if fseq < r.next {
			// A late frame of a message already given up on: drop it.
			if err := r.conn.PostRecv(uint64(c.Slot), c.Slot); err != nil {
				return 0, nil, err
			}
			continue
		}
		if fseq != r.next || findex != index || index > 0 && (fcount != count || fmsgLen != msgLen) {
			r.conn.PostRecv(uint64(c.Slot), c.Slot)
			return 0, nil, r.fault(ErrGap, "got message %d frame %d, expected frame %d", fseq, findex, index)
		}
		if index == 0 {
			msgLen, count = fmsgLen, fcount
			if count == 1 {
				if len(payload) != msgLen {
					r.conn.PostRecv(uint64(c.Slot), c.Slot)
					return 0, nil, r.fault(ErrCorrupt, "one frame of %d bytes for a message of %d", len(payload), msgLen)
				}
				r.hold = c.Slot
				r.next++
				return fseq, payload, nil
			}
			// The message grows as its frames arrive (append doubles): a
			// first frame that announces 4 GiB costs one frame's bytes.
			asm = r.asm[:0]
		}
		asm = append(asm, payload...)
		if err := r.conn.PostRecv(uint64(c.Slot), c.Slot); err != nil {
			return 0, nil, err
		}
		index++
		deadline = time.Time{}
		if index == count {
			if len(asm) != msgLen {
				return 0, nil, r.fault(ErrCorrupt, "frames of %d bytes for a message of %d", len(asm), msgLen)
			}
			if cap(asm) <= keepAssembly {
				r.asm = asm // reused by the next message
			}
			r.next++
			return fseq, asm, nil
		}
	}
}

// Ready reports, without waiting, whether a frame has arrived for the next
// Recv to start from. A caller that expects a message very soon (a
// tensor-parallel peer finishing the same layer) spins on Ready on its own
// goroutine, then calls Recv, which takes that frame without parking.
func (r *Receiver) Ready() (bool, error) {
	for {
		for r.gotAt < len(r.got) {
			if r.got[r.gotAt].Op == OpRecv {
				return true, nil
			}
			r.gotAt++ // take skips these too
		}
		n, err := r.conn.Poll(r.cs)
		if err != nil || n == 0 {
			return false, err
		}
		r.got, r.gotAt = r.cs[:n], 0
	}
}

// take returns the next receive completion, waiting for it. Inside a
// message (partial), waiting longer than Stall is a fault.
func (r *Receiver) take(ctx context.Context, partial bool, deadline *time.Time) (Completion, error) {
	for {
		for r.gotAt < len(r.got) {
			c := r.got[r.gotAt]
			r.gotAt++
			if c.Op == OpRecv {
				return c, nil
			}
		}
		// Slots returned meanwhile are credits the peer may be waiting for.
		if err := r.repost(); err != nil {
			return Completion{}, err
		}
		// Poll into got itself (its own array: no copy, no allocation).
		n, err := r.conn.Poll(r.cs)
		if err != nil {
			return Completion{}, err
		}
		if n > 0 {
			r.got, r.gotAt = r.cs[:n], 0
			continue
		}
		wctx := ctx
		if partial {
			stall := r.Stall
			if stall <= 0 {
				stall = 2 * time.Second
			}
			if deadline.IsZero() {
				*deadline = time.Now().Add(stall)
			}
			if time.Now().After(*deadline) {
				return Completion{}, r.fault(ErrStall, "message incomplete after %v", stall)
			}
		}
		cancel := context.CancelFunc(func() {})
		if partial {
			wctx, cancel = context.WithDeadline(ctx, *deadline)
		}
		err = r.conn.Wait(wctx)
		cancel()
		if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
			if ctx.Err() != nil {
				return Completion{}, ctx.Err()
			}
			return Completion{}, err
		}
	}
}

// check validates one frame's header and checksum.
func (r *Receiver) check(f []byte) (seq uint64, msgLen, index, count int, payload []byte, err error) {
	if len(f) < frameHeader || binary.LittleEndian.Uint32(f) != frameMagic {
		return 0, 0, 0, 0, nil, r.fault(ErrCorrupt, "frame of %d bytes without a header", len(f))
	}
	if r.caps.EqualSizes && len(f) != r.caps.FrameBytes {
		return 0, 0, 0, 0, nil, r.fault(ErrCorrupt, "frame of %d bytes on a link of %d-byte frames", len(f), r.caps.FrameBytes)
	}
	n := int(binary.LittleEndian.Uint32(f[28:]))
	if n > len(f)-frameHeader {
		return 0, 0, 0, 0, nil, r.fault(ErrCorrupt, "truncated frame: %d of %d bytes", len(f)-frameHeader, n)
	}
	covered := f[8 : frameHeader+n]
	if r.caps.EqualSizes {
		covered = f[8:]
	}
	if crc32.Checksum(covered, castagnoli) != binary.LittleEndian.Uint32(f[4:]) {
		return 0, 0, 0, 0, nil, r.fault(ErrCorrupt, "bad checksum")
	}
	seq = binary.LittleEndian.Uint64(f[8:])
	msgLen = int(binary.LittleEndian.Uint32(f[16:]))
	index = int(binary.LittleEndian.Uint32(f[20:]))
	count = int(binary.LittleEndian.Uint32(f[24:]))
	if count < 1 || count > maxFrames || index >= count || msgLen > count*(r.caps.FrameBytes-frameHeader) {
		return 0, 0, 0, 0, nil, r.fault(ErrCorrupt, "frame %d of %d", index, count)
	}
	return seq, msgLen, index, count, f[frameHeader : frameHeader+n], nil
}

func (r *Receiver) fault(kind error, format string, args ...any) error {
	return &FaultError{Err: kind, Next: r.next, What: fmt.Sprintf(format, args...)}
}

package verbs

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// ring is a Conn over one block of memory that both ends map: the loop
// backend (Go memory in one process) and the shm backend (a file in
// /dev/shm mapped by two processes). The block holds, for each direction,
// the receiver's slots, a ring of posted slot numbers (the credits) and a
// ring of finished sends (slot, bytes); one side writes each word, and the
// counters are published with atomic stores after the data they cover, so
// no lock crosses processes. Side 0 sends in direction 0 and receives in
// direction 1.
//
// Layout (all offsets from the start of the block):
//
//	0      header: magic, version, frame bytes, depth, flags, token[32]
//	256    per side s (256 bytes apart): ev (u32: bumped on every event for
//	       s), sleeping (u32), closed (u32)
//	4096   direction d control (ctlBytes each): postHead (u64) at 0,
//	       doneHead (u64) at 64, posted[depth] (u32) at 128, done[depth]
//	       ({slot u32, bytes u32}) after
//	...    direction d slots: depth × frame bytes
type ring struct {
	mem   []byte
	caps  Caps
	side  int
	wake  waker
	tx    dir // we send: we read postHead/posted, write doneHead/done
	rx    dir // we receive: we write postHead/posted, read doneHead/done
	flags uint32

	// Private counters: each mirrors a shared counter that only this side
	// writes, or counts how far this side has read one the peer writes.
	txPostTail, txDoneHead uint64
	rxPostHead, rxDoneTail uint64
	posted                 []uint64 // rx: work request id of each posted slot
	isPosted               []bool
	local                  []Completion // finished sends not yet polled
	closed                 bool
}

type dir struct {
	postHead, doneHead *uint64
	posted             []byte // depth × u32
	done               []byte // depth × 8
	slots              []byte // depth × frame
}

const (
	ringMagic   = 0x5354524154415652 // "STRATAVR"
	ringVersion = 1
	headerBytes = 4096
	sideStride  = 256
	tokenBytes  = 32
	flagApple   = 1
)

func ctlBytes(depth int) int { return roundUp(128+depth*4+depth*8, 4096) }

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// ringBytes is the size of the block for caps.
func ringBytes(c Caps) int {
	return headerBytes + 2*ctlBytes(c.Depth) + 2*c.Depth*c.FrameBytes
}

// initRing writes a fresh header into mem (the creating side).
func initRing(mem []byte, c Caps, flags uint32, token []byte) {
	binary.LittleEndian.PutUint64(mem[0:], ringMagic)
	binary.LittleEndian.PutUint32(mem[8:], ringVersion)
	binary.LittleEndian.PutUint32(mem[12:], uint32(c.FrameBytes))
	binary.LittleEndian.PutUint32(mem[16:], uint32(c.Depth))
	binary.LittleEndian.PutUint32(mem[20:], flags)
	copy(mem[24:24+tokenBytes], token)
}

// readHeader reads the caps, flags and token a block was made with.
func readHeader(mem []byte) (c Caps, flags uint32, token []byte, err error) {
	if len(mem) < headerBytes || binary.LittleEndian.Uint64(mem[0:]) != ringMagic {
		return c, 0, nil, fmt.Errorf("verbs: not a strata ring")
	}
	if v := binary.LittleEndian.Uint32(mem[8:]); v != ringVersion {
		return c, 0, nil, fmt.Errorf("verbs: ring version %d, want %d", v, ringVersion)
	}
	c.FrameBytes = int(binary.LittleEndian.Uint32(mem[12:]))
	c.Depth = int(binary.LittleEndian.Uint32(mem[16:]))
	flags = binary.LittleEndian.Uint32(mem[20:])
	if err := c.Validate(); err != nil {
		return c, 0, nil, err
	}
	if ringBytes(c) != len(mem) {
		return c, 0, nil, fmt.Errorf("verbs: ring of %d bytes, its header says %d", len(mem), ringBytes(c))
	}
	c.Reliable = true
	if flags&flagApple != 0 {
		c.EqualSizes = true
	}
	return c, flags, append([]byte(nil), mem[24:24+tokenBytes]...), nil
}

func newRing(mem []byte, side int, w waker) (*ring, error) {
	c, flags, _, err := readHeader(mem)
	if err != nil {
		return nil, err
	}
	r := &ring{mem: mem, caps: c, side: side, wake: w, flags: flags,
		posted: make([]uint64, c.Depth), isPosted: make([]bool, c.Depth)}
	d0, d1 := r.dirAt(0), r.dirAt(1)
	if side == 0 {
		r.tx, r.rx = d0, d1
	} else {
		r.tx, r.rx = d1, d0
	}
	// A side that opens a ring in use (reconnect) starts from its state.
	r.txDoneHead = atomic.LoadUint64(r.tx.doneHead)
	r.txPostTail = r.txDoneHead
	r.rxPostHead = atomic.LoadUint64(r.rx.postHead)
	r.rxDoneTail = atomic.LoadUint64(r.rx.doneHead)
	return r, nil
}

func (r *ring) dirAt(d int) dir {
	c := r.caps
	ctl := headerBytes + d*ctlBytes(c.Depth)
	slots := headerBytes + 2*ctlBytes(c.Depth) + d*c.Depth*c.FrameBytes
	return dir{
		postHead: (*uint64)(unsafe.Pointer(&r.mem[ctl])),
		doneHead: (*uint64)(unsafe.Pointer(&r.mem[ctl+64])),
		posted:   r.mem[ctl+128 : ctl+128+4*c.Depth],
		done:     r.mem[ctl+128+4*c.Depth : ctl+128+12*c.Depth],
		slots:    r.mem[slots : slots+c.Depth*c.FrameBytes],
	}
}

// word returns side s's u32 at offset off in its side block.
func (r *ring) word(s, off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[sideStride*(1+s)+off]))
}

func (r *ring) ev(s int) *uint32       { return r.word(s, 0) }
func (r *ring) sleeping(s int) *uint32 { return r.word(s, 64) }
func (r *ring) closedFlag(s int) *uint32 {
	return r.word(s, 128)
}

// notify tells the peer something happened (a credit or a frame).
func (r *ring) notify() {
	p := 1 - r.side
	atomic.AddUint32(r.ev(p), 1)
	if atomic.LoadUint32(r.sleeping(p)) != 0 {
		r.wake.wake(r.ev(p), p)
	}
}

func (r *ring) peerClosed() bool { return atomic.LoadUint32(r.closedFlag(1-r.side)) != 0 }

func (r *ring) Caps() Caps { return r.caps }

func (r *ring) Register(size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("verbs: register %d bytes", size)
	}
	return &Region{Buf: make([]byte, size)}, nil
}

func (r *ring) PostSend(wr uint64, reg *Region, off, n int) error {
	if r.closed || r.peerClosed() {
		return ErrClosed
	}
	if err := checkSend(r.caps, reg, off, n); err != nil {
		return err
	}
	return r.postSend(wr, reg, off, n)
}

// postSend is PostSend without the size rules: the fault backend sends
// truncated frames on equal-size links with it.
func (r *ring) postSend(wr uint64, reg *Region, off, n int) error {
	if len(r.local) >= r.caps.Depth {
		return ErrQueueFull
	}
	if r.txPostTail == atomic.LoadUint64(r.tx.postHead) {
		return ErrNoCredit
	}
	slot, err := r.peerSlot()
	if err != nil {
		return err
	}
	fb := r.caps.FrameBytes
	copy(r.tx.slots[slot*fb:slot*fb+n], reg.Buf[off:off+n])
	r.complete(wr, slot, n)
	return nil
}

// peerSlot is the receive slot the peer posted for our next send.
func (r *ring) peerSlot() (int, error) {
	slot := binary.LittleEndian.Uint32(r.tx.posted[4*(r.txPostTail%uint64(r.caps.Depth)):])
	if int(slot) >= r.caps.Depth {
		return 0, fmt.Errorf("verbs: peer posted slot %d of %d", slot, r.caps.Depth)
	}
	return int(slot), nil
}

// complete publishes a frame of n bytes written into the peer's slot.
func (r *ring) complete(wr uint64, slot, n int) {
	depth := uint64(r.caps.Depth)
	e := r.tx.done[8*(r.txDoneHead%depth):]
	binary.LittleEndian.PutUint32(e, uint32(slot))
	binary.LittleEndian.PutUint32(e[4:], uint32(n))
	r.txPostTail++
	r.txDoneHead++
	atomic.StoreUint64(r.tx.doneHead, r.txDoneHead)
	r.notify()
	r.local = append(r.local, Completion{WR: wr, Op: OpSend})
}

// SendSlot implements InPlace.
func (r *ring) SendSlot() ([]byte, error) {
	if r.closed || r.peerClosed() {
		return nil, ErrClosed
	}
	if len(r.local) >= r.caps.Depth {
		return nil, ErrQueueFull
	}
	if r.txPostTail == atomic.LoadUint64(r.tx.postHead) {
		return nil, ErrNoCredit
	}
	slot, err := r.peerSlot()
	if err != nil {
		return nil, err
	}
	fb := r.caps.FrameBytes
	return r.tx.slots[slot*fb : (slot+1)*fb : (slot+1)*fb], nil
}

// PostSendSlot implements InPlace.
func (r *ring) PostSendSlot(wr uint64, n int) error {
	if n <= 0 || n > r.caps.FrameBytes || r.caps.EqualSizes && n != r.caps.FrameBytes {
		return fmt.Errorf("%w: %d bytes, frames are %d (equal sizes: %v)", ErrBadSend, n, r.caps.FrameBytes, r.caps.EqualSizes)
	}
	if _, err := r.SendSlot(); err != nil {
		return err
	}
	slot, _ := r.peerSlot()
	r.complete(wr, slot, n)
	return nil
}

func (r *ring) PostRecv(wr uint64, slot int) error {
	if r.closed {
		return ErrClosed
	}
	if slot < 0 || slot >= r.caps.Depth || r.isPosted[slot] {
		return fmt.Errorf("verbs: post receive slot %d: out of range or already posted", slot)
	}
	r.posted[slot], r.isPosted[slot] = wr, true
	binary.LittleEndian.PutUint32(r.rx.posted[4*(r.rxPostHead%uint64(r.caps.Depth)):], uint32(slot))
	r.rxPostHead++
	atomic.StoreUint64(r.rx.postHead, r.rxPostHead)
	r.notify()
	return nil
}

func (r *ring) RecvBuf(slot int) []byte {
	fb := r.caps.FrameBytes
	return r.rx.slots[slot*fb : (slot+1)*fb : (slot+1)*fb]
}

func (r *ring) Poll(cs []Completion) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	k := copy(cs, r.local)
	r.local = r.local[:copy(r.local, r.local[k:])]
	head := atomic.LoadUint64(r.rx.doneHead)
	depth := uint64(r.caps.Depth)
	for k < len(cs) && r.rxDoneTail < head {
		e := r.rx.done[8*(r.rxDoneTail%depth):]
		slot, n := int(binary.LittleEndian.Uint32(e)), int(binary.LittleEndian.Uint32(e[4:]))
		if slot >= r.caps.Depth || !r.isPosted[slot] || n > r.caps.FrameBytes {
			return k, fmt.Errorf("verbs: peer filled slot %d (%d bytes) that was not posted", slot, n)
		}
		r.isPosted[slot] = false
		cs[k] = Completion{WR: r.posted[slot], Op: OpRecv, Slot: slot, Bytes: n}
		k++
		r.rxDoneTail++
	}
	if k == 0 && r.peerClosed() {
		return 0, ErrClosed
	}
	return k, nil
}

// ready reports whether Poll or PostSend has something new to do.
func (r *ring) ready() bool {
	return len(r.local) > 0 || r.rxDoneTail < atomic.LoadUint64(r.rx.doneHead) ||
		r.txPostTail < atomic.LoadUint64(r.tx.postHead) || r.peerClosed()
}

// spinFor is how long Wait spins before it parks: a frame that comes
// within it costs no system call and no scheduler wake-up.
var spinFor = 20 * time.Microsecond

func (r *ring) Wait(ctx context.Context) error {
	if r.closed {
		return ErrClosed
	}
	if r.ready() {
		return nil
	}
	// With one processor the spin yields it on every round, so that the
	// goroutine that will answer (an actor of this process, when both
	// ends live in one) runs meanwhile. With more it does not: Gosched
	// wakes an idle processor's thread to take this goroutine over while
	// this thread sleeps, thread churn that a peer process computing on
	// the same cores pays for; the answering goroutine has a processor.
	start, alone := time.Now(), runtime.GOMAXPROCS(0) == 1
	for i := 0; ; i++ {
		if r.ready() {
			return nil
		}
		if alone {
			runtime.Gosched()
		}
		if i%16 == 15 && time.Since(start) > spinFor {
			break
		}
	}
	// Then park where the Go scheduler sees it (the shm backend's named
	// pipe, the loop backend's channel): this goroutine gives up its
	// processor, and the peer wakes it only while its sleeping flag is
	// set. The flag is set before the last look at the ring, and the
	// peer publishes before it reads the flag, so one of the two sees the
	// other (Dekker): no wake-up is lost.
	ev, sl := r.ev(r.side), r.sleeping(r.side)
	for {
		seen := atomic.LoadUint32(ev)
		atomic.StoreUint32(sl, 1)
		if r.ready() {
			atomic.StoreUint32(sl, 0)
			return nil
		}
		err := r.wake.wait(ctx, ev, seen, r.side)
		atomic.StoreUint32(sl, 0)
		if err != nil {
			return err
		}
		if r.ready() {
			return nil
		}
	}
}

func (r *ring) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	atomic.StoreUint32(r.closedFlag(r.side), 1)
	r.notify()
	return nil
}

// chanWaker wakes sides of a ring in one process.
type chanWaker [2]chan struct{}

func newChanWaker() *chanWaker {
	return &chanWaker{make(chan struct{}, 1), make(chan struct{}, 1)}
}

func (w *chanWaker) wait(ctx context.Context, ev *uint32, seen uint32, side int) error {
	if atomic.LoadUint32(ev) != seen {
		return nil
	}
	select {
	case <-w[side]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *chanWaker) wake(_ *uint32, side int) {
	select {
	case w[side] <- struct{}{}:
	default:
	}
}

// waker parks a side until its event word changes, and wakes it.
type waker interface {
	// wait returns when *ev != seen (or spuriously), or ctx ends.
	wait(ctx context.Context, ev *uint32, seen uint32, side int) error
	wake(ev *uint32, side int)
}

package peers

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"strata/peers/internal/readgrow"
	"strata/peers/verbs"
)

// AllReduceProtocol carries a tensor-parallel group's partial sums between
// its members: one stream from every member to every other, opened when
// the group forms, for the group's whole life.
//
// Opening: the opener sends group ID (16 bytes), member count (u8), its
// own member index (u8) and the wire format (u8); the other side answers
// one status byte (arOK, arUnknown: it has not formed the group yet, ask
// again; arRefused). The stream is bound to the opener's authenticated
// peer ID: it must be the member at the index it claims. Then one frame
// per all-reduce round: round (u64), value count (u32), payload
// (Wire.bytes(count) bytes). Integers are little-endian. A frame out of
// round order, of the wrong length, larger than MaxAllReduceValues, or
// holding a non-finite value fails the group (never a panic).
const AllReduceProtocol protocol.ID = "/strata/allreduce/1.0.0"

// Bounds of the all-reduce protocol.
const (
	// MaxAllReduceValues is the most values one round may carry (16 MiB
	// as F32: a prefill chunk of 512 tokens of a 7168-wide model fits).
	MaxAllReduceValues = 1 << 22
	// MaxGroupMembers is the largest group.
	MaxGroupMembers = 64
	// DefaultRoundTimeout bounds one AllReduce when the caller's context
	// has no earlier deadline: the slowest member's compute of one layer
	// half, plus the wire. A member whose connection closes fails the
	// round at once; this is for one that stops answering.
	DefaultRoundTimeout = 30 * time.Second
	// DefaultSpin is how long a member waits for a peer's frame through a
	// ring by spinning, before it sleeps, in rounds of up to spinValues
	// values (decode: one token's hidden state or logits). There the peer
	// is finishing the same layer half, typically tens to hundreds of
	// microseconds behind; a sleeping member's wake-up costs about as
	// much (a futex wake, the scheduler, and at load a run queue), and
	// spinning keeps the member on its core.
	DefaultSpin = time.Millisecond
	// spinLong bounds the spin of larger rounds (prefill), where the
	// members' compute and its imbalance are long anyway.
	spinLong   = 50 * time.Microsecond
	spinValues = 1 << 16
	// lateFrame is how long spinFrame waits before it yields its
	// processor to the stream's reader too.
	lateFrame = 100 * time.Microsecond
)

const (
	arOK      byte = 0
	arUnknown byte = 1
	arRefused byte = 2
	arOKShm   byte = 3 // the ring offered was opened: frames come through it

	arTokenBytes = 32

	arHelloBytes = 16 + 3
	arHeadBytes  = 12
	arOpenWait   = 10 * time.Second // an opener's hello must arrive within this
)

// arRingCaps are the shared-memory rings' limits: a decode round's
// hidden state (up to 16K values in F32) in one frame, 8 frames of room
// each way (1 MiB a ring).
var arRingCaps = verbs.Caps{FrameBytes: 1 << 16, Depth: 8, Reliable: true}

// arRingHolds is the longest message a ring surely has room for while its
// receiver is busy sending: every slot but the one its last Recv holds,
// less room for each frame's header (verbs' is 32 bytes).
var arRingHolds = (arRingCaps.Depth - 1) * (arRingCaps.FrameBytes - 64)

// Errors of the all-reduce protocol.
var (
	ErrGroupFailed = errors.New("peers: all-reduce group failed")
	ErrGroupClosed = errors.New("peers: all-reduce group closed")
)

// GroupID names one tensor-parallel group's session, so that concurrent
// groups over the same members never mix their rounds.
type GroupID [16]byte

// NewGroupID returns a random group ID.
func NewGroupID() GroupID {
	var g GroupID
	rand.Read(g[:])
	return g
}

func (g GroupID) String() string { return hex.EncodeToString(g[:]) }

// AllReduceOptions tune a group; the zero value is F32 with
// DefaultRoundTimeout.
type AllReduceOptions struct {
	Wire Wire
	// Shm sends the partial sums through shared-memory rings (peers/verbs)
	// to members on this host, the libp2p stream staying open as each
	// link's liveness signal; members elsewhere, or where a ring cannot be
	// made, use the stream.
	Shm bool
	// RoundTimeout bounds one AllReduce (the earlier of it and the
	// context's deadline). Zero: DefaultRoundTimeout.
	RoundTimeout time.Duration
	// Spin is how long AllReduce spins for a peer's frame through a ring
	// before it sleeps (the spin yields the core to any other thread that
	// wants it). Zero: DefaultSpin for decode-sized rounds; negative: no
	// spin of its own.
	Spin time.Duration
}

// Group is this node's member of a tensor-parallel group: an AllReducer
// (runtime/model) over libp2p streams. Every member sends its partial to
// every other and sums all of them in member order, so every member gets
// bit-identical sums: for the 2–4 members a TP group has, n−1 sends of
// the whole buffer cost one link latency per round, where a ring would
// cost 2(n−1) latencies to save bandwidth that these small buffers do
// not need. One goroutine calls AllReduce at a time. After a failed
// round the group is out of step and every later call fails: make a new
// group (re-plan).
type Group struct {
	n       *Node
	id      GroupID
	self    int
	members []peer.ID
	wire    Wire
	shm     bool
	timeout time.Duration
	spin    time.Duration
	// ctx ends when the group closes: it stops waits on rings.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	in     []*arIn // by member index; nil for this member
	nIn    int
	ready  chan struct{} // closed when every peer's stream has arrived
	done   chan struct{} // closed by Close
	closed bool

	out   []network.Stream // by member index
	snd   []*verbs.Sender  // by member index: the ring to it, if any
	rings []*verbs.Shm     // the rings of snd, closed by Close (under ioMu)
	// ioMu is held while AllReduce sends and receives through rings and
	// while Close closes them: a ring must not be unmapped under a send or
	// a receive. (Close cancels ctx first, so a receive waiting on a
	// ring returns.)
	ioMu  sync.Mutex
	round uint64
	err   error // sticky
	enc   []byte
	own   []float32
}

// arIn is the receiving end of one peer's stream. Frames on the stream: a
// reader goroutine decodes them into one of two buffers (a credit each: a
// peer can be at most one round ahead) and hands them over in order.
// Frames through a ring: AllReduce takes them itself (no goroutine hands
// them over, nothing to wake), and the stream only says the member is
// alive.
type arIn struct {
	s      network.Stream
	rcv    *verbs.Receiver // frames come through a ring, not s
	ring   *verbs.Shm      // rcv's ring, closed by Close
	ctx    context.Context // rcv's: ends with the stream or the group
	cancel context.CancelFunc
	vals   []float32 // rcv's: the frame taken, decoded
	early  []float32 // vals, when taken while this member was sending
	// ended: the member's stream had ended when a round began. A frame
	// it sent before still counts (a member that finished its last round
	// closes its streams at once); the rounds after it fail.
	ended  bool
	frames chan arFrame
	free   chan []float32
	dead   chan struct{} // closed when the reader (watcher) stops; err says why
	err    error
}

type arFrame struct {
	round uint64
	vals  []float32
}

// groups is a node's table of formed groups.
type groups struct {
	mu sync.Mutex
	m  map[GroupID]*Group
}

// startGroups serves AllReduceProtocol from the start, so that a member
// that forms a group first hears "not formed yet" (and asks again) from
// one that has not, rather than "protocol not supported".
func (n *Node) startGroups() {
	n.groups.m = map[GroupID]*Group{}
	n.host.SetStreamHandler(AllReduceProtocol, n.handleAllReduce)
}

// JoinGroup forms this node's member of group id, whose members (in the
// order that fixes the summation, this node among them) each call
// JoinGroup with the same id and list. It returns once a stream to and
// from every other member is open, or with ctx's error.
func (n *Node) JoinGroup(ctx context.Context, id GroupID, members []peer.ID, opts AllReduceOptions) (*Group, error) {
	if len(members) == 0 || len(members) > MaxGroupMembers {
		return nil, fmt.Errorf("peers: a group of %d members (1 to %d)", len(members), MaxGroupMembers)
	}
	self := -1
	for i, p := range members {
		if slices.Index(members, p) != i {
			return nil, fmt.Errorf("peers: member %s is listed twice", p)
		}
		if p == n.ID() {
			self = i
		}
	}
	if self < 0 {
		return nil, fmt.Errorf("peers: this node (%s) is not a member of the group", n.ID())
	}
	if !opts.Wire.valid() {
		return nil, fmt.Errorf("peers: unknown wire format %d", opts.Wire)
	}
	if opts.RoundTimeout <= 0 {
		opts.RoundTimeout = DefaultRoundTimeout
	}
	if opts.Spin == 0 {
		opts.Spin = DefaultSpin
	}
	g := &Group{n: n, id: id, self: self, members: slices.Clone(members), wire: opts.Wire, shm: opts.Shm, timeout: opts.RoundTimeout, spin: opts.Spin,
		in: make([]*arIn, len(members)), out: make([]network.Stream, len(members)), snd: make([]*verbs.Sender, len(members)),
		ready: make(chan struct{}), done: make(chan struct{})}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if len(members) == 1 {
		close(g.ready)
		return g, nil
	}
	n.groups.mu.Lock()
	if n.groups.m[id] != nil {
		n.groups.mu.Unlock()
		return nil, fmt.Errorf("peers: group %s is already formed on this node", id)
	}
	n.groups.m[id] = g
	n.groups.mu.Unlock()

	errc := make(chan error, len(members))
	for j, p := range members {
		if j != self {
			go func() {
				s, snd, err := g.open(ctx, p)
				g.mu.Lock()
				if err == nil && g.closed {
					s.Reset()
					err = ErrGroupClosed
				} else if err == nil {
					g.out[j], g.snd[j] = s, snd
				}
				g.mu.Unlock()
				errc <- err
			}()
		}
	}
	var err error
	for range len(members) - 1 {
		if e := <-errc; e != nil && err == nil {
			err = e
		}
	}
	if err == nil {
		select {
		case <-g.ready:
		case <-ctx.Done():
			err = fmt.Errorf("peers: group %s: waiting for the members' streams: %w", id, ctx.Err())
		}
	}
	if err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// open opens the stream to member p, asking again while p has not formed
// the group yet. With Shm it offers a ring it made (its token travels on
// the authenticated stream, so only p learns it); the sender is nil when
// p took the stream instead.
func (g *Group) open(ctx context.Context, p peer.ID) (network.Stream, *verbs.Sender, error) {
	wait := 5 * time.Millisecond
	for {
		var ring *verbs.Shm
		hello := make([]byte, 0, arHelloBytes+1+64+32)
		hello = append(hello, g.id[:]...)
		hello = append(hello, byte(len(g.members)), byte(g.self), byte(g.wire))
		if g.shm {
			token := make([]byte, arTokenBytes)
			rand.Read(token)
			if r, err := verbs.CreateShm(arRingCaps, token); err == nil {
				ring = r
				boot := verbs.BootID()
				hello = append(hello, 1, byte(len(boot)))
				hello = append(hello, boot...)
				hello = append(hello, token...)
			}
		}
		if ring == nil {
			hello = append(hello, 0)
		}
		s, st, err := g.hello(ctx, p, hello)
		if err != nil || st != arOKShm {
			if ring != nil {
				ring.Close()
			}
		}
		if err != nil {
			return nil, nil, err
		}
		switch st {
		case arOK:
			return s, nil, nil
		case arOKShm:
			if ring == nil {
				s.Reset()
				return nil, nil, fmt.Errorf("peers: group %s: %s took a ring it was not offered", g.id, p)
			}
			ring.Unlink() // p has mapped it: nobody else can join
			snd, err := verbs.NewSender(ring)
			if err != nil {
				ring.Close()
				s.Reset()
				return nil, nil, err
			}
			snd.Stall = g.timeout
			g.mu.Lock()
			g.rings = append(g.rings, ring)
			g.mu.Unlock()
			return s, snd, nil
		case arUnknown:
			s.Close()
		default:
			s.Reset()
			return nil, nil, fmt.Errorf("peers: group %s: %s refused this node's stream (a different member list or wire format)", g.id, p)
		}
		select {
		case <-time.After(wait):
			wait = min(2*wait, 100*time.Millisecond)
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("peers: group %s: %s has not formed the group: %w", g.id, p, ctx.Err())
		case <-g.done:
			return nil, nil, ErrGroupClosed
		}
	}
}

// hello opens a stream to p, sends hello and reads the status byte.
func (g *Group) hello(ctx context.Context, p peer.ID, hello []byte) (network.Stream, byte, error) {
	s, err := g.n.host.NewStream(ctx, p, AllReduceProtocol)
	if err != nil {
		return nil, 0, fmt.Errorf("peers: group %s: open a stream to %s: %w", g.id, p, err)
	}
	if d, ok := ctx.Deadline(); ok {
		s.SetDeadline(d)
	} else {
		s.SetDeadline(time.Now().Add(arOpenWait))
	}
	var st [1]byte
	if _, err = s.Write(hello); err == nil {
		_, err = io.ReadFull(s, st[:])
	}
	if err != nil {
		s.Reset()
		return nil, 0, fmt.Errorf("peers: group %s: opening the stream to %s: %w", g.id, p, err)
	}
	s.SetDeadline(time.Time{})
	return s, st[0], nil
}

// handleAllReduce takes a member's stream: it checks the hello against the
// group this node formed, then reads the member's frames until the stream
// or the group ends.
func (n *Node) handleAllReduce(s network.Stream) {
	from := s.Conn().RemotePeer()
	s.SetReadDeadline(time.Now().Add(arOpenWait))
	var hello [arHelloBytes]byte
	if _, err := io.ReadFull(s, hello[:]); err != nil {
		s.Reset()
		return
	}
	var id GroupID
	copy(id[:], hello[:16])
	count, idx, wire := int(hello[16]), int(hello[17]), Wire(hello[18])
	var flag [1]byte
	if _, err := io.ReadFull(s, flag[:]); err != nil {
		s.Reset()
		return
	}
	var token []byte
	sameHost := false
	if flag[0] == 1 { // a ring offered: boot ID (u8 length + bytes), token
		var l [1]byte
		if _, err := io.ReadFull(s, l[:]); err != nil || l[0] > 64 {
			s.Reset()
			return
		}
		boot := make([]byte, int(l[0]))
		token = make([]byte, arTokenBytes)
		if _, err := io.ReadFull(s, boot); err != nil {
			s.Reset()
			return
		}
		if _, err := io.ReadFull(s, token); err != nil {
			s.Reset()
			return
		}
		sameHost = string(boot) == verbs.BootID()
	} else if flag[0] != 0 {
		s.Reset()
		return
	}
	n.groups.mu.Lock()
	g := n.groups.m[id]
	n.groups.mu.Unlock()
	if g == nil {
		s.Write([]byte{arUnknown})
		s.Close()
		return
	}
	refuse := func(why string) {
		n.log.Warn("peers: refusing an all-reduce stream: "+why, "peer", from, "group", id)
		s.SetWriteDeadline(time.Now().Add(time.Second))
		s.Write([]byte{arRefused})
		s.Close() // not Reset: the opener reads why
	}
	if count != len(g.members) || idx >= count || idx == g.self || g.members[idx] != from || wire != g.wire {
		refuse(fmt.Sprintf("it claims member %d of %d with %s; this node's group has %d members, %s", idx, count, wire, len(g.members), g.wire))
		return
	}
	in := &arIn{s: s, dead: make(chan struct{})}
	status := arOK
	var ring *verbs.Shm
	if sameHost && g.shm {
		if r, err := verbs.OpenShm(token); err == nil {
			if rcv, err := verbs.NewReceiver(r, 0); err == nil {
				rcv.Stall = g.timeout
				ring, in.rcv, in.ring, status = r, rcv, r, arOKShm
			} else {
				r.Close()
			}
		}
	}
	g.mu.Lock()
	if g.closed || g.in[idx] != nil {
		g.mu.Unlock()
		if ring != nil {
			ring.Close()
		}
		refuse("the group is closed or already has that member's stream")
		return
	}

	if in.rcv != nil {
		in.ctx, in.cancel = context.WithCancel(g.ctx)
	} else {
		in.frames, in.free = make(chan arFrame, 2), make(chan []float32, 2)
		in.free <- nil
		in.free <- nil
	}
	g.in[idx] = in
	g.nIn++
	if g.nIn == len(g.members)-1 {
		close(g.ready)
	}
	g.mu.Unlock()
	s.SetReadDeadline(time.Time{})
	if _, err := s.Write([]byte{status}); err != nil {
		in.err = err
		if in.cancel != nil {
			in.cancel()
		}
		close(in.dead)
		s.Reset()
		return
	}
	if in.rcv != nil {
		in.watch()
		return
	}
	in.read(g)
}

// read decodes frames in round order until the stream or the group ends;
// an error is the last thing it hands over.
func (in *arIn) read(g *Group) {
	r := bufio.NewReaderSize(in.s, 64<<10)
	var payload []byte
	fail := func(err error) {
		in.s.Reset()
		in.err = err
		close(in.dead)
	}
	for round := uint64(0); ; round++ {
		var head [arHeadBytes]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			fail(err)
			return
		}
		got, count := binary.LittleEndian.Uint64(head[:]), int(binary.LittleEndian.Uint32(head[8:]))
		if got != round {
			fail(fmt.Errorf("frame of round %d, expected round %d", got, round))
			return
		}
		if count == 0 || count > MaxAllReduceValues {
			fail(fmt.Errorf("frame of %d values (1 to %d)", count, MaxAllReduceValues))
			return
		}
		var buf []float32
		select { // a credit: the peer may be one round ahead, no more
		case buf = <-in.free:
		case <-g.done:
			fail(ErrGroupClosed)
			return
		}
		// The payload is allocated as it arrives, and the values once it
		// has: a frame that announces 4M values and sends none costs
		// nothing.
		var err error
		if payload, err = readgrow.Read(r, payload, g.wire.bytes(count), nil); err != nil {
			fail(err)
			return
		}
		if cap(buf) < count {
			buf = make([]float32, count)
		}
		buf = buf[:count]
		if err := g.wire.decode(buf, payload); err != nil {
			fail(fmt.Errorf("round %d: %w", round, err))
			return
		}
		in.frames <- arFrame{round: round, vals: buf}
	}
}

// watch waits for the end of the stream of a link whose frames come
// through a ring (EOF or reset: the member left, or the group closed) and
// stops the ring's waits.
func (in *arIn) watch() {
	var b [1]byte
	_, err := in.s.Read(b[:]) // the member sends nothing here: any return is its stream's end, or a breach
	if err == nil {
		err = errors.New("a byte on the stream of a ring link")
	}
	in.s.Reset()
	in.err = fmt.Errorf("the member's stream ended: %w", err)
	in.cancel()
	close(in.dead)
}

// AllReduce replaces buf with the sum over the group's members of their
// bufs (after rounding each through the wire format), summed in member
// order. It fails if a member's stream closes, a member sends a bad
// frame, or the round takes longer than ctx or the round timeout allow.
func (g *Group) AllReduce(ctx context.Context, buf []float32) error {
	if len(g.members) == 1 {
		return nil
	}
	if g.err != nil {
		return g.err
	}
	if len(buf) == 0 || len(buf) > MaxAllReduceValues {
		return fmt.Errorf("peers: all-reduce of %d values (1 to %d)", len(buf), MaxAllReduceValues)
	}
	// A round is the caller's scheduling point. A tensor-parallel step
	// computes for tens of milliseconds on one goroutine; without passing
	// through the scheduler the runtime's monitor counts that as one long
	// run, takes its processor away whenever the round is in a system
	// call (the spin's sched_yield, a futex wait) and, having taken one,
	// polls every 20 µs: thousands of wake-ups a second on the cores the
	// group computes on (measured: two strata nodes on two cores, 15,000
	// context switches a second each and 7 % slower, without this).
	runtime.Gosched()
	if err := g.reduce(ctx, buf); err != nil {
		g.err = fmt.Errorf("%w: group %s, member %d, round %d: %w", ErrGroupFailed, g.id, g.self, g.round, err)
		g.resetStreams()
		return g.err
	}
	g.round++
	return nil
}

func (g *Group) reduce(ctx context.Context, buf []float32) error {
	deadline, ctxFirst := time.Now().Add(g.timeout), false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxFirst = d, true
	}
	var err error
	g.enc = binary.LittleEndian.AppendUint64(g.enc[:0], g.round)
	g.enc = binary.LittleEndian.AppendUint32(g.enc, uint32(len(buf)))
	if g.enc, err = g.wire.encode(g.enc, buf); err != nil {
		return fmt.Errorf("this member's partial: %w", err)
	}
	// This member's own partial, rounded as its peers receive it (F32 is
	// not rounded).
	if cap(g.own) < len(buf) {
		g.own = make([]float32, len(buf))
	}
	own := g.own[:len(buf)]
	if g.wire == WireF32 {
		copy(own, buf)
	} else if err := g.wire.decode(own, g.enc[arHeadBytes:]); err != nil {
		return err
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			for _, s := range g.out {
				if s != nil {
					s.SetWriteDeadline(time.Now())
				}
			}
		})
		defer stop()
	}
	g.ioMu.Lock()
	defer g.ioMu.Unlock()
	if g.ctx.Err() != nil {
		return ErrGroupClosed
	}
	// The peers take a frame they have room for (a stream reader's
	// credit, a ring's free slots), so these writes finish while the peers
	// are still computing.
	long := len(g.enc) > arRingHolds
	if long {
		err = g.sendTaking(ctx, len(buf), deadline, ctxFirst)
	} else {
		err = g.send(ctx, deadline)
	}
	if err != nil {
		return err
	}
	var timer *time.Timer // made when a stream's frame is waited for
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	first := true // member 0's partial is copied, the others added in order
	for j, in := range g.in {
		var part []float32
		var credit chan []float32 // gets part back once it is added
		switch {
		case j == g.self:
			part = own
		case in.rcv != nil && long:
			part = in.early
		case in.rcv != nil:
			if part, err = g.recvRing(ctx, j, in, len(buf), deadline, ctxFirst); err != nil {
				return err
			}
		default:
			f, ok := g.spinFrame(in, len(buf))
			if !ok {
				if timer == nil {
					timer = time.NewTimer(time.Until(deadline))
				}
				if f, err = g.waitFrame(ctx, j, in, timer, ctxFirst); err != nil {
					return err
				}
			}
			if f.round != g.round || len(f.vals) != len(buf) {
				return fmt.Errorf("member %d (%s) sent %d values for round %d; this member has %d for round %d", j, g.members[j], len(f.vals), f.round, len(buf), g.round)
			}
			part, credit = f.vals, in.free
		}
		if first {
			copy(buf, part)
			first = false
		} else {
			for i, v := range part {
				buf[i] += v
			}
		}
		if credit != nil {
			credit <- part // never blocks: the reader took it from there
		}
	}
	return nil
}

// waitFrame waits for the next frame of a stream's reader, until timer
// fires.
func (g *Group) waitFrame(ctx context.Context, j int, in *arIn, timer *time.Timer, ctxFirst bool) (arFrame, error) {
	select {
	case f := <-in.frames:
		return f, nil
	case <-in.dead:
		// A frame the reader handed over before it stopped still counts:
		// a member that finished its last round closes its streams at
		// once.
		select {
		case f := <-in.frames:
			return f, nil
		default:
			return arFrame{}, fmt.Errorf("from member %d (%s): %w", j, g.members[j], in.err)
		}
	case <-ctx.Done():
		return arFrame{}, ctx.Err()
	case <-timer.C:
		if ctxFirst { // its timer and ours end together
			return arFrame{}, context.DeadlineExceeded
		}
		return arFrame{}, fmt.Errorf("member %d (%s) sent nothing within %v", j, g.members[j], g.timeout)
	case <-g.done:
		return arFrame{}, ErrGroupClosed
	}
}

// spinFrame waits for the next frame of a stream's reader by spinning (as
// recvRing does; g.spin in decode-sized rounds): the reader hands it over
// without having to wake this goroutine. false: none came (or the reader
// stopped); wait for it the blocking way.
func (g *Group) spinFrame(in *arIn, count int) (arFrame, bool) {
	spin := g.spin
	if count > spinValues {
		spin = min(spin, spinLong)
	}
	if spin <= 0 {
		return arFrame{}, false
	}
	start, alone := time.Now(), runtime.GOMAXPROCS(0) == 1
	for i := 1; ; i++ {
		select {
		case f := <-in.frames:
			return f, true
		case <-in.dead:
			return arFrame{}, false
		default:
		}
		if alone && i%8 == 0 {
			runtime.Gosched() // the reader needs this goroutine's processor
		}
		if i%64 == 0 {
			waited := time.Since(start)
			if waited > spin {
				return arFrame{}, false
			}
			osYield()
			// A frame this late may be waiting for its reader to get a
			// processor (every one spinning: members in one process), so
			// give this one up now and then; not sooner, for each
			// Gosched wakes an idle processor's thread (see recvRing).
			if waited > lateFrame {
				runtime.Gosched()
			}
		}
	}
}

// recvRing takes member j's frame of this round from its ring, on the
// caller's goroutine: it spins for the frame (g.spin in decode-sized
// rounds), then sleeps on the ring until the frame comes, the member's
// stream ends, the group closes, ctx ends or the deadline passes. The
// values returned are valid until the next round. Called with ioMu held
// (or, for one link, by the goroutine reduce waits for).
func (g *Group) recvRing(ctx context.Context, j int, in *arIn, count int, deadline time.Time, ctxFirst bool) ([]float32, error) {
	if in.ended {
		return nil, g.ringErr(ctx, j, in, verbs.ErrClosed, ctxFirst)
	}
	spin := g.spin
	if count > spinValues {
		spin = min(spin, spinLong)
	}
	ready, err := in.rcv.Ready()
	if in.ctx.Err() != nil {
		in.ended = true
	} else if !ready && err == nil && spin > 0 {
		start, alone := time.Now(), runtime.GOMAXPROCS(0) == 1
		for i := 1; ; i++ {
			if ready, err = in.rcv.Ready(); ready || err != nil {
				break
			}
			if i%64 == 0 {
				if time.Since(start) > spin {
					break
				}
				if in.ctx.Err() != nil {
					in.ended = true
					break
				}
				// Let another thread on this core (the peer, when the
				// host is short of cores) run first. Not runtime.Gosched
				// unless this is the only processor: it wakes an idle
				// processor's thread, which takes this goroutine over
				// while this thread goes to sleep, a futex wake and two
				// context switches per round that the peer's compute on a
				// shared core pays for.
				osYield()
				if alone {
					runtime.Gosched()
				}
			}
		}
	}
	if err != nil || !ready && in.ended {
		return nil, g.ringErr(ctx, j, in, err, ctxFirst)
	}
	rctx := in.ctx
	if !ready {
		// The frame's first byte may be long in coming: bound the wait.
		c, cancel := context.WithDeadline(in.ctx, deadline)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		rctx = c
	}
	seq, msg, err := in.rcv.Recv(rctx)
	if err != nil {
		return nil, g.ringErr(ctx, j, in, err, ctxFirst)
	}
	if seq != g.round || len(msg) < arHeadBytes || binary.LittleEndian.Uint64(msg) != g.round {
		return nil, fmt.Errorf("member %d (%s): frame %d of %d bytes, expected round %d", j, g.members[j], seq, len(msg), g.round)
	}
	n := int(binary.LittleEndian.Uint32(msg[8:]))
	if n != count {
		return nil, fmt.Errorf("member %d (%s) sent %d values for round %d; this member has %d", j, g.members[j], n, g.round, count)
	}
	if cap(in.vals) < n {
		in.vals = make([]float32, n)
	}
	vals := in.vals[:n]
	if err := g.wire.decode(vals, msg[arHeadBytes:]); err != nil {
		return nil, fmt.Errorf("member %d (%s), round %d: %w", j, g.members[j], g.round, err)
	}
	return vals, nil
}

// sendTaking is send for a message longer than a ring holds: the frames
// of the peers' rings are taken off (into in.early) while this member
// sends, as its peers do the same. Called with ioMu held.
func (g *Group) sendTaking(ctx context.Context, count int, deadline time.Time, ctxFirst bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]chan error, len(g.in))
	for j, in := range g.in {
		if j != g.self && in.rcv != nil {
			errs[j] = make(chan error, 1)
			go func() {
				var err error
				in.early, err = g.recvRing(ctx, j, in, count, deadline, ctxFirst)
				errs[j] <- err
			}()
		}
	}
	err := g.send(ctx, deadline)
	if err != nil {
		cancel() // the receives would wait for the deadline
	}
	for _, c := range errs {
		if c != nil {
			if e := <-c; e != nil && err == nil {
				err = e
			}
		}
	}
	return err
}

// ringErr says why a ring's receive failed.
func (g *Group) ringErr(ctx context.Context, j int, in *arIn, err error, ctxFirst bool) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case g.ctx.Err() != nil:
		return ErrGroupClosed
	case in.ctx.Err() != nil:
		<-in.dead
		return fmt.Errorf("from member %d (%s): %w", j, g.members[j], in.err)
	case errors.Is(err, context.DeadlineExceeded):
		if ctxFirst {
			return context.DeadlineExceeded
		}
		return fmt.Errorf("member %d (%s) sent nothing within %v", j, g.members[j], g.timeout)
	}
	return fmt.Errorf("from member %d (%s) through its ring: %w", j, g.members[j], err)
}

// send writes this round's frame to every other member: through its ring
// if it has one, else on its stream. Called with ioMu held.
func (g *Group) send(ctx context.Context, deadline time.Time) error {
	for j, s := range g.out {
		if j == g.self {
			continue
		}
		if snd := g.snd[j]; snd != nil {
			if err := snd.Send(ctx, g.round, g.enc); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("sending to member %d (%s) through its ring: %w", j, g.members[j], err)
			}
			continue
		}
		s.SetWriteDeadline(deadline)
		if _, err := s.Write(g.enc); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("sending to member %d (%s): %w", j, g.members[j], err)
		}
	}
	return nil
}

func (g *Group) resetStreams() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.out {
		if s != nil {
			s.Reset()
		}
	}
	for _, in := range g.in {
		if in != nil {
			in.s.Reset()
		}
	}
}

// Members returns the group's members in summation order.
func (g *Group) Members() []peer.ID { return slices.Clone(g.members) }

// Self is this node's index in Members.
func (g *Group) Self() int { return g.self }

// Close leaves the group: its streams are reset (the other members' next
// round fails) and its ID may be formed again.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	close(g.done)
	g.cancel() // a receive waiting on a ring returns, and lets go of ioMu
	// Close, not Reset: a frame already written still reaches a member
	// that has not read it yet.
	for _, s := range g.out {
		if s != nil {
			s.Close()
		}
	}
	var rings []*verbs.Shm
	for _, in := range g.in {
		if in != nil {
			in.s.Close()
			if in.ring != nil {
				rings = append(rings, in.ring)
			}
		}
	}
	g.mu.Unlock()
	g.ioMu.Lock()
	for _, r := range append(rings, g.rings...) {
		r.Close()
	}
	g.rings = nil
	for j := range g.snd {
		g.snd[j] = nil
	}
	g.ioMu.Unlock()
	if len(g.members) > 1 {
		g.n.groups.mu.Lock()
		if g.n.groups.m[g.id] == g {
			delete(g.n.groups.m, g.id)
		}
		g.n.groups.mu.Unlock()
	}
	return nil
}

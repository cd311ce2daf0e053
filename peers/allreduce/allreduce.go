// Package allreduce is the tensor-parallel all-reduce protocol
// (/strata/allreduce/1.0.0): the members of a group each call
// Service.Join with the same GroupID and member list; the *Group each
// gets is an AllReducer (runtime/model) over libp2p streams, or
// shared-memory rings (peers/verbs) between members on one host
// (Options.Shm):
//
// Every member joins (Service.Join, with the same GroupID and member
// list) and then runs its slice's forward pass with the Group as its
// all-reducer (model.TPState.Forward), in step with the others.
//
// A node starts it with Serve; peers.Node.AllReduce is a node's. This
// file is the reduction; streams.go forms groups and handles their
// streams; wire.go is the wire formats of the partial sums.
package allreduce

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"strata/peers/verbs"
)

// Bounds of the all-reduce protocol.
const (
	// MaxValues is the most values one round may carry (16 MiB
	// as F32: a prefill chunk of 512 tokens of a 7168-wide model fits).
	MaxValues = 1 << 22
	// MaxMembers is the largest group.
	MaxMembers = 64
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

// Errors of the all-reduce protocol.
var (
	ErrGroupFailed = errors.New("allreduce: all-reduce group failed")
	ErrGroupClosed = errors.New("allreduce: all-reduce group closed")
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

// Options tune a group; the zero value is F32 with
// DefaultRoundTimeout.
type Options struct {
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
	svc     *Service
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
	if len(buf) == 0 || len(buf) > MaxValues {
		return fmt.Errorf("allreduce: all-reduce of %d values (1 to %d)", len(buf), MaxValues)
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

// Members returns the group's members in summation order.
func (g *Group) Members() []peer.ID { return slices.Clone(g.members) }

// Self is this node's index in Members.
func (g *Group) Self() int { return g.self }

package allreduce

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"strata/peers/internal/readgrow"
	"strata/peers/verbs"
)

// Protocol carries a tensor-parallel group's partial sums between
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
// round order, of the wrong length, larger than MaxValues, or
// holding a non-finite value fails the group (never a panic).
const Protocol protocol.ID = "/strata/allreduce/1.0.0"

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

// Service is one node's side of the protocol: the groups it has formed,
// and the handler of its members' streams.
type Service struct {
	host host.Host
	log  *slog.Logger

	mu     sync.Mutex
	groups map[GroupID]*Group // formed groups of more than one member
}

// Serve starts the protocol on h from the start, so that a member that
// forms a group first hears "not formed yet" (and asks again) from one
// that has not, rather than "protocol not supported". Refused streams
// are logged to log.
func Serve(h host.Host, log *slog.Logger) *Service {
	svc := &Service{host: h, log: log, groups: map[GroupID]*Group{}}
	h.SetStreamHandler(Protocol, svc.handle)
	return svc
}

// Join forms this node's member of group id, whose members (in the
// order that fixes the summation, this node among them) each call
// Join with the same id and list. It returns once a stream to and
// from every other member is open, or with ctx's error.
func (svc *Service) Join(ctx context.Context, id GroupID, members []peer.ID, opts Options) (*Group, error) {
	if len(members) == 0 || len(members) > MaxMembers {
		return nil, fmt.Errorf("allreduce: a group of %d members (1 to %d)", len(members), MaxMembers)
	}
	self := -1
	for i, p := range members {
		if slices.Index(members, p) != i {
			return nil, fmt.Errorf("allreduce: member %s is listed twice", p)
		}
		if p == svc.host.ID() {
			self = i
		}
	}
	if self < 0 {
		return nil, fmt.Errorf("allreduce: this node (%s) is not a member of the group", svc.host.ID())
	}
	if !opts.Wire.valid() {
		return nil, fmt.Errorf("allreduce: unknown wire format %d", opts.Wire)
	}
	if opts.RoundTimeout <= 0 {
		opts.RoundTimeout = DefaultRoundTimeout
	}
	if opts.Spin == 0 {
		opts.Spin = DefaultSpin
	}
	g := &Group{svc: svc, id: id, self: self, members: slices.Clone(members), wire: opts.Wire, shm: opts.Shm, timeout: opts.RoundTimeout, spin: opts.Spin,
		in: make([]*arIn, len(members)), out: make([]network.Stream, len(members)), snd: make([]*verbs.Sender, len(members)),
		ready: make(chan struct{}), done: make(chan struct{})}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if len(members) == 1 {
		close(g.ready)
		return g, nil
	}
	svc.mu.Lock()
	if svc.groups[id] != nil {
		svc.mu.Unlock()
		return nil, fmt.Errorf("allreduce: group %s is already formed on this node", id)
	}
	svc.groups[id] = g
	svc.mu.Unlock()

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
			err = fmt.Errorf("allreduce: group %s: waiting for the members' streams: %w", id, ctx.Err())
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
				return nil, nil, fmt.Errorf("allreduce: group %s: %s took a ring it was not offered", g.id, p)
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
			return nil, nil, fmt.Errorf("allreduce: group %s: %s refused this node's stream (a different member list or wire format)", g.id, p)
		}
		select {
		case <-time.After(wait):
			wait = min(2*wait, 100*time.Millisecond)
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("allreduce: group %s: %s has not formed the group: %w", g.id, p, ctx.Err())
		case <-g.done:
			return nil, nil, ErrGroupClosed
		}
	}
}

// hello opens a stream to p, sends hello and reads the status byte.
func (g *Group) hello(ctx context.Context, p peer.ID, hello []byte) (network.Stream, byte, error) {
	s, err := g.svc.host.NewStream(ctx, p, Protocol)
	if err != nil {
		return nil, 0, fmt.Errorf("allreduce: group %s: open a stream to %s: %w", g.id, p, err)
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
		return nil, 0, fmt.Errorf("allreduce: group %s: opening the stream to %s: %w", g.id, p, err)
	}
	s.SetDeadline(time.Time{})
	return s, st[0], nil
}

// handle takes a member's stream: it checks the hello against the
// group this node formed, then reads the member's frames until the stream
// or the group ends.
func (svc *Service) handle(s network.Stream) {
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
	svc.mu.Lock()
	g := svc.groups[id]
	svc.mu.Unlock()
	if g == nil {
		s.Write([]byte{arUnknown})
		s.Close()
		return
	}
	refuse := func(why string) {
		svc.log.Warn("allreduce: refusing an all-reduce stream: "+why, "peer", from, "group", id)
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
		if count == 0 || count > MaxValues {
			fail(fmt.Errorf("frame of %d values (1 to %d)", count, MaxValues))
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
		g.svc.mu.Lock()
		if g.svc.groups[g.id] == g {
			delete(g.svc.groups, g.id)
		}
		g.svc.mu.Unlock()
	}
	return nil
}

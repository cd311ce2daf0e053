package peers

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/proto"

	"strata/messages"
	"strata/peers/internal/readgrow"
	"strata/peers/verbs"
)

// VerbsProtocol negotiates the side channel activations take to a peer,
// and then stays open as its liveness signal, its control channel (acks,
// faults, round-trip pings) and its fallback: once the side channel fails,
// the messages it did not deliver, and all after them, travel on this
// stream.
const VerbsProtocol protocol.ID = "/strata/verbs/1.0.0"

// Transports a node may allow for activations (Config.Transport).
const (
	TransportAuto = "auto" // the best both ends share
	TransportTCP  = "tcp"  // the libp2p stream only
	TransportShm  = "shm"  // shared memory on one host, else the stream
	TransportRDMA = "rdma" // RDMA (a build with an RDMA backend), else the stream
)

// VerbsOptions tune the side channel; the zero value is the default.
type VerbsOptions struct {
	// Apple makes shared-memory links keep to the constraints of Apple's
	// RDMA over Thunderbolt (4 KiB frames, a send the size of its receive,
	// 32 outstanding work requests), so that protocol runs here.
	Apple bool
	// Faults, when set, injects faults into the frames this node sends to
	// a peer (see verbs.Faulty): for tests.
	Faults func(p peer.ID) func(n int) verbs.Fault
	// RDMA, when set, opens this node's RDMA queue pairs instead of the
	// build's RDMA backend (a verbs.FakeRDMA in tests).
	RDMA func(verbs.Caps) (verbs.RDMAConn, error)
	// Stall is how long a link may go without progress before it is
	// declared stalled and traffic falls back to the stream. Zero: 2 s.
	Stall time.Duration
	// Retry is how long a link stays on the stream after a fallback
	// before it negotiates its side channel again; it doubles with each
	// fallback that follows soon after (up to 64×). Zero: 5 s.
	Retry time.Duration
}

// Link is one peer link as the status API shows it.
type Link struct {
	Peer      peer.ID
	Transport string // "shm", "rdma" or "tcp" (the libp2p stream)
	RTT       time.Duration
	Fallbacks int // faults that sent traffic back to the stream
	Returns   int // times the side channel was negotiated again after one
	Sent      uint64
}

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

// negotiateDelay, in tests, slows every negotiation down (ns).
var negotiateDelay atomic.Int64

// mangleProof, in tests, changes the token an RDMA link's opener sends as
// its first message.
var mangleProof atomic.Pointer[func([]byte) []byte]

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

// side runs this node's links: one outgoing link per peer it sends
// activations to (opened when the peer joins), and the incoming ones peers
// open to it.
type side struct {
	n         *Node
	b         *bridge
	log       *slog.Logger
	transport string
	opts      VerbsOptions
	ctx       context.Context
	wg        sync.WaitGroup

	mu  sync.Mutex
	out map[peer.ID]*outLink
	in  map[network.Stream]*inLink
	// last is each peer's latest incoming link: a new one waits for the
	// one before to end, so their deliveries never interleave.
	last map[peer.ID]*inTurn

	fallbacks atomic.Int64
	returns   atomic.Int64
	// Activations the side channels delivered in place, and copied.
	inPlace, copied atomic.Int64
	// rdma opens a queue pair; nil when this node has no RDMA device.
	rdma func(verbs.Caps) (verbs.RDMAConn, error)
}

func newSide(n *Node, transport string, opts VerbsOptions) (*side, error) {
	switch transport {
	case "":
		transport = TransportAuto
	case TransportAuto, TransportTCP, TransportShm:
	case TransportRDMA:
		if !verbs.RDMAAvailable() && opts.RDMA == nil {
			return nil, fmt.Errorf("--transport rdma: %s", verbs.RDMAUnavailable())
		}
	default:
		return nil, fmt.Errorf("transport %q: want auto, tcp, shm or rdma", transport)
	}
	if opts.Stall <= 0 {
		opts.Stall = 2 * time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = 5 * time.Second
	}
	s := &side{n: n, b: n.bridge, log: n.log, transport: transport, opts: opts, ctx: n.ctx,
		out: map[peer.ID]*outLink{}, in: map[network.Stream]*inLink{}, last: map[peer.ID]*inTurn{}}
	switch {
	case opts.RDMA != nil:
		s.rdma = opts.RDMA
	case verbs.RDMAAvailable():
		s.rdma = verbs.OpenRDMA
	}
	n.host.SetStreamHandler(VerbsProtocol, s.handle)
	return s, nil
}

// watch opens a link to every member that joins.
func (s *side) watch(m *Membership) {
	sub := m.Subscribe()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer sub.Close()
		for {
			ev, err := sub.Next(s.ctx)
			if err != nil {
				return
			}
			if ev.Kind == Joined && ev.Member.ID != s.n.ID() {
				s.link(ev.Member.ID)
			}
		}
	}()
}

func (s *side) close() {
	s.n.host.RemoveStreamHandler(VerbsProtocol)
	s.mu.Lock()
	for _, l := range s.out {
		l.stop()
	}
	for st := range s.in {
		st.Reset()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// link returns the outgoing link to p, opening it if there is none.
func (s *side) link(p peer.ID) *outLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.out[p]; l != nil {
		return l
	}
	if s.ctx.Err() != nil {
		return nil
	}
	l := &outLink{s: s, peer: p, wake: make(chan struct{}, 1), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(s.ctx)
	s.out[p] = l
	s.wg.Add(1)
	go l.run()
	return l
}

// send is the bridge's hook: it takes an activation for p when the link
// to p carries them (a side channel, or its fallback on the verbs stream),
// and returns false to leave it to the actor stream. It runs in the
// sender's goroutine, and on a working side channel sends from there.
func (s *side) send(p peer.ID, env *messages.Envelope, msg proto.Message) bool {
	if fw, ok := msg.(*messages.Forward); !ok || len(fw.Hidden) == 0 {
		return false
	}
	l := s.link(p)
	return l != nil && l.take(env, msg)
}

// Links lists the outgoing links.
func (s *side) links() []Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Link
	for _, l := range s.out {
		if st, ok := l.status(); ok {
			out = append(out, st)
		}
	}
	return out
}

// outLink sends activations to one peer. Its goroutine negotiates, then
// owns all sending: over the side channel while it works, over the verbs
// stream once it failed (resending what was not acknowledged first), so
// the peer gets every message once and in order.
type outLink struct {
	s      *side
	peer   peer.ID
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}

	// smu orders sends: a message takes its number and is sent (over the
	// side channel, from the sender's goroutine) or queued (for the
	// stream) under it, and the link goroutine falls back under it. Taken
	// before mu.
	smu    sync.Mutex
	sender *verbs.Sender // the side channel while it works
	seq    uint64        // the last message number taken
	// plain: the link has no verbs stream (its negotiation failed, or it
	// ended), so activations take the actor stream; take refuses them.
	// Every other time it takes them all, queueing while it negotiates:
	// one path at a time, so a burst never overtakes itself.
	plain    bool
	retained []held   // sent, not acknowledged
	sendErr  error    // the side channel failed in a direct send
	spare    [][]byte // acknowledged bodies, to reuse
	queue    []held   // for the link goroutine to write on the stream
	queued   int

	mu        sync.Mutex
	transport string // what carries messages now
	rtt       time.Duration
	fallbacks int
	returns   int    // times the side channel came back after a fallback
	token     []byte // the current session's (link goroutine only)
	sent      uint64
	acks      *acks // the current session's
	lastAck   time.Time
	// fallingBack: the side channel failed and the link waits to retry
	// it; backoff counts the retries since it last worked a good while.
	fallingBack bool
	backoff     int
}

func (l *outLink) stop() { l.cancel() }

func (l *outLink) status() (Link, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.transport == "" {
		return Link{}, false
	}
	return Link{Peer: l.peer, Transport: l.transport, RTT: l.rtt, Fallbacks: l.fallbacks, Returns: l.returns, Sent: l.sent}, true
}

// held is a message taken by the link: sent or queued, kept until the
// peer acknowledges it (a fault resends it over the stream).
type held struct {
	seq  uint64
	body []byte // frame body, in buf
	buf  []byte // the whole frame buffer, reused once acknowledged
}

// take sends or queues an activation if the link carries them now. On a
// working side channel it is marshalled once into a body the link keeps
// for resending, and written from there straight into the receive slot
// the peer posted (verbs.Sender.Write): no hand-off to another goroutine.
func (l *outLink) take(env *messages.Envelope, msg proto.Message) bool {
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.plain {
		return false
	}
	h, err := l.marshal(env, msg)
	if err != nil {
		return false // the actor stream will say why
	}
	if l.queued > maxRetained {
		// Dropped, as a full actor stream drops: a later activation on
		// another path could overtake the ones queued.
		l.s.log.Warn("peers: verbs link queue full, dropped an activation", "peer", l.peer)
		return true
	}
	l.seq++
	h.seq = l.seq
	if l.sender != nil && len(l.queue) == 0 && l.sendErr == nil {
		l.retained = append(l.retained, h)
		err := l.sender.Write(l.ctx, h.seq, len(h.body), func(dst []byte) { copy(dst, h.body) })
		if err == nil {
			l.addSent(len(h.body))
			return true
		}
		// Retained: the link goroutine resends it over the stream.
		l.sendErr = err
		l.signal()
		return true
	}
	l.queue = append(l.queue, h)
	l.queued += len(h.body)
	l.signal()
	return true
}

// marshal encodes a message as a frame body (envelope and message, as on
// the actor stream) in a buffer reused once the peer acknowledged the one
// it was in (under smu).
func (l *outLink) marshal(env *messages.Envelope, msg proto.Message) (held, error) {
	var buf []byte
	if k := len(l.spare); k > 0 {
		buf, l.spare = l.spare[k-1][:0], l.spare[:k-1]
	}
	env.TypeName = string(msg.ProtoReflect().Descriptor().FullName())
	frame, err := appendFrame(buf, env, msg, l.s.b.maxFrame)
	if err != nil {
		return held{}, err
	}
	return held{body: frame[frameHeaderBytes:], buf: frame}, nil
}

// release keeps an acknowledged message's buffer for reuse (under smu).
func (l *outLink) release(h held) {
	if len(l.spare) < 64 && cap(h.buf) <= 4<<20 {
		l.spare = append(l.spare, h.buf[:0])
	}
}

func (l *outLink) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run negotiates the link, then sends until the stream ends.
func (l *outLink) run() {
	s := l.s
	defer s.wg.Done()
	defer func() {
		// What waits for a session goes to the actor stream, in order,
		// and so does all after it (plain).
		l.smu.Lock()
		l.toActorStream()
		l.smu.Unlock()
		s.mu.Lock()
		if s.out[l.peer] == l {
			delete(s.out, l.peer)
		}
		s.mu.Unlock()
		close(l.done)
	}()
	// A link lost while the peer is still a member (a connection replaced,
	// a dial before its addresses were known) is negotiated again; so is
	// one that fell back to the stream, after a backoff, to get its side
	// channel back.
	for {
		retry := l.session()
		if l.ctx.Err() != nil || !s.isMember(l.peer) {
			return
		}
		if retry {
			continue
		}
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// toActorStream hands the activations queued for a session to the actor
// stream, in order, and sends those that follow there too (plain), until
// a session takes over (under smu).
func (l *outLink) toActorStream() {
	l.plain = true
	for _, h := range l.queue {
		l.s.b.sendFrame(l.peer, h.buf)
	}
	l.queue, l.queued = nil, 0
}

// takeOver makes a new session the path of activations after the actor
// stream carried them (plain, or an earlier link to the peer that ended):
// once the actor stream has written out all it was given, so the first
// message of the session cannot overtake them on the way out. (The peer reads the two streams in two goroutines: an
// activation still in its actor stream's read buffer could yet be
// delivered after the session's first; only a link that could not
// negotiate, or ended, sends activations there.) Bounded by Stall: a broken actor
// stream loses what it held anyway.
func (l *outLink) takeOver() {
	deadline := time.Now().Add(l.s.opts.Stall)
	for {
		l.smu.Lock()
		if l.s.b.written(l.peer) || time.Now().After(deadline) || l.ctx.Err() != nil {
			l.plain = false
			l.smu.Unlock()
			return
		}
		l.smu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

func (s *side) isMember(p peer.ID) bool {
	for _, m := range s.n.member.View().Members {
		if m.ID == p {
			return true
		}
	}
	return false
}

// acks is what one session's reader learnt from the peer (under l.mu).
type acks struct {
	acked   uint64 // every message up to it was delivered
	faultAt uint64 // a fault the peer reported (0: none)
	pongs   []pong
}

// session negotiates the link and sends over it until it ends. It returns
// true to negotiate again at once: the side channel had failed, the
// backoff has passed and the peer acknowledged everything sent, so a new
// session (numbering from 1 again) loses and reorders nothing.
func (l *outLink) session() (retry bool) {
	s := l.s
	st, conn, transport, err := l.negotiate()
	if err != nil {
		l.smu.Lock()
		l.toActorStream()
		l.smu.Unlock()
		if s.ctx.Err() == nil {
			s.log.Info("peers: no verbs link", "peer", l.peer, "err", oneLine(err))
		}
		return false
	}
	defer st.Reset()
	var sender *verbs.Sender
	if conn != nil {
		defer conn.Close()
		if sender, err = verbs.NewSender(conn); err != nil {
			s.log.Warn("peers: verbs link", "peer", l.peer, "err", err)
			return false
		}
		sender.Stall = s.opts.Stall
		if transport == TransportRDMA {
			// Message 0 proves to the peer that this queue pair is the one
			// its authenticated stream negotiated.
			proof := l.token
			if f := mangleProof.Load(); f != nil {
				proof = (*f)(proof)
			}
			if err := sender.Send(l.ctx, 0, proof); err != nil {
				s.log.Warn("peers: verbs link", "peer", l.peer, "err", err)
				return false
			}
		}
	}
	if conn == nil {
		// No side channel: activations take the actor stream, as they
		// would without a link (no acknowledgements to wait for).
		l.smu.Lock()
		l.toActorStream()
		l.smu.Unlock()
	} else {
		l.takeOver()
	}
	ack := &acks{}
	l.mu.Lock()
	returned := l.fallingBack && conn != nil
	l.fallingBack = false
	l.mu.Unlock()
	if returned {
		s.returns.Add(1)
		s.log.Info("peers: verbs side channel back after a fallback", "peer", l.peer, "transport", transport)
	} else {
		s.log.Info("peers: link", "peer", l.peer, "transport", transport)
	}
	l.smu.Lock()
	// Messages queued while negotiating go first, numbered for the peer's
	// new receiver.
	l.seq = 0
	for i := range l.queue {
		l.seq++
		l.queue[i].seq = l.seq
	}
	l.retained = l.retained[:0]
	l.sender, l.sendErr = sender, nil
	l.smu.Unlock()
	l.mu.Lock()
	l.transport, l.lastAck, l.acks = transport, time.Now(), ack
	if returned {
		l.returns++
	}
	l.mu.Unlock()
	defer func() {
		l.smu.Lock()
		l.sender = nil
		l.smu.Unlock()
	}()
	l.signal() // send what was queued

	w := &ctlWriter{w: bufio.NewWriterSize(st, 64<<10), s: st}
	readDone := make(chan error, 1)
	go func() { readDone <- l.read(st, ack) }()

	var (
		ping     = time.NewTicker(pingEvery)
		check    = time.NewTicker(s.opts.Stall / 4)
		lastPong = time.Now()
		progress = time.Now() // last ack progress, or when nothing was unacknowledged
		prevAck  uint64
		nonce    uint64
		pingSent = map[uint64]time.Time{}
		retryAt  time.Time // when to try the side channel again
		started  = time.Now()
	)
	defer ping.Stop()
	defer check.Stop()
	// The first ping now, for an RTT at once.
	nonce++
	pingSent[nonce] = time.Now()
	if w.ctl(ctlPing, nonce) != nil || w.flush() != nil {
		return false
	}
	// fallback moves the link to the stream (under smu): the messages
	// the peer has not acknowledged are resent there, and all after them
	// follow.
	fallback := func(why error) error {
		if l.sender == nil {
			return nil
		}
		l.sender, l.sendErr = nil, nil
		conn.Close()
		s.fallbacks.Add(1)
		l.mu.Lock()
		l.fallbacks++
		l.fallingBack = true
		if time.Since(started) > 10*s.opts.Retry {
			l.backoff = 0 // it had worked a good while: a fresh fault
		}
		wait := s.opts.Retry << min(l.backoff, 6)
		l.backoff++
		l.transport = TransportTCP
		acked := ack.acked
		l.mu.Unlock()
		retryAt = time.Now().Add(wait)
		s.log.Warn("peers: verbs side channel failed; resending over the stream", "peer", l.peer, "err", why, "resend_from", acked+1, "retry_in", wait)
		for _, h := range l.retained {
			if h.seq > acked {
				if err := w.data(h.seq, h.body); err != nil {
					return err
				}
			}
		}
		return w.flush()
	}
	for {
		select {
		case <-l.ctx.Done():
			return false
		case err := <-readDone:
			if s.ctx.Err() == nil {
				s.log.Info("peers: verbs link closed", "peer", l.peer, "err", err)
			}
			return false
		case <-ping.C:
			if time.Since(lastPong) > linkDeadAfter {
				s.log.Warn("peers: verbs link silent, closing", "peer", l.peer)
				return false
			}
			nonce++
			pingSent[nonce] = time.Now()
			if w.ctl(ctlPing, nonce) != nil || w.flush() != nil {
				return false
			}
			continue
		case <-check.C:
		case <-l.wake:
		}
		l.mu.Lock()
		acked, faultAt := ack.acked, ack.faultAt
		if pong := l.takePongs(ack, pingSent); !pong.IsZero() {
			lastPong = pong
		}
		l.mu.Unlock()

		l.smu.Lock()
		k := 0
		for k < len(l.retained) && l.retained[k].seq <= acked {
			l.release(l.retained[k])
			k++
		}
		l.retained = append(l.retained[:0], l.retained[k:]...)
		err := error(nil)
		switch {
		case faultAt != 0:
			err = fallback(fmt.Errorf("the peer detected a fault at message %d", faultAt))
		case l.sendErr != nil:
			err = fallback(l.sendErr)
		}
		if acked != prevAck || len(l.retained) == 0 {
			prevAck, progress = acked, time.Now()
		}
		if err == nil && l.sender != nil && time.Since(progress) > s.opts.Stall {
			err = fallback(fmt.Errorf("%w: no acknowledgement for %v", verbs.ErrStall, s.opts.Stall))
		}
		queue := l.queue
		l.queue, l.queued = nil, 0
		for _, h := range queue {
			if err != nil {
				break
			}
			l.retained = append(l.retained, h)
			if l.sender != nil {
				if e := l.sender.Send(l.ctx, h.seq, h.body); e == nil {
					l.addSent(len(h.body))
				} else if l.ctx.Err() != nil {
					err = e
				} else {
					err = fallback(e) // resends this message too
				}
				continue
			}
			if err = w.data(h.seq, h.body); err == nil {
				l.addSent(len(h.body))
			}
		}
		retry = conn != nil && l.sender == nil && !retryAt.IsZero() && time.Now().After(retryAt) && len(l.retained) == 0
		l.smu.Unlock()
		if err != nil || w.flush() != nil {
			return false
		}
		if retry {
			s.log.Info("peers: retrying the verbs side channel", "peer", l.peer)
			return true
		}
	}
}

func (l *outLink) addSent(n int) {
	l.mu.Lock()
	l.sent++
	l.mu.Unlock()
	if f := l.s.b.onSent; f != nil {
		f(l.s.b.name(l.peer), n)
	}
}

// pongs the reader saw, for the writer's RTT (under l.mu).
type pong struct {
	nonce uint64
	at    time.Time
}

// takePongs turns the pongs the reader queued into an RTT; it returns
// the time of the latest (under l.mu).
func (l *outLink) takePongs(a *acks, sent map[uint64]time.Time) time.Time {
	var last time.Time
	for _, p := range a.pongs {
		if t, ok := sent[p.nonce]; ok {
			l.rtt = p.at.Sub(t)
			delete(sent, p.nonce)
			last = p.at
		}
	}
	a.pongs = a.pongs[:0]
	for n, t := range sent {
		if time.Since(t) > linkDeadAfter {
			delete(sent, n)
		}
	}
	return last
}

// read handles what the peer sends back: acks, faults, pongs.
func (l *outLink) read(st network.Stream, a *acks) error {
	r := bufio.NewReader(st)
	for {
		st.SetReadDeadline(time.Now().Add(linkDeadAfter + pingEvery))
		kind, payload, err := readCtl(r, 64, nil)
		if err != nil {
			return err
		}
		if len(payload) < 8 {
			return fmt.Errorf("short control message %d", kind)
		}
		v := binary.BigEndian.Uint64(payload)
		l.mu.Lock()
		switch kind {
		case ctlAck:
			if v > a.acked {
				a.acked, l.lastAck = v, time.Now()
			}
		case ctlFault:
			if a.faultAt == 0 {
				a.faultAt = v
			}
		case ctlPong:
			a.pongs = append(a.pongs, pong{v, time.Now()})
		}
		l.mu.Unlock()
		l.signal()
	}
}

// negotiate opens the verbs stream and agrees on a transport: shared
// memory when the peer is on this host and both allow it, else the stream.
func (l *outLink) negotiate() (network.Stream, verbs.Conn, string, error) {
	s := l.s
	ctx, cancel := context.WithTimeout(l.ctx, verbsOpenTimeout)
	defer cancel()
	if d := time.Duration(negotiateDelay.Load()); d > 0 {
		time.Sleep(d)
	}
	st, err := s.n.host.NewStream(ctx, l.peer, VerbsProtocol)
	if err != nil {
		return nil, nil, "", err
	}
	st.SetDeadline(time.Now().Add(verbsOpenTimeout))
	token := make([]byte, 32)
	rand.Read(token)
	h := hello{Want: s.transport, BootID: verbs.BootID(), Token: hex.EncodeToString(token)}
	var (
		shm *verbs.Shm
		qp  verbs.RDMAConn
	)
	if s.transport == TransportAuto || s.transport == TransportShm {
		caps := shmCaps(s.opts.Apple)
		if shm, err = verbs.CreateShm(caps, token); err != nil {
			s.log.Info("peers: no shared memory for links", "err", err)
			shm = nil
		} else {
			h.Shm, h.Caps = true, caps
		}
	}
	if (s.transport == TransportAuto || s.transport == TransportRDMA) && s.rdma != nil {
		if qp, err = s.rdma(rdmaCaps(s.opts.Apple)); err != nil {
			s.log.Info("peers: no RDMA queue pair for links", "err", err)
			qp = nil
		} else {
			h.RDMA = &rdmaOffer{Caps: qp.Caps(), Endpoint: qp.Endpoint()}
		}
	}
	closeAll := func() {
		if shm != nil {
			shm.Close()
		}
		if qp != nil {
			qp.Close()
		}
	}
	fail := func(err error) (network.Stream, verbs.Conn, string, error) {
		closeAll()
		st.Reset()
		return nil, nil, "", err
	}
	body, _ := json.Marshal(h)
	w := &ctlWriter{w: bufio.NewWriter(st), s: st}
	if err := w.raw(ctlHello, body); err != nil {
		return fail(err)
	}
	if err := w.flush(); err != nil {
		return fail(err)
	}
	kind, payload, err := readCtl(bufio.NewReaderSize(st, 4096), 64<<10, nil)
	if err != nil {
		return fail(err)
	}
	var rep reply
	if kind != ctlReply || json.Unmarshal(payload, &rep) != nil {
		return fail(fmt.Errorf("bad verbs reply"))
	}
	st.SetDeadline(time.Time{})
	if shm != nil {
		shm.Unlink() // the peer mapped it, or never will
	}
	var (
		conn      verbs.Conn
		transport = TransportTCP
	)
	switch {
	case rep.Transport == TransportShm && shm != nil:
		conn, transport, shm = shm, TransportShm, nil
	case rep.Transport == TransportRDMA && qp != nil && rep.RDMA != nil:
		err := checkOffer(rep.RDMA, qp.Caps())
		if err == nil {
			err = qp.Connect(ctx, rep.RDMA.Endpoint)
		}
		if err != nil {
			// The peer waits on its queue pair for the token, which never
			// comes: the link runs on the stream.
			rep.Why = "RDMA: " + err.Error()
			break
		}
		conn, transport, qp = qp, TransportRDMA, nil
	}
	closeAll()
	if conn == nil {
		if rep.Why != "" {
			s.log.Info("peers: link uses the stream", "peer", l.peer, "why", rep.Why)
		}
		return st, nil, TransportTCP, nil
	}
	l.token = token
	if s.opts.Faults != nil {
		if plan := s.opts.Faults(l.peer); plan != nil {
			faulty, err := verbs.Faulty(conn, plan)
			if err != nil {
				conn.Close()
				return fail(err)
			}
			conn = faulty
		}
	}
	return st, conn, transport, nil
}

// shmCaps are the frames of shared-memory links: big enough that most
// activations are one frame, read in place; or Apple's.
func shmCaps(apple bool) verbs.Caps {
	if apple {
		return verbs.AppleCaps
	}
	return verbs.Caps{FrameBytes: 1<<20 + 4096, Depth: 16}
}

// inLink receives activations from one peer: from the side channel while
// it works, from the stream after (and duplicates of what the channel
// already delivered are dropped by number).
type inLink struct {
	s    *side
	from peer.ID
	st   network.Stream
	w    *ctlWriter
	ack  chan struct{}

	mu      sync.Mutex
	next    uint64 // the next message to deliver
	scratch []byte // a Forward's fields but hidden, decoded in place (under mu)
}

// inTurn is one incoming link's turn to deliver a peer's activations.
type inTurn struct {
	st   network.Stream
	done chan struct{}
}

func (s *side) handle(st network.Stream) {
	from := st.Conn().RemotePeer()
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		st.Reset()
		return
	}
	s.in[st] = nil
	prev, turn := s.last[from], &inTurn{st: st, done: make(chan struct{})}
	s.last[from] = turn
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.in, st)
		if s.last[from] == turn {
			delete(s.last, from)
		}
		s.mu.Unlock()
		st.Reset()
		close(turn.done)
	}()
	if prev != nil {
		// The peer began a new session, so the old one is over: end it
		// here too, and let it finish delivering what it had.
		prev.st.Reset()
		<-prev.done
	}
	st.SetDeadline(time.Now().Add(verbsOpenTimeout))
	r := bufio.NewReaderSize(st, 64<<10)
	kind, payload, err := readCtl(r, 64<<10, nil)
	var h hello
	if err != nil || kind != ctlHello || json.Unmarshal(payload, &h) != nil {
		return
	}
	token, err := hex.DecodeString(h.Token)
	if err != nil || len(token) != 32 {
		return
	}
	rep, conn := s.answer(&h, token)
	in := &inLink{s: s, from: from, st: st, w: &ctlWriter{w: bufio.NewWriterSize(st, 4096), s: st}, ack: make(chan struct{}, 1), next: 1}
	body, _ := json.Marshal(rep)
	if in.w.raw(ctlReply, body) != nil || in.w.flush() != nil {
		if conn != nil {
			conn.Close()
		}
		return
	}
	st.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	var wg sync.WaitGroup
	if conn != nil {
		// An RDMA link starts with message 0, the token (see session).
		var proof []byte
		first := uint64(1)
		if rep.Transport == TransportRDMA {
			proof, first = token, 0
		}
		rcv, err := verbs.NewReceiver(conn, first)
		if err != nil {
			conn.Close()
			return
		}
		rcv.Stall = s.opts.Stall
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Closes the ring once the actors reading lent slots are done.
			defer rcv.Close()
			in.channel(ctx, rcv, proof)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		in.acker(ctx)
	}()
	in.stream(r)
	cancel()
	wg.Wait()
}

// answer chooses the transport for a peer's hello: shared memory when
// both allow it and share a host, else RDMA when both allow it and have a
// device (then this node's queue pair is connected to the peer's), else
// the stream, with why.
func (s *side) answer(h *hello, token []byte) (reply, verbs.Conn) {
	var why []string
	shmOK := s.transport == TransportAuto || s.transport == TransportShm
	rdmaOK := s.transport == TransportAuto || s.transport == TransportRDMA
	switch {
	case !h.Shm:
	case !shmOK:
		why = append(why, "this node uses --transport "+s.transport)
	case h.BootID != verbs.BootID():
		why = append(why, "not on this host")
	default:
		shm, err := verbs.OpenShm(token)
		if err == nil {
			return reply{Transport: TransportShm}, shm
		}
		why = append(why, err.Error())
	}
	switch {
	case h.RDMA == nil:
		why = append(why, "the peer offered no RDMA")
	case !rdmaOK:
		why = append(why, "this node uses --transport "+s.transport)
	case s.rdma == nil:
		why = append(why, "no RDMA device here")
	default:
		caps := rdmaCaps(s.opts.Apple)
		if err := checkOffer(h.RDMA, caps); err != nil {
			why = append(why, "RDMA: "+err.Error())
			break
		}
		qp, err := s.rdma(caps)
		if err != nil {
			why = append(why, "RDMA: "+err.Error())
			break
		}
		ctx, cancel := context.WithTimeout(s.ctx, verbsOpenTimeout)
		err = qp.Connect(ctx, h.RDMA.Endpoint)
		cancel()
		if err != nil {
			qp.Close()
			why = append(why, "RDMA: "+err.Error())
			break
		}
		return reply{Transport: TransportRDMA, RDMA: &rdmaOffer{Caps: qp.Caps(), Endpoint: qp.Endpoint()}}, qp
	}
	if !h.Shm && h.RDMA == nil {
		why = []string{"the peer offered no side channel"}
	}
	return reply{Transport: TransportTCP, Why: strings.Join(why, "; ")}, nil
}

// channel delivers what the side channel carries until it fails. With a
// proof, the first message must be it (message 0), or nothing is
// delivered.
func (in *inLink) channel(ctx context.Context, rcv *verbs.Receiver, proof []byte) {
	if proof != nil {
		seq, body, err := rcv.Recv(ctx)
		if err == nil && (seq != 0 || subtle.ConstantTimeCompare(body, proof) != 1) {
			err = &verbs.FaultError{Err: verbs.ErrCorrupt, Next: 1, What: "the side channel's first message is not this link's token"}
		}
		if err != nil {
			in.fault(err)
			return
		}
	}
	lendMax := rcv.Caps().Depth / 2
	for {
		seq, body, err := rcv.Recv(ctx)
		if err != nil {
			in.fault(err)
			return
		}
		if err := in.receive(seq, body, rcv, lendMax); err != nil {
			in.s.log.Warn("peers: closing verbs link", "peer", in.from, "err", err)
			in.st.Reset()
			return
		}
	}
}

// fault reports a side-channel fault to the peer, which resends over the
// stream.
func (in *inLink) fault(err error) {
	var fe *verbs.FaultError
	if errors.As(err, &fe) {
		in.s.fallbacks.Add(1)
		in.s.log.Warn("peers: verbs side channel fault; the peer resends over the stream", "peer", in.from, "err", err)
		in.w.ctl(ctlFault, max(fe.Next, 1))
		in.w.flush()
	}
}

// stream reads the verbs stream: pings, and messages that fell back.
func (in *inLink) stream(r *bufio.Reader) {
	for {
		in.st.SetReadDeadline(time.Now().Add(linkDeadAfter + pingEvery))
		hold := func(n int) error { return in.s.b.hold(in.from, n) }
		kind, payload, err := readCtl(r, in.s.b.maxFrame+8, hold)
		if err != nil {
			return
		}
		ok := in.control(kind, payload)
		hold(-cap(payload))
		if !ok {
			return
		}
	}
}

// control handles one control message of the stream; false ends it.
func (in *inLink) control(kind byte, payload []byte) bool {
	if len(payload) < 8 {
		return false
	}
	v := binary.BigEndian.Uint64(payload)
	switch kind {
	case ctlPing:
		return in.w.ctl(ctlPong, v) == nil && in.w.flush() == nil
	case ctlData:
		if err := in.deliver(v, payload[8:]); err != nil {
			in.s.log.Warn("peers: closing verbs link", "peer", in.from, "err", err)
			return false
		}
		return true
	}
	return false
}

// deliver hands message seq to its actor if it is the next one; an
// earlier one is a duplicate (sent again after a fault) and is dropped.
func (in *inLink) deliver(seq uint64, body []byte) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if seq < in.next {
		return nil
	}
	if seq > in.next {
		return gapError(seq, in.next)
	}
	env, msg, err := decodeFrame(body, in.s.b.types)
	if err != nil {
		return err
	}
	if err := in.s.b.deliver(in.from, env, msg); err != nil {
		return err
	}
	in.delivered()
	return nil
}

func gapError(seq, next uint64) error {
	return fmt.Errorf("message %d arrived before %d", seq, next)
}

// delivered counts the next message delivered, for the acker (under mu).
func (in *inLink) delivered() {
	in.next++
	select {
	case in.ack <- struct{}{}:
	default:
	}
}

// ackAfter delays acknowledgements: they only let the sender drop what
// it keeps for resending and tell a stall (in seconds), so one write for
// all the messages of ackAfter is enough. Written at once, an ack (an
// encrypted stream write here, a read and two goroutine wake-ups at the
// sender) would cost more than the activation's trip through shared
// memory, and compete with the stage that just got it.
const ackAfter = 20 * time.Millisecond

// acker acknowledges deliveries, ackAfter after the first of a burst.
func (in *inLink) acker(ctx context.Context) {
	t := time.NewTimer(ackAfter)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-in.ack:
		}
		t.Reset(ackAfter)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		in.mu.Lock()
		n := in.next - 1
		in.mu.Unlock()
		if in.w.ctl(ctlAck, n) != nil || in.w.flush() != nil {
			return
		}
	}
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
	c.s.SetWriteDeadline(time.Now().Add(transferTimeout(c.w.Buffered())))
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

package side

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"strata/messages"
	"strata/peers/internal/frame"
	"strata/peers/verbs"
)

// outLink sends activations to one peer. Its goroutine negotiates, then
// owns all sending: over the side channel while it works, over the verbs
// stream once it failed (resending what was not acknowledged first), so
// the peer gets every message once and in order.
type outLink struct {
	s      *Side
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
	token     []byte // the current run's (link goroutine only)
	sent      uint64
	acks      *acks // the current run's
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
	f, err := frame.Append(buf, env, msg, l.s.b.MaxFrame())
	if err != nil {
		return held{}, err
	}
	return held{body: f[frame.HeaderBytes:], buf: f}, nil
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
		// What waits for a run goes to the actor stream, in order,
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
		retry := l.attempt()
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

// toActorStream hands the activations queued for a run to the actor
// stream, in order, and sends those that follow there too (plain), until
// a run takes over (under smu).
func (l *outLink) toActorStream() {
	l.plain = true
	for _, h := range l.queue {
		l.s.b.SendFrame(l.peer, h.buf)
	}
	l.queue, l.queued = nil, 0
}

// takeOver makes a new run the path of activations after the actor
// stream carried them (plain, or an earlier link to the peer that ended):
// once the actor stream has written out all it was given, so the first
// message of the run cannot overtake them on the way out. (The peer reads the two streams in two goroutines: an
// activation still in its actor stream's read buffer could yet be
// delivered after the run's first; only a link that could not
// negotiate, or ended, sends activations there.) Bounded by Stall: a broken actor
// stream loses what it held anyway.
func (l *outLink) takeOver() {
	deadline := time.Now().Add(l.s.opts.Stall)
	for {
		l.smu.Lock()
		if l.s.b.Written(l.peer) || time.Now().After(deadline) || l.ctx.Err() != nil {
			l.plain = false
			l.smu.Unlock()
			return
		}
		l.smu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// acks is what one run's reader learnt from the peer (under l.mu).
type acks struct {
	acked   uint64 // every message up to it was delivered
	faultAt uint64 // a fault the peer reported (0: none)
	pongs   []pong
}

// attempt negotiates the link and sends over it until it ends. It returns
// true to negotiate again at once: the side channel had failed, the
// backoff has passed and the peer acknowledged everything sent, so a new
// run (numbering from 1 again) loses and reorders nothing.
func (l *outLink) attempt() (retry bool) {
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
	if conn != nil {
		defer conn.Close()
	}
	sender, err := l.newSender(conn, transport)
	if err != nil {
		s.log.Warn("peers: verbs link", "peer", l.peer, "err", err)
		return false
	}
	ls := l.begin(st, conn, sender, transport)
	defer func() {
		l.smu.Lock()
		l.sender = nil
		l.smu.Unlock()
	}()
	return ls.run()
}

// newSender opens the sending end of a negotiated side channel (nil
// when there is none). On RDMA, message 0 proves to the peer that this
// queue pair is the one its authenticated stream negotiated.
func (l *outLink) newSender(conn verbs.Conn, transport string) (*verbs.Sender, error) {
	if conn == nil {
		return nil, nil
	}
	sender, err := verbs.NewSender(conn)
	if err != nil {
		return nil, err
	}
	sender.Stall = l.s.opts.Stall
	if transport == TransportRDMA {
		proof := l.token
		if f := mangleProof.Load(); f != nil {
			proof = (*f)(proof)
		}
		if err := sender.Send(l.ctx, 0, proof); err != nil {
			return nil, err
		}
	}
	return sender, nil
}

// liveLink is one negotiated run of an outgoing link: its verbs
// stream (control messages, and the fallback) and its side channel, if
// any. Its methods run on the link's goroutine.
type liveLink struct {
	l    *outLink
	st   network.Stream
	conn verbs.Conn // nil: no side channel, activations take the actor stream
	w    *ctlWriter
	ack  *acks // what the stream's reader learnt from the peer

	started  time.Time
	retryAt  time.Time // when to try the side channel again after a fallback
	lastPong time.Time
	progress time.Time // last ack progress, or when nothing was unacknowledged
	prevAck  uint64
	nonce    uint64
	pingSent map[uint64]time.Time
}

// begin makes a negotiated run the link's: it takes the traffic over
// from the actor stream (or leaves it there, without a side channel),
// numbers what was queued meanwhile for the peer's new receiver, and
// sends it.
func (l *outLink) begin(st network.Stream, conn verbs.Conn, sender *verbs.Sender, transport string) *liveLink {
	s := l.s
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
	l.signal() // send what was queued
	now := time.Now()
	return &liveLink{l: l, st: st, conn: conn, w: &ctlWriter{w: bufio.NewWriterSize(st, 64<<10), s: st}, ack: ack,
		started: now, lastPong: now, progress: now, pingSent: map[uint64]time.Time{}}
}

// run sends until the run ends: the link stopped, the stream broke or
// went silent (false), or a fallback's wait is over and the side channel
// may be negotiated again (true).
func (ls *liveLink) run() (retry bool) {
	l, s := ls.l, ls.l.s
	readDone := make(chan error, 1)
	go func() { readDone <- l.read(ls.st, ls.ack) }()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	check := time.NewTicker(s.opts.Stall / 4)
	defer check.Stop()
	// The first ping now, for an RTT at once.
	if ls.ping() != nil {
		return false
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
			if time.Since(ls.lastPong) > linkDeadAfter {
				s.log.Warn("peers: verbs link silent, closing", "peer", l.peer)
				return false
			}
			if ls.ping() != nil {
				return false
			}
			continue
		case <-check.C:
		case <-l.wake:
		}
		retry, err := ls.step()
		if err != nil {
			return false
		}
		if retry {
			s.log.Info("peers: retrying the verbs side channel", "peer", l.peer)
			return true
		}
	}
}

// ping sends a ping on the stream (its pong gives the link's RTT, and
// proves the peer alive).
func (ls *liveLink) ping() error {
	ls.nonce++
	ls.pingSent[ls.nonce] = time.Now()
	if err := ls.w.ctl(ctlPing, ls.nonce); err != nil {
		return err
	}
	return ls.w.flush()
}

// step takes in what the peer acknowledged, falls back to the stream on
// a fault, a send error or a stall, and sends what was queued. retry: the
// run should end for the side channel to be negotiated again.
func (ls *liveLink) step() (retry bool, err error) {
	l, s := ls.l, ls.l.s
	l.mu.Lock()
	acked, faultAt := ls.ack.acked, ls.ack.faultAt
	if pong := l.takePongs(ls.ack, ls.pingSent); !pong.IsZero() {
		ls.lastPong = pong
	}
	l.mu.Unlock()

	l.smu.Lock()
	k := 0
	for k < len(l.retained) && l.retained[k].seq <= acked {
		l.release(l.retained[k])
		k++
	}
	l.retained = append(l.retained[:0], l.retained[k:]...)
	switch {
	case faultAt != 0:
		err = ls.fallback(fmt.Errorf("the peer detected a fault at message %d", faultAt))
	case l.sendErr != nil:
		err = ls.fallback(l.sendErr)
	}
	if acked != ls.prevAck || len(l.retained) == 0 {
		ls.prevAck, ls.progress = acked, time.Now()
	}
	if err == nil && l.sender != nil && time.Since(ls.progress) > s.opts.Stall {
		err = ls.fallback(fmt.Errorf("%w: no acknowledgement for %v", verbs.ErrStall, s.opts.Stall))
	}
	if err == nil {
		err = ls.sendQueued()
	}
	retry = ls.conn != nil && l.sender == nil && !ls.retryAt.IsZero() && time.Now().After(ls.retryAt) && len(l.retained) == 0
	l.smu.Unlock()
	if err != nil {
		return false, err
	}
	return retry, ls.w.flush()
}

// sendQueued sends the queued messages, over the side channel while it
// works, else on the stream; each is retained until acknowledged (under
// smu).
func (ls *liveLink) sendQueued() error {
	l := ls.l
	queue := l.queue
	l.queue, l.queued = nil, 0
	for _, h := range queue {
		l.retained = append(l.retained, h)
		if l.sender != nil {
			if err := l.sender.Send(l.ctx, h.seq, h.body); err == nil {
				l.addSent(len(h.body))
			} else if l.ctx.Err() != nil {
				return err
			} else if err := ls.fallback(err); err != nil { // resends this message too
				return err
			}
			continue
		}
		if err := ls.w.data(h.seq, h.body); err != nil {
			return err
		}
		l.addSent(len(h.body))
	}
	return nil
}

// fallback moves the link to the stream (under smu): the messages the
// peer has not acknowledged are resent there, and all after them follow.
// The side channel is tried again after a wait that doubles with each
// fallback soon after the last.
func (ls *liveLink) fallback(why error) error {
	l, s := ls.l, ls.l.s
	if l.sender == nil {
		return nil
	}
	l.sender, l.sendErr = nil, nil
	ls.conn.Close()
	s.fallbacks.Add(1)
	l.mu.Lock()
	l.fallbacks++
	l.fallingBack = true
	if time.Since(ls.started) > 10*s.opts.Retry {
		l.backoff = 0 // it had worked a good while: a fresh fault
	}
	wait := s.opts.Retry << min(l.backoff, 6)
	l.backoff++
	l.transport = TransportTCP
	acked := ls.ack.acked
	l.mu.Unlock()
	ls.retryAt = time.Now().Add(wait)
	s.log.Warn("peers: verbs side channel failed; resending over the stream", "peer", l.peer, "err", why, "resend_from", acked+1, "retry_in", wait)
	for _, h := range l.retained {
		if h.seq > acked {
			if err := ls.w.data(h.seq, h.body); err != nil {
				return err
			}
		}
	}
	return ls.w.flush()
}

func (l *outLink) addSent(n int) {
	l.mu.Lock()
	l.sent++
	l.mu.Unlock()
	l.s.b.Sent(l.peer, n)
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
	st, err := s.host.NewStream(ctx, l.peer, Protocol)
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

package side

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"strata/peers/internal/frame"
	"strata/peers/verbs"
)

// inLink receives activations from one peer: from the side channel while
// it works, from the stream after (and duplicates of what the channel
// already delivered are dropped by number).
type inLink struct {
	s    *Side
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

func (s *Side) handle(st network.Stream) {
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
		// The peer began a new run, so the old one is over: end it
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
		// An RDMA link starts with message 0, the token (see newSender).
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
func (s *Side) answer(h *hello, token []byte) (reply, verbs.Conn) {
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
		hold := func(n int) error { return in.s.b.Hold(in.from, n) }
		kind, payload, err := readCtl(r, in.s.b.MaxFrame()+8, hold)
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
	env, msg, err := frame.Decode(body, in.s.b.Types())
	if err != nil {
		return err
	}
	if err := in.s.b.Deliver(in.from, env, msg); err != nil {
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

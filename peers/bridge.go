package peers

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"strata/messages"
)

// ActorProtocol carries actor messages between nodes: one ordered stream
// from each node to each peer it sends to (so a pair of nodes talking both
// ways has two), frames as described in messages/envelope.proto.
const ActorProtocol protocol.ID = "/strata/actor/1.0.0"

// Stream timing. A frame must arrive in full, and a batch of frames must be
// written, within ioTimeout plus a second per 8 MiB; opening a stream gets
// openTimeout; a sender closes its stream after writerIdle without
// messages, so a receiver gives up on a stream silent for readerIdle.
var writerIdle = time.Minute // a variable for tests

const (
	ioTimeout       = 10 * time.Second
	openTimeout     = 5 * time.Second
	readerIdle      = 5 * time.Minute
	maxQueuedBytes  = 256 << 20 // per peer; beyond, new messages are dropped
	keepReadBufSize = 4 << 20
)

func transferTimeout(n int) time.Duration { return ioTimeout + time.Duration(n>>23)*time.Second }

// nonhost is protoactor's address for local PIDs made before the node set
// the registry's address (actor.localAddress).
const nonhost = "nonhost"

// bridge delivers messages for PIDs whose Address is another node's peer
// ID: an actor.AddressResolver hands protoactor an endpoint (an
// actor.Process) per peer, whose writer goroutine frames the messages onto
// a libp2p stream; the stream handler on the other side decodes them and
// delivers to the local PID. It also keeps the watches local actors hold on
// remote ones, to send Terminated when a peer goes away.
type bridge struct {
	host     host.Host
	self     string
	system   *actor.ActorSystem
	types    *protoregistry.Types
	log      *slog.Logger
	maxFrame int
	ctx      context.Context
	onSent   func(peer string, bytes int) // may be nil
	// side, when set, may take a message's frame body for the verbs side
	// channel (side.send); false leaves it to the actor stream.
	side func(p peer.ID, msg proto.Message, body []byte) bool

	mu        sync.Mutex
	endpoints map[string]*endpoint // by address (peer ID string)
	watches   map[peer.ID]map[watchKey]watch
	inbound   map[network.Stream]struct{}
	closed    bool
	wg        sync.WaitGroup
}

type watchKey struct{ watchee, watcher string }

type watch struct{ watchee, watcher *actor.PID }

func newBridge(ctx context.Context, h host.Host, system *actor.ActorSystem, types *protoregistry.Types, maxFrame int, log *slog.Logger) *bridge {
	b := &bridge{
		host: h, self: h.ID().String(), system: system, types: types, log: log, maxFrame: maxFrame, ctx: ctx,
		endpoints: make(map[string]*endpoint),
		watches:   make(map[peer.ID]map[watchKey]watch),
		inbound:   make(map[network.Stream]struct{}),
	}
	system.ProcessRegistry.RegisterAddressResolver(b.resolve)
	h.SetStreamHandler(ActorProtocol, b.handleStream)
	return b
}

// resolve is the actor.AddressResolver: PIDs whose address parses as a
// peer ID (and is not this node) go to that peer's endpoint.
func (b *bridge) resolve(pid *actor.PID) (actor.Process, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.endpoints[pid.Address]; ok {
		return e, true
	}
	id, err := peer.Decode(pid.Address)
	if err != nil || id == b.host.ID() {
		return nil, false
	}
	e := &endpoint{b: b, peer: id, wake: make(chan struct{}, 1)}
	b.endpoints[pid.Address] = e
	return e, true
}

func (b *bridge) close() {
	b.mu.Lock()
	b.closed = true
	for s := range b.inbound {
		s.Reset()
	}
	eps := b.endpoints
	b.mu.Unlock()
	b.host.RemoveStreamHandler(ActorProtocol)
	for _, e := range eps {
		e.wakeUp()
	}
	b.wg.Wait()
}

// peerDown tells every local actor watching an actor on p that it is gone
// (TerminatedReason_AddressTerminated): p disconnected, left the view, or
// could not be reached.
func (b *bridge) peerDown(p peer.ID) {
	b.mu.Lock()
	ws := b.watches[p]
	delete(b.watches, p)
	b.mu.Unlock()
	for _, w := range ws {
		b.deliverSystem(w.watcher, &actor.Terminated{Who: w.watchee, Why: actor.TerminatedReason_AddressTerminated})
	}
}

func (b *bridge) addWatch(p peer.ID, watchee, watcher *actor.PID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ws := b.watches[p]
	if ws == nil {
		ws = make(map[watchKey]watch)
		b.watches[p] = ws
	}
	ws[watchKey{watchee.Id, watcher.Id}] = watch{watchee, watcher}
}

func (b *bridge) removeWatch(p peer.ID, watchee, watcher *actor.PID) {
	if watchee == nil || watcher == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.watches[p], watchKey{watchee.Id, watcher.Id})
}

// deliverSystem hands a system message to a local process.
func (b *bridge) deliverSystem(target *actor.PID, msg any) {
	ref, _ := b.system.ProcessRegistry.GetLocal(target.Id)
	ref.SendSystemMessage(target, msg)
}

// handleStream reads frames from one inbound stream until it ends. Any
// invalid frame closes the stream (Reset) with one log line.
func (b *bridge) handleStream(s network.Stream) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		s.Reset()
		return
	}
	b.inbound[s] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.inbound, s)
		b.mu.Unlock()
	}()

	from := s.Conn().RemotePeer()
	r := bufio.NewReaderSize(s, 64<<10)
	var buf []byte
	fail := func(format string, args ...any) {
		b.log.Warn("peers: closing actor stream: "+fmt.Sprintf(format, args...), "peer", from)
		s.Reset()
	}
	for {
		s.SetReadDeadline(time.Now().Add(readerIdle))
		if _, err := r.Peek(1); err != nil {
			if errors.Is(err, io.EOF) {
				s.Close()
			} else {
				s.Reset()
			}
			return
		}
		s.SetReadDeadline(time.Now().Add(ioTimeout))
		var lb [frameHeaderBytes]byte
		if _, err := io.ReadFull(r, lb[:]); err != nil {
			fail("truncated frame length: %v", err)
			return
		}
		n := int(binary.BigEndian.Uint32(lb[:]))
		if n > b.maxFrame {
			fail("frame of %d bytes exceeds the %d-byte cap", n, b.maxFrame)
			return
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		body := buf[:n]
		s.SetReadDeadline(time.Now().Add(transferTimeout(n)))
		if _, err := io.ReadFull(r, body); err != nil {
			fail("truncated frame (%d bytes expected): %v", n, err)
			return
		}
		env, msg, err := decodeFrame(body, b.types)
		if cap(buf) > keepReadBufSize {
			buf = nil
		}
		if err == nil {
			err = b.deliver(from, env, msg)
		}
		if err != nil {
			fail("%v", err)
			return
		}
	}
}

// deliver hands a decoded message from peer from to its local target.
func (b *bridge) deliver(from peer.ID, env *messages.Envelope, msg proto.Message) error {
	target := b.system.NewLocalPID(env.TargetId)
	target.RequestId = env.TargetRequestId
	ref, _ := b.system.ProcessRegistry.GetLocal(target.Id) // DeadLetter when absent
	if env.System {
		switch m := msg.(type) {
		case *actor.Terminated:
			b.removeWatch(from, m.Who, target)
			ref.SendSystemMessage(target, m)
		case *actor.Watch, *actor.Unwatch, *actor.Stop:
			ref.SendSystemMessage(target, m)
		default:
			return fmt.Errorf("%w: %s is not a system message", ErrBadFrame, env.TypeName)
		}
		return nil
	}
	if isSystemMessage(msg) {
		return fmt.Errorf("%w: system message %s sent as a user message", ErrBadFrame, env.TypeName)
	}
	sender := pidFromWire(env.Sender)
	if sender != nil && (sender.Address == "" || sender.Address == nonhost) {
		sender.Address = from.String()
	}
	if sender == nil && len(env.Header) == 0 {
		ref.SendUserMessage(target, msg)
		return nil
	}
	ref.SendUserMessage(target, &actor.MessageEnvelope{Header: env.Header, Message: msg, Sender: sender})
	return nil
}

// endpoint is the actor.Process for every PID on one remote peer. Sending
// marshals the message in the caller's goroutine (the caller may reuse it
// right away) and queues the frame; one writer goroutine per endpoint,
// started on demand and stopped after writerIdle, writes the queue in order
// onto one stream.
type endpoint struct {
	b    *bridge
	peer peer.ID
	wake chan struct{}

	mu      sync.Mutex
	queue   [][]byte
	queued  int
	running bool
	dropped int // messages dropped since the last log line
}

var _ actor.Process = (*endpoint)(nil)

// SendUserMessage implements actor.Process.
func (e *endpoint) SendUserMessage(pid *actor.PID, message any) {
	header, msg, sender := actor.UnwrapEnvelope(message)
	env := &messages.Envelope{TargetId: pid.Id, TargetRequestId: pid.RequestId, Sender: pidToWire(sender)}
	if env.Sender != nil && env.Sender.Address == nonhost {
		env.Sender.Address = e.b.self
	}
	if header != nil && header.Length() > 0 {
		env.Header = header.ToMap()
	}
	e.send(pid, env, msg)
}

// SendSystemMessage implements actor.Process. Watch and Unwatch are
// recorded so that Terminated can be sent when the peer goes away.
func (e *endpoint) SendSystemMessage(pid *actor.PID, message any) {
	switch m := message.(type) {
	case *actor.Watch:
		e.b.addWatch(e.peer, pid, m.Watcher)
	case *actor.Unwatch:
		e.b.removeWatch(e.peer, pid, m.Watcher)
	case *actor.Terminated, *actor.Stop:
	default:
		e.b.log.Debug("peers: system message not sent to a remote actor", "type", fmt.Sprintf("%T", message), "pid", pid)
		return
	}
	e.send(pid, &messages.Envelope{TargetId: pid.Id, TargetRequestId: pid.RequestId, System: true}, message)
}

// Stop implements actor.Process.
func (e *endpoint) Stop(pid *actor.PID) { e.SendSystemMessage(pid, &actor.Stop{}) }

func (e *endpoint) send(pid *actor.PID, env *messages.Envelope, message any) {
	msg, ok := message.(proto.Message)
	if !ok {
		e.b.log.Warn("peers: dropped message to remote actor", "pid", pid, "err", fmt.Errorf("%w: %T", ErrNotProto, message))
		return
	}
	env.TypeName = string(msg.ProtoReflect().Descriptor().FullName())
	frame, err := appendFrame(nil, env, msg, e.b.maxFrame)
	if err != nil {
		e.b.log.Warn("peers: dropped message to remote actor", "pid", pid, "err", oneLine(err))
		return
	}
	if e.b.side != nil && e.b.side(e.peer, msg, frame[frameHeaderBytes:]) {
		return
	}
	e.mu.Lock()
	if e.queued+len(frame) > maxQueuedBytes {
		e.dropped++
		e.mu.Unlock()
		return
	}
	e.queue = append(e.queue, frame)
	e.queued += len(frame)
	start := !e.running
	e.running = true
	e.mu.Unlock()
	if start {
		e.b.mu.Lock()
		closed := e.b.closed
		if !closed {
			e.b.wg.Add(1)
		}
		e.b.mu.Unlock()
		if closed {
			e.mu.Lock()
			e.queue, e.queued, e.running = nil, 0, false
			e.mu.Unlock()
			return
		}
		go e.run()
	}
	e.wakeUp()
}

func (e *endpoint) wakeUp() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// take returns the queued frames, or stops the writer (running=false) when
// there are none and stop is set.
func (e *endpoint) take(stop bool) (frames [][]byte, bytes, dropped int, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	frames, bytes, dropped = e.queue, e.queued, e.dropped
	e.queue, e.queued, e.dropped = nil, 0, 0
	if len(frames) == 0 && stop {
		e.running = false
		return nil, 0, dropped, false
	}
	return frames, bytes, dropped, true
}

// run is the endpoint's writer goroutine.
func (e *endpoint) run() {
	defer e.b.wg.Done()
	var (
		s     network.Stream
		w     *bufio.Writer
		idle  = time.NewTimer(writerIdle)
		fails int
	)
	defer func() {
		idle.Stop()
		if s != nil {
			s.Close()
		}
	}()
	for {
		stop := false
		select {
		case <-e.wake:
		case <-idle.C:
			stop = true
		case <-e.b.ctx.Done():
			e.take(true)
			e.mu.Lock()
			e.running = false
			e.mu.Unlock()
			return
		}
		frames, n, dropped, ok := e.take(stop)
		if dropped > 0 {
			e.b.log.Warn("peers: send queue full, dropped messages", "peer", e.peer, "dropped", dropped)
		}
		if !ok {
			return
		}
		idle.Reset(writerIdle)
		if len(frames) == 0 {
			continue
		}
		if s == nil {
			var err error
			ctx, cancel := context.WithTimeout(e.b.ctx, openTimeout)
			s, err = e.b.host.NewStream(ctx, e.peer, ActorProtocol)
			cancel()
			if err != nil {
				s = nil
				if fails++; fails == 1 || fails%100 == 0 {
					e.b.log.Warn("peers: cannot reach peer, dropped messages", "peer", e.peer, "messages", len(frames), "err", oneLine(err))
				}
				e.b.peerDown(e.peer)
				continue
			}
			fails = 0
			w = bufio.NewWriterSize(s, 64<<10)
		}
		s.SetWriteDeadline(time.Now().Add(transferTimeout(n)))
		var err error
		for _, f := range frames {
			if _, err = w.Write(f); err != nil {
				break
			}
		}
		if err == nil {
			err = w.Flush()
		}
		if err == nil && e.b.onSent != nil {
			e.b.onSent(e.peer.String(), n)
		}
		if err != nil {
			e.b.log.Warn("peers: actor stream broken, dropped messages", "peer", e.peer, "messages", len(frames), "err", oneLine(err))
			s.Reset()
			s = nil
		}
	}
}

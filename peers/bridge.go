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
	"strata/peers/internal/frame"
	"strata/peers/internal/readgrow"
	"strata/peers/side"
)

// ActorProtocol carries actor messages between nodes: one ordered stream
// from each node to each peer it sends to (so a pair of nodes talking both
// ways has two), frames as described in messages/envelope.proto.
const ActorProtocol protocol.ID = "/strata/actor/1.0.0"

// Stream timing. A frame must arrive in full, and a batch of frames must be
// written, within ioTimeout plus a second per 8 MiB, and every read of a
// frame must make progress within ioTimeout; opening a stream gets
// openTimeout; a sender closes its stream after writerIdle without
// messages, so a receiver gives up on a stream silent for readerIdle.
var writerIdle = time.Minute // a variable for tests

const (
	ioTimeout       = 5 * time.Second
	openTimeout     = 5 * time.Second
	readerIdle      = 2 * time.Minute
	maxQueuedBytes  = 256 << 20 // per peer; beyond, new messages are dropped
	keepReadBufSize = 4 << 20
	// readChunk is the first buffer a frame body is read into; it doubles
	// as bytes arrive, so a length announced but never sent costs nothing.
	readChunk = readgrow.Chunk
)

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
	// maxBuffered caps the bytes of frames being read from one peer, over
	// all its streams.
	maxBuffered int
	rules       inboundRules
	ctx         context.Context
	onSent      func(peer string, bytes int) // may be nil
	// side, when set, may take a message for the verbs side channel
	// (side.Side.Send), before it is marshalled; false leaves it to the actor
	// stream.
	side func(p peer.ID, env *messages.Envelope, msg proto.Message) bool

	mu        sync.Mutex
	endpoints map[string]*endpoint // by address (peer ID string)
	watches   map[peer.ID]map[watchKey]watch
	inbound   map[network.Stream]struct{}
	buffered  map[peer.ID]int // bytes of read buffers held per peer
	// futures are the local futures waiting for an answer from each peer
	// (a request went there with the future as its sender): only that
	// peer may answer, and they fail when it goes away.
	futures    map[peer.ID]map[string]struct{}
	futureScan map[peer.ID]int // size at which futures[p] is next swept
	closed     bool
	wg         sync.WaitGroup
	// names caches peer IDs' text form (base58, costly on every message)
	// for the peers messages come from; dropped when a peer goes down.
	names sync.Map
}

// name is p's text form.
func (b *bridge) name(p peer.ID) string {
	if v, ok := b.names.Load(p); ok {
		return v.(string)
	}
	s := p.String()
	b.names.Store(p, s)
	return s
}

type watchKey struct{ watchee, watcher string }

type watch struct{ watchee, watcher *actor.PID }

func newBridge(ctx context.Context, h host.Host, system *actor.ActorSystem, types *protoregistry.Types, maxFrame int, rules []Inbound, log *slog.Logger) *bridge {
	b := &bridge{
		host: h, self: h.ID().String(), system: system, types: types, log: log, maxFrame: maxFrame, ctx: ctx,
		maxBuffered: 2 * maxFrame,
		rules:       append(inboundRules{pingInbound}, rules...),
		endpoints:   make(map[string]*endpoint),
		watches:     make(map[peer.ID]map[watchKey]watch),
		inbound:     make(map[network.Stream]struct{}),
		buffered:    make(map[peer.ID]int),
		futures:     make(map[peer.ID]map[string]struct{}),
		futureScan:  make(map[peer.ID]int),
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
// (TerminatedReason_AddressTerminated), and fails every local future
// waiting for p's answer (ErrDeadLetter, at once rather than at its
// timeout): p disconnected, left the view, or could not be reached.
func (b *bridge) peerDown(p peer.ID) {
	b.names.Delete(p)
	b.mu.Lock()
	ws := b.watches[p]
	delete(b.watches, p)
	fs := b.futures[p]
	delete(b.futures, p)
	delete(b.futureScan, p)
	b.mu.Unlock()
	for _, w := range ws {
		b.deliverSystem(w.watcher, &actor.Terminated{Who: w.watchee, Why: actor.TerminatedReason_AddressTerminated})
	}
	for id := range fs {
		if ref, ok := b.system.ProcessRegistry.GetLocal(id); ok {
			pid := b.system.NewLocalPID(id)
			ref.SendUserMessage(pid, &actor.DeadLetterResponse{Target: pid})
		}
	}
}

// expectAnswer records that the local future id waits for p's answer.
// Futures that time out leave the registry but not this map: it is swept
// of them whenever it has doubled since the last sweep.
func (b *bridge) expectAnswer(p peer.ID, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fs := b.futures[p]
	if fs == nil {
		fs = make(map[string]struct{})
		b.futures[p] = fs
	}
	fs[id] = struct{}{}
	if len(fs) < max(b.futureScan[p], 64) {
		return
	}
	for id := range fs {
		if _, ok := b.system.ProcessRegistry.GetLocal(id); !ok {
			delete(fs, id)
		}
	}
	b.futureScan[p] = 2 * len(fs)
}

// answered reports whether the local future id waits for p's answer, and
// forgets it: a future takes one answer.
func (b *bridge) answered(p peer.ID, id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.futures[p][id]
	delete(b.futures[p], id)
	return ok
}

// takeWatch reports whether the local watcher watches watchee on p, and
// forgets the watch (a Terminated ends it).
func (b *bridge) takeWatch(p peer.ID, watchee, watcher *actor.PID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := watchKey{watchee.Id, watcher.Id}
	_, ok := b.watches[p][k]
	delete(b.watches[p], k)
	return ok
}

// errOverBuffered: a peer's frames in flight, over all its streams, would
// hold more memory than the bridge gives one peer.
var errOverBuffered = errors.New("peers: frames in flight from one peer would hold more than")

// Hold accounts n more (or, negative, fewer) bytes of read buffers for p,
// refusing growth beyond maxBuffered.
func (b *bridge) Hold(p peer.ID, n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > 0 && b.buffered[p]+n > b.maxBuffered {
		return fmt.Errorf("%w %d bytes", errOverBuffered, b.maxBuffered)
	}
	if b.buffered[p] += n; b.buffered[p] <= 0 {
		delete(b.buffered, p)
	}
	return nil
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
// invalid or refused frame closes the stream (Reset) with one log line.
func (b *bridge) handleStream(s network.Stream) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		s.Reset()
		return
	}
	b.inbound[s] = struct{}{}
	b.mu.Unlock()
	from := s.Conn().RemotePeer()
	var buf []byte
	defer func() {
		b.Hold(from, -cap(buf))
		b.mu.Lock()
		delete(b.inbound, s)
		b.mu.Unlock()
	}()

	r := bufio.NewReaderSize(s, 64<<10)
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
		var lb [frame.HeaderBytes]byte
		if _, err := io.ReadFull(r, lb[:]); err != nil {
			fail("truncated frame length: %v", err)
			return
		}
		n := int(binary.BigEndian.Uint32(lb[:]))
		if n > b.maxFrame {
			fail("frame of %d bytes exceeds the %d-byte cap", n, b.maxFrame)
			return
		}
		body, err := b.readBody(s, r, from, &buf, n)
		if errors.Is(err, errOverBuffered) {
			fail("frame of %d bytes: %v", n, err)
			return
		} else if err != nil {
			fail("truncated frame (%d bytes expected): %v", n, err)
			return
		}
		env, msg, err := frame.Decode(body, b.types)
		if cap(buf) > keepReadBufSize {
			b.Hold(from, -cap(buf))
			buf = nil
		}
		if err == nil {
			err = b.Deliver(from, env, msg)
		}
		if err != nil {
			fail("%v", err)
			return
		}
	}
}

// readBody reads an n-byte frame body into *buf, growing it (and the
// peer's account of buffered bytes) as the bytes arrive, not as
// announced. Each read must make progress within ioTimeout, the whole
// body arrive within frame.TransferTimeout(n).
func (b *bridge) readBody(s network.Stream, r io.Reader, from peer.ID, buf *[]byte, n int) ([]byte, error) {
	deadline := time.Now().Add(frame.TransferTimeout(n))
	body := (*buf)[:0]
	for len(body) < n {
		if len(body) == cap(body) {
			grow := min(n, max(2*cap(body), readChunk))
			if err := b.Hold(from, grow-cap(body)); err != nil {
				return nil, err
			}
			nb := make([]byte, len(body), grow)
			copy(nb, body)
			body, *buf = nb, nb
		}
		d := time.Now().Add(ioTimeout)
		if d.After(deadline) {
			d = deadline
		}
		s.SetReadDeadline(d)
		k, err := r.Read(body[len(body):min(cap(body), n)])
		body = body[:len(body)+k]
		if err != nil && len(body) < n {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

// ErrRefused is why a message a peer may not send closes its stream: a
// target or type outside Config.Inbound, a lifecycle message, a Terminated
// about another node's actor, a sender on another node.
var ErrRefused = errors.New("peers: refused")

// deliver hands a decoded message from peer from to its local target, if
// from may send it.
func (b *bridge) Deliver(from peer.ID, env *messages.Envelope, msg proto.Message) error {
	if err := b.admit(from, env, msg); errors.Is(err, errDrop) {
		return nil
	} else if err != nil {
		return err
	}
	target := b.system.NewLocalPID(env.TargetId)
	target.RequestId = env.TargetRequestId
	ref, _ := b.system.ProcessRegistry.GetLocal(target.Id) // DeadLetter when absent
	if env.System {
		ref.SendSystemMessage(target, msg)
		return nil
	}
	sender := pidFromWire(env.Sender)
	if sender != nil && (sender.Address == "" || sender.Address == nonhost) {
		sender.Address = b.name(from)
	}
	if sender == nil && len(env.Header) == 0 {
		ref.SendUserMessage(target, msg)
		return nil
	}
	ref.SendUserMessage(target, &actor.MessageEnvelope{Header: env.Header, Message: msg, Sender: sender})
	return nil
}

// errDrop marks a message dropped quietly: an answer nobody waits for
// (any more), a Terminated about a watch already ended. Both happen to
// honest peers when a timeout or an Unwatch crosses the message.
var errDrop = errors.New("peers: dropped")

// admit decides whether peer from may send msg as env says: nil to
// deliver, errDrop to drop it quietly, else why the stream is closed.
func (b *bridge) admit(from peer.ID, env *messages.Envelope, msg proto.Message) error {
	self := b.name(from)
	if env.System {
		switch m := msg.(type) {
		case *actor.Terminated:
			// Only about an actor of the sender's own, that a local actor
			// watches there: never a forged end of a local or third
			// node's actor.
			if m.Who == nil || m.Who.Address != self {
				return fmt.Errorf("%w: Terminated about %s/%s, not an actor of the sending peer", ErrRefused, m.GetWho().GetAddress(), m.GetWho().GetId())
			}
			if !b.takeWatch(from, m.Who, b.system.NewLocalPID(env.TargetId)) {
				return errDrop
			}
			return nil
		case *actor.Watch:
			return b.admitWatch(self, env.TargetId, m.Watcher, "Watch")
		case *actor.Unwatch:
			return b.admitWatch(self, env.TargetId, m.Watcher, "Unwatch")
		case *actor.Stop:
			return fmt.Errorf("%w: Stop for %.64q (peers may not stop local actors)", ErrRefused, env.TargetId)
		}
		return fmt.Errorf("%w: %s is not a system message", frame.ErrBad, env.TypeName)
	}
	if isSystemMessage(msg) {
		return fmt.Errorf("%w: system message %s sent as a user message", frame.ErrBad, env.TypeName)
	}
	if isLifecycle(msg) {
		return fmt.Errorf("%w: %s for %.64q (peers may not stop local actors)", ErrRefused, env.TypeName, env.TargetId)
	}
	if s := env.Sender; s != nil && s.Address != "" && s.Address != nonhost && s.Address != self {
		return fmt.Errorf("%w: sender on another node (%.64q)", ErrRefused, s.Address)
	}
	if isFuture(env.TargetId) {
		if !b.answered(from, env.TargetId) {
			return errDrop // late (timed out), or not asked of this peer
		}
		return nil
	}
	if _, ok := msg.(*actor.DeadLetterResponse); ok {
		// The peer's answer to a message of ours for an actor it does not
		// have (any more): honest when a shard was evicted meanwhile, and
		// a peer could provoke them; nobody here asked for it, and it is
		// no reason to close a stream that carries others' messages.
		return errDrop
	}
	if !b.rules.allows(env.TargetId, env.TypeName) {
		return fmt.Errorf("%w: %s for %.64q is not allowed from peers", ErrRefused, env.TypeName, env.TargetId)
	}
	return nil
}

func (b *bridge) admitWatch(from, target string, watcher *actor.PID, what string) error {
	switch {
	case watcher == nil || watcher.Address != from:
		return fmt.Errorf("%w: %s for a watcher not on the sending peer", ErrRefused, what)
	case !b.rules.watchable(target):
		return fmt.Errorf("%w: %s of %.64q is not allowed from peers", ErrRefused, what, target)
	}
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
	// unwritten counts frames queued and not yet written out (or lost):
	// the verbs side channel waits for none before it takes over.
	unwritten int
}

// SendFrame queues a frame (appendFrame's) for peer p's actor stream.
func (b *bridge) SendFrame(p peer.ID, frame []byte) {
	if e, ok := b.resolve(&actor.PID{Address: p.String()}); ok {
		e.(*endpoint).enqueue(frame)
	}
}

// Written reports whether every frame queued for p's actor stream has
// been written out (or lost with a broken stream).
func (b *bridge) Written(p peer.ID) bool {
	b.mu.Lock()
	e := b.endpoints[p.String()]
	b.mu.Unlock()
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unwritten == 0
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
	if m, ok := msg.(proto.Message); ok && isLifecycle(m) {
		e.b.log.Debug("peers: lifecycle message not sent to a remote actor", "type", fmt.Sprintf("%T", msg), "pid", pid)
		return
	}
	if env.Sender != nil && env.Sender.Address == e.b.self && isFuture(env.Sender.Id) {
		e.b.expectAnswer(e.peer, env.Sender.Id)
	}
	e.send(pid, env, msg)
}

// SendSystemMessage implements actor.Process. Watch and Unwatch are
// recorded so that Terminated can be sent when the peer goes away. Stop
// is not sent: peers refuse it.
func (e *endpoint) SendSystemMessage(pid *actor.PID, message any) {
	switch m := message.(type) {
	case *actor.Watch:
		e.b.addWatch(e.peer, pid, m.Watcher)
	case *actor.Unwatch:
		e.b.removeWatch(e.peer, pid, m.Watcher)
	case *actor.Terminated:
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
		e.b.log.Warn("peers: dropped message to remote actor", "pid", pid, "err", fmt.Errorf("%w: %T", frame.ErrNotProto, message))
		return
	}
	if e.b.side != nil && e.b.side(e.peer, env, msg) {
		return
	}
	env.TypeName = string(msg.ProtoReflect().Descriptor().FullName())
	frame, err := frame.Append(nil, env, msg, e.b.maxFrame)
	if err != nil {
		e.b.log.Warn("peers: dropped message to remote actor", "pid", pid, "err", oneLine(err))
		return
	}
	e.enqueue(frame)
}

// enqueue queues a frame for the writer, starting it if needed.
func (e *endpoint) enqueue(frame []byte) {
	e.mu.Lock()
	if e.queued+len(frame) > maxQueuedBytes {
		e.dropped++
		e.mu.Unlock()
		return
	}
	e.queue = append(e.queue, frame)
	e.queued += len(frame)
	e.unwritten++
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
			e.queue, e.queued, e.running, e.unwritten = nil, 0, false, 0
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
			e.running, e.unwritten = false, 0
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
				e.mu.Lock()
				e.unwritten -= len(frames)
				e.mu.Unlock()
				continue
			}
			fails = 0
			w = bufio.NewWriterSize(s, 64<<10)
		}
		s.SetWriteDeadline(time.Now().Add(frame.TransferTimeout(n)))
		var err error
		for _, f := range frames {
			if _, err = w.Write(f); err != nil {
				break
			}
		}
		if err == nil {
			err = w.Flush()
		}
		e.mu.Lock()
		e.unwritten -= len(frames)
		e.mu.Unlock()
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

// The protoactor system messages that may cross peers, and only as system
// messages: a Terminated arriving as a user message would be a forgery.
func isSystemMessage(m proto.Message) bool {
	switch m.(type) {
	case *actor.Watch, *actor.Unwatch, *actor.Terminated, *actor.Stop:
		return true
	}
	return false
}

// Lifecycle messages end an actor; peers may not send them (Stop as a
// system message is refused the same way).
func isLifecycle(m proto.Message) bool {
	switch m.(type) {
	case *actor.PoisonPill, *actor.Stop:
		return true
	}
	return false
}

func pidToWire(p *actor.PID) *messages.PID {
	if p == nil {
		return nil
	}
	return &messages.PID{Address: p.Address, Id: p.Id, RequestId: p.RequestId}
}

func pidFromWire(p *messages.PID) *actor.PID {
	if p == nil || p.Id == "" {
		return nil
	}
	return &actor.PID{Address: p.Address, Id: p.Id, RequestId: p.RequestId}
}

// DeliverBorrowed implements side.Bridge: deliver for a Forward read in place: admitted as
// fw, handed to its (live, local) target as bw.
func (b *bridge) DeliverBorrowed(from peer.ID, env *messages.Envelope, fw *messages.Forward, bw *side.Borrowed) error {
	if err := b.admit(from, env, fw); errors.Is(err, errDrop) {
		return side.ErrNotDelivered
	} else if err != nil {
		return err
	}
	target := b.system.NewLocalPID(env.TargetId)
	target.RequestId = env.TargetRequestId
	ref, ok := b.system.ProcessRegistry.GetLocal(target.Id)
	if !ok {
		// Dead letters would never return the slot.
		return side.ErrNotDelivered
	}
	sender := pidFromWire(env.Sender)
	if sender != nil && (sender.Address == "" || sender.Address == nonhost) {
		sender.Address = b.name(from)
	}
	if sender == nil && len(env.Header) == 0 {
		ref.SendUserMessage(target, bw)
		return nil
	}
	ref.SendUserMessage(target, &actor.MessageEnvelope{Header: env.Header, Message: bw, Sender: sender})
	return nil
}

// The rest of side.Bridge.

// MaxFrame implements side.Bridge.
func (b *bridge) MaxFrame() int { return b.maxFrame }

// Types implements side.Bridge.
func (b *bridge) Types() *protoregistry.Types { return b.types }

// Borrows implements side.Bridge.
func (b *bridge) Borrows(target string) bool { return b.rules.borrows(target) }

// Sent implements side.Bridge.
func (b *bridge) Sent(p peer.ID, n int) {
	if b.onSent != nil {
		b.onSent(b.name(p), n)
	}
}

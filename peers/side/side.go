// Package side is the side channel: the faster path activations take
// between two nodes (shared memory on one host, RDMA queue pairs between
// hosts), beside the libp2p actor stream. Each outgoing link negotiates
// its transport over a verbs stream (Protocol), which then stays open as
// the link's liveness signal, control channel (acks, faults, pings) and
// fallback: a side channel that fails hands its undelivered messages,
// and all after them, to that stream, so the peer gets every message
// once and in order. The node's actor bridge (Bridge) decides what a
// peer may send; this package only carries frames (peers/internal/frame).
package side

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"strata/messages"
	"strata/peers/verbs"
)

// Protocol negotiates the side channel activations take to a peer,
// and then stays open as its liveness signal, its control channel (acks,
// faults, round-trip pings) and its fallback: once the side channel fails,
// the messages it did not deliver, and all after them, travel on this
// stream.
const Protocol protocol.ID = "/strata/verbs/1.0.0"

// Transports a node may allow for activations (peers.Config.Transport).
const (
	TransportAuto = "auto" // the best both ends share
	TransportTCP  = "tcp"  // the libp2p stream only
	TransportShm  = "shm"  // shared memory on one host, else the stream
	TransportRDMA = "rdma" // RDMA (a build with an RDMA backend), else the stream
)

// Options tune the side channel; the zero value is the default.
type Options struct {
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

// negotiateDelay, in tests, slows every negotiation down (ns).
var negotiateDelay atomic.Int64

// mangleProof, in tests, changes the token an RDMA link's opener sends as
// its first message.
var mangleProof atomic.Pointer[func([]byte) []byte]

// Bridge is what the side channel needs of the node's actor bridge: the
// frames it carries come from and go to actors, under the bridge's rules.
type Bridge interface {
	// MaxFrame caps one frame's body.
	MaxFrame() int
	// Types resolves the message types peers may send.
	Types() *protoregistry.Types
	// SendFrame queues a frame (frame.Append's) for p's actor stream.
	SendFrame(p peer.ID, frame []byte)
	// Written reports whether every frame queued for p's actor stream
	// has been written out.
	Written(p peer.ID) bool
	// Hold accounts n more (or, negative, fewer) bytes of read buffers
	// held for p, refusing growth beyond the bridge's cap.
	Hold(p peer.ID, n int) error
	// Deliver admits a message from p and hands it to its actor.
	Deliver(from peer.ID, env *messages.Envelope, msg proto.Message) error
	// DeliverBorrowed is Deliver for a Forward read in place: it returns
	// ErrNotDelivered when the message was admitted but not handed over
	// (the slot then comes straight back).
	DeliverBorrowed(from peer.ID, env *messages.Envelope, fw *messages.Forward, bw *Borrowed) error
	// Borrows says whether the actor target takes Forwards read in place
	// (Borrowed) rather than copies.
	Borrows(target string) bool
	// Sent hears the bytes of every message sent to p.
	Sent(p peer.ID, n int)
}

// Config is what a Side runs with.
type Config struct {
	Host   host.Host
	Bridge Bridge
	// Transport is the transports allowed (TransportAuto when empty).
	Transport string
	Options   Options
	Log       *slog.Logger
	// IsMember says whether a peer is in the node's membership view: a
	// link's peer that left is not waited for.
	IsMember func(peer.ID) bool
}

// Side runs this node's links: one outgoing link per peer it sends
// activations to (opened when the peer joins, Open), and the incoming
// ones peers open to it.
type Side struct {
	host      host.Host
	self      peer.ID
	b         Bridge
	isMember  func(peer.ID) bool
	log       *slog.Logger
	transport string
	opts      Options
	ctx       context.Context
	cancel    context.CancelFunc
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

// New starts the node's side channel: it answers peers' verbs streams
// from now on, and opens links as Open is called.
func New(cfg Config) (*Side, error) {
	transport, opts := cfg.Transport, cfg.Options
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
	s := &Side{host: cfg.Host, self: cfg.Host.ID(), b: cfg.Bridge, isMember: cfg.IsMember, log: cfg.Log, transport: transport, opts: opts,
		out: map[peer.ID]*outLink{}, in: map[network.Stream]*inLink{}, last: map[peer.ID]*inTurn{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	switch {
	case opts.RDMA != nil:
		s.rdma = opts.RDMA
	case verbs.RDMAAvailable():
		s.rdma = verbs.OpenRDMA
	}
	s.host.SetStreamHandler(Protocol, s.handle)
	return s, nil
}

// Close ends every link and waits for their goroutines.
func (s *Side) Close() {
	s.cancel()
	s.host.RemoveStreamHandler(Protocol)
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

// Open returns the outgoing link to p, opening it if there is none
// (the node opens one to every member that joins).
func (s *Side) Open(p peer.ID) *outLink {
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

// Send is the bridge's hook: it takes an activation for p when the link
// to p carries them (a side channel, or its fallback on the verbs stream),
// and returns false to leave it to the actor stream. It runs in the
// sender's goroutine, and on a working side channel sends from there.
func (s *Side) Send(p peer.ID, env *messages.Envelope, msg proto.Message) bool {
	if fw, ok := msg.(*messages.Forward); !ok || len(fw.Hidden) == 0 {
		return false
	}
	l := s.Open(p)
	return l != nil && l.take(env, msg)
}

// Fallbacks counts side-channel faults that sent traffic back to the
// verbs stream, on both ends of this node's links.
func (s *Side) Fallbacks() int64 { return s.fallbacks.Load() }

// Returns counts the times an outgoing link got its side channel back
// after a fallback (Options.Retry).
func (s *Side) Returns() int64 { return s.returns.Load() }

// Links lists the outgoing links.
func (s *Side) Links() []Link {
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

// oneLine flattens a multi-line error (libp2p lists every failed dial on
// its own line) for a log line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	ma "github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/reflect/protoregistry"

	"strata/messages"
	"strata/peers/allreduce"
	"strata/peers/internal/frame"
	"strata/peers/side"
	"strata/peers/weights"
)

// DefaultMaxMessageBytes caps one message (envelope + message) a peer may
// send: room for the activations of a long prefill chunk.
const DefaultMaxMessageBytes = frame.DefaultMaxBytes

// Config configures a Node. The zero value of every field is usable.
type Config struct {
	// DataDir holds the node's identity (identity.key). Empty: a fresh
	// identity for this run only.
	DataDir string
	// Listen are the multiaddrs to listen on. Empty: "/ip4/0.0.0.0/tcp/0",
	// and "/ip4/0.0.0.0/udp/0/quic-v1" too when Secret is empty.
	Listen []string
	// Join are peers to connect to at start and reconnect to, with backoff,
	// whenever the connection is lost; each must end in /p2p/PEER_ID.
	Join []string
	// Secret is the cluster secret (at least MinSecretBytes). The libp2p
	// private-network key is derived from it (NetworkKey), so only nodes
	// with the same secret can connect. Empty: an open network that any
	// libp2p peer may join; QUIC is only available then (libp2p private
	// networks are TCP only).
	Secret []byte
	// NoMDNS turns off LAN discovery (mDNS) and leaves Join the only way
	// to find peers.
	NoMDNS bool
	// MemoryBytes caps the memory the node offers the cluster. 0: all of
	// physical memory.
	MemoryBytes uint64
	// HeldBytes is memory the node keeps for itself within that (its
	// draft model): offered to no one.
	HeldBytes uint64
	// OnSent, when set, hears the bytes of actor messages written to each
	// peer (after each successful write batch), for metrics.
	OnSent func(peer string, bytes int)
	// UsedBytes, when set, reports the memory the node holds for the
	// cluster (shards and KV caches); the free memory announced is at most
	// the offer less that.
	UsedBytes func() uint64
	// Weights, when set, is served to peers over weights.Protocol.
	Weights weights.Source
	// FetchesWeights is announced: the node keeps layers it fetches from
	// peers, so plans may give it layers of models it lacks.
	FetchesWeights bool
	// Models, when set, lists the models to announce. It is called for
	// every heartbeat, so it should be cheap (cache digests).
	Models func() []*messages.ModelInfo
	// ComputeFlops is the compute rate to announce, in FLOP/s (0: not
	// measured).
	ComputeFlops float64
	// MemoryBandwidth is the memory read rate to announce, in bytes/s (0:
	// not measured).
	MemoryBandwidth float64
	// Device is the compute device beside the CPU to announce, "NAME
	// (KIND)" ("": none).
	Device string
	// Version is the build version to announce.
	Version string
	// Protocols is the range of cluster protocol versions to announce and
	// accept. Zero: OurProtocols (tests set others).
	Protocols ProtocolRange
	// Findings, when set, lists the node's own health findings to
	// announce (strata doctor's local checks), one line each; called for
	// every heartbeat, so it should be cheap.
	Findings func() []string
	// Fetching, when set, lists the fetches of layers from peers in
	// flight, to announce (at most maxInfoFetches).
	Fetching func() []*messages.FetchProgress
	// ClockOffset is added to the wall clock the node announces: a test
	// hook for strata doctor's clock-skew check.
	ClockOffset time.Duration
	// Logger receives the node's log lines. Nil: slog.Default().
	Logger *slog.Logger
	// HeartbeatInterval is how often the node publishes its NodeInfo.
	// Zero: 1s.
	HeartbeatInterval time.Duration
	// MemberTimeout drops a member not heard from for this long; at least
	// twice HeartbeatInterval. Zero: 2.5s, checked every MemberTimeout/25,
	// so a node cut off from gossip is gone from every view within 2.6s of
	// its last heartbeat. (A node whose connections close is dropped at
	// once by the nodes connected to it, which with full-mesh dialing is
	// all of them.)
	MemberTimeout time.Duration
	// MaxMessageBytes caps one actor message frame, both ways. Zero:
	// DefaultMaxMessageBytes (64 MiB).
	MaxMessageBytes int
	// Inbound lists the local actors that actors on other nodes may send
	// to, and what; a message outside it closes the stream it came on.
	// Nil: only the PingActor (which is always allowed), and answers to
	// this node's futures (always allowed, from the peer asked).
	Inbound []Inbound
	// Transport is what activations (Forward messages with hidden states)
	// may travel on to a peer: TransportAuto (""), TransportTCP,
	// TransportShm or TransportRDMA; see side.Protocol.
	Transport string
	// Verbs tunes the side channel.
	Verbs side.Options
	// Types resolves the message types of incoming actor messages by full
	// name; a type not found closes the stream. Nil:
	// protoregistry.GlobalTypes (every generated message linked in).
	Types *protoregistry.Types
}

// Errors from New.
var (
	ErrClosed    = errors.New("peers: node closed")
	ErrAddrInUse = errors.New("address already in use")
)

// Node is one strata node: a libp2p host with its identity and
// private-network key, discovery, membership, and an actor system whose
// PIDs reach actors on other nodes.
type Node struct {
	cfg    Config
	log    *slog.Logger
	host   host.Host
	system *actor.ActorSystem
	bridge *bridge
	side   *side.Side
	ranges *weights.Service
	groups *allreduce.Service // tensor-parallel all-reduce groups
	pubsub *pubsub.PubSub
	member *Membership
	mdns   mdns.Service
	// probing holds a token while a throughput probe is being received.
	probing chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	dialMu  sync.Mutex
	dialing map[peer.ID]*backoff

	closeOnce sync.Once
}

// New starts a node: it listens, starts discovery and membership, and
// connects to cfg.Join in the background. ctx bounds only the start; Close
// stops the node.
func New(ctx context.Context, cfg Config) (*Node, error) {
	cfg, listen, join, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rm, err := resourceManager()
	if err != nil {
		return nil, err
	}
	g := newGuard()
	opts := []libp2p.Option{
		libp2p.NoListenAddrs,
		libp2p.Security(noise.ID, noise.New),
		libp2p.Transport(guardedTCP(g)),
		libp2p.ConnectionGater(g),
		libp2p.ResourceManager(rm),
		libp2p.DisableRelay(),
		libp2p.Ping(false),
		libp2p.UserAgent("strata/" + cfg.Version),
	}
	if len(cfg.Secret) > 0 {
		psk, err := NetworkKey(cfg.Secret)
		if err != nil {
			return nil, err
		}
		opts = append(opts, libp2p.PrivateNetwork(psk))
	} else {
		opts = append(opts, libp2p.Transport(quic.NewTransport))
	}
	if cfg.DataDir != "" {
		key, err := LoadOrCreateIdentity(cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("identity: %w", err)
		}
		if msg, loose := LooseFileMode(filepath.Join(cfg.DataDir, IdentityFile)); loose {
			cfg.Logger.Warn("peers: the node's private key is not private: " + msg)
		}
		opts = append(opts, libp2p.Identity(key))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("libp2p: %w", err)
	}
	for _, a := range listen {
		if err := h.Network().Listen(a); err != nil {
			h.Close()
			return nil, listenError(a, err)
		}
	}

	n := &Node{cfg: cfg, log: cfg.Logger, host: h, dialing: make(map[peer.ID]*backoff), probing: make(chan struct{}, 1)}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return protoactorLogger(cfg.Logger)
	}))
	// PIDs made from now on carry the peer ID as their address.
	n.system.ProcessRegistry.Address = h.ID().String()
	n.bridge = newBridge(n.ctx, h, n.system, cfg.Types, cfg.MaxMessageBytes, cfg.Inbound, cfg.Logger)
	h.SetStreamHandler(ProbeProtocol, n.handleProbe)
	n.ranges = weights.Serve(n.host, n.cfg.Weights)
	n.groups = allreduce.Serve(n.host, n.log)
	n.bridge.onSent = cfg.OnSent
	n.side, err = side.New(side.Config{Host: h, Bridge: n.bridge, Transport: cfg.Transport, Options: cfg.Verbs, Log: n.log, IsMember: n.isMember})
	if err != nil {
		n.Close()
		return nil, err
	}
	n.bridge.side = n.side.Send
	if _, err := n.system.Root.SpawnNamed(actor.PropsFromFunc(pingActor), PingActor); err != nil {
		n.Close()
		return nil, err
	}

	h.Network().Notify(&network.NotifyBundle{
		DisconnectedF: func(_ network.Network, c network.Conn) {
			p := c.RemotePeer()
			go n.peerDisconnected(p) // notifiees must not block
		},
	})

	if err := n.startMembership(); err != nil {
		n.Close()
		return nil, err
	}
	n.openLinks()
	for _, ai := range join {
		n.wg.Add(1)
		go n.keepJoined(ai)
	}
	if cfg.DataDir != "" {
		for _, ai := range readKnownPeers(cfg.DataDir) {
			if ai.ID == h.ID() || slices.ContainsFunc(join, func(j peer.AddrInfo) bool { return j.ID == ai.ID }) {
				continue
			}
			n.wg.Add(1)
			go n.rejoin(ai)
		}
	}
	if !cfg.NoMDNS {
		n.mdns = mdns.NewMdnsService(h, ServiceName(cfg.Secret), mdnsNotifee{n})
		if err := n.mdns.Start(); err != nil {
			n.log.Warn("peers: mDNS discovery off", "err", err)
			n.mdns = nil
		}
	}
	if err := ctx.Err(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// resourceManager is libp2p's, with its default limits scaled to this
// machine, except that connections in their handshake (the transient
// scope) get room for many remote IPs' worth of the guard's per-IP
// allowance, so that one address flooding the port cannot use it all up.
func resourceManager() (network.ResourceManager, error) {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	transient := rcmgr.PartialLimitConfig{Transient: rcmgr.ResourceLimits{
		ConnsInbound: 32 * maxPendingPerIP,
		Conns:        64 * maxPendingPerIP,
		FD:           64 * maxPendingPerIP,
	}}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(transient.Build(limits.AutoScale())))
	if err != nil {
		return nil, fmt.Errorf("libp2p resource manager: %w", err)
	}
	return rm, nil
}

func (cfg Config) withDefaults() (Config, []ma.Multiaddr, []peer.AddrInfo, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Second
	}
	if cfg.MemberTimeout <= 0 {
		cfg.MemberTimeout = 2500 * time.Millisecond
	}
	if cfg.MemberTimeout < 2*cfg.HeartbeatInterval {
		return cfg, nil, nil, fmt.Errorf("peers: member timeout %v is under two heartbeats (%v)", cfg.MemberTimeout, cfg.HeartbeatInterval)
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxMessageBytes > 1<<30 {
		return cfg, nil, nil, fmt.Errorf("peers: message cap %d above 1 GiB", cfg.MaxMessageBytes)
	}
	if cfg.Types == nil {
		cfg.Types = protoregistry.GlobalTypes
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if len(cfg.Secret) > 0 {
		if err := checkSecret(cfg.Secret); err != nil {
			return cfg, nil, nil, err
		}
	}
	listenStrs := cfg.Listen
	if len(listenStrs) == 0 {
		listenStrs = []string{"/ip4/0.0.0.0/tcp/0"}
		if len(cfg.Secret) == 0 {
			listenStrs = append(listenStrs, "/ip4/0.0.0.0/udp/0/quic-v1")
		}
	}
	var listen []ma.Multiaddr
	for _, s := range listenStrs {
		a, err := ParseListen(s)
		if err != nil {
			return cfg, nil, nil, err
		}
		if len(cfg.Secret) > 0 && isQUIC(a) {
			return cfg, nil, nil, fmt.Errorf("listen %s: QUIC cannot be used with a cluster secret (libp2p private networks run over TCP)", s)
		}
		listen = append(listen, a)
	}
	var join []peer.AddrInfo
	for _, s := range cfg.Join {
		ai, err := ParseJoin(s)
		if err != nil {
			return cfg, nil, nil, err
		}
		join = append(join, ai)
	}
	return cfg, listen, join, nil
}

// ParseListen parses a listen multiaddr, with an error that names it.
func ParseListen(s string) (ma.Multiaddr, error) {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return nil, fmt.Errorf("listen %q: malformed multiaddr (want e.g. /ip4/0.0.0.0/tcp/7341): %v", s, err)
	}
	return a, nil
}

// ParseJoin parses a peer's multiaddr, which must end in /p2p/PEER_ID.
func ParseJoin(s string) (peer.AddrInfo, error) {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("join %q: malformed multiaddr (want e.g. /ip4/10.0.0.2/tcp/7341/p2p/12D3Koo...): %v", s, err)
	}
	ai, err := peer.AddrInfoFromP2pAddr(a)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("join %q: needs the peer ID at the end (/p2p/12D3Koo...): %v", s, err)
	}
	return *ai, nil
}

func isQUIC(a ma.Multiaddr) bool {
	for _, c := range a {
		if c.Protocol().Code == ma.P_QUIC_V1 || c.Protocol().Code == ma.P_QUIC {
			return true
		}
	}
	return false
}

// listenError turns libp2p's listen error into one line.
func listenError(a ma.Multiaddr, err error) error {
	var errno syscall.Errno
	if errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use") {
		return fmt.Errorf("listen %s: %w", a, ErrAddrInUse)
	}
	if errors.As(err, &errno) {
		return fmt.Errorf("listen %s: %v", a, errno)
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return fmt.Errorf("listen %s: %v", a, ne.Err)
	}
	return fmt.Errorf("listen %s: %v", a, strings.ReplaceAll(err.Error(), "\n", " "))
}

// seenTTL is how long gossipsub remembers a message's ID to drop copies
// of it: far longer than a copy takes to arrive (gossipsub serves a
// message to peers that ask for 5 heartbeats of 1 s), shorter than the library's 2
// minutes. Each ID is a small string kept that long, allocated among a
// burst's garbage; a few hundred of them kept a few MB of the heap's
// spans in use after the garbage around them was freed (the soak's RSS).
const seenTTL = 20 * time.Second

func (n *Node) startMembership() error {
	ps, err := pubsub.NewGossipSub(n.ctx, n.host, pubsub.WithMaxMessageSize(maxInfoBytes+4096), pubsub.WithSeenMessagesTTL(seenTTL))
	if err != nil {
		return fmt.Errorf("gossipsub: %w", err)
	}
	n.pubsub = ps
	topic, err := ps.Join(MembersTopic)
	if err != nil {
		return err
	}
	n.member = newMembership(n, topic)
	if err := ps.RegisterTopicValidator(MembersTopic, n.member.validate); err != nil {
		return err
	}
	sub, err := topic.Subscribe()
	if err != nil {
		return err
	}
	events, err := topic.EventHandler()
	if err != nil {
		return err
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.member.run(n.ctx, sub, events)
		sub.Cancel()
		events.Cancel()
	}()
	return nil
}

// disconnectGrace is how long a node waits after a peer's last connection
// closed before it treats the peer as gone.
const disconnectGrace = 300 * time.Millisecond

func (n *Node) peerDisconnected(p peer.ID) {
	// When two nodes dial each other at once, libp2p keeps one connection
	// and closes the other, sometimes before the survivor is counted: a
	// moment with no connection that is not a lost node. Look again after
	// a short grace (a killed node still leaves the view well within the
	// member timeout).
	select {
	case <-n.ctx.Done():
		return
	case <-time.After(disconnectGrace):
	}
	if n.ctx.Err() != nil || n.host.Network().Connectedness(p) == network.Connected {
		return
	}
	n.member.disconnected(p)
	n.bridge.peerDown(p)
}

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Weights is the node's side of the weights protocol: what it serves,
// and fetching model ranges from its peers.
func (n *Node) Weights() *weights.Service { return n.ranges }

// AllReduce is the node's side of the tensor-parallel all-reduce
// protocol: Join forms its member of a group.
func (n *Node) AllReduce() *allreduce.Service { return n.groups }

// Addrs returns the node's listen addresses, each ending in /p2p/PEER_ID
// (what another node passes as Config.Join).
func (n *Node) Addrs() []ma.Multiaddr {
	p2p, _ := ma.NewComponent("p2p", n.host.ID().String())
	var out []ma.Multiaddr
	for _, a := range n.host.Addrs() {
		out = append(out, a.Encapsulate(p2p.Multiaddr()))
	}
	return out
}

// Host returns the libp2p host (to open other protocols on it).
func (n *Node) Host() host.Host { return n.host }

// ActorSystem returns the node's actor system. PIDs it makes carry the peer
// ID as their address; PIDs with another node's peer ID are delivered there.
func (n *Node) ActorSystem() *actor.ActorSystem { return n.system }

// PID returns the PID of the actor named name on node p (which may be this
// node).
func (n *Node) PID(p peer.ID, name string) *actor.PID {
	return actor.NewPID(p.String(), name)
}

// Links lists this node's links to the peers it sends activations to:
// the transport each uses now and its round-trip time.
func (n *Node) Links() []side.Link { return n.side.Links() }

// LinkFallbacks counts side-channel faults that sent traffic back to the
// libp2p stream, on both ends of this node's links.
func (n *Node) LinkFallbacks() int64 { return n.side.Fallbacks() }

// LinkReturns counts the times an outgoing link got its side channel back
// after a fallback (side.Options.Retry).
func (n *Node) LinkReturns() int64 { return n.side.Returns() }

// InPlace reports how this node delivered the activations its side
// channels carried.
func (n *Node) InPlace() side.InPlaceStats { return n.side.InPlace() }

// openLinks opens a side-channel link to every member that joins.
func (n *Node) openLinks() {
	sub := n.member.Subscribe()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer sub.Close()
		for {
			ev, err := sub.Next(n.ctx)
			if err != nil {
				return
			}
			if ev.Kind == Joined && ev.Member.ID != n.ID() {
				n.side.Open(ev.Member.ID)
				n.rememberPeers()
			}
		}
	}()
}

// isMember says whether p is in the membership view.
func (n *Node) isMember(p peer.ID) bool {
	for _, m := range n.member.View().Members {
		if m.ID == p {
			return true
		}
	}
	return false
}

// Membership returns the node's membership view.
func (n *Node) Membership() *Membership { return n.member }

// Connect connects to a peer now (Join does it in the background).
func (n *Node) Connect(ctx context.Context, ai peer.AddrInfo) error {
	return n.host.Connect(ctx, ai)
}

// Close stops the node: its actors' remote links, membership, discovery
// and the host. Peers see it disconnect.
func (n *Node) Close() error {
	var err error
	n.closeOnce.Do(func() {
		n.cancel()
		if n.mdns != nil {
			n.mdns.Close()
		}
		if n.side != nil {
			n.side.Close()
		}
		n.bridge.close()
		n.wg.Wait()
		err = n.host.Close()
		n.system.Shutdown()
	})
	return err
}

// memory returns what the node offers: total and available bytes.
// MemoryOffered is the memory this node offers the cluster: the
// MemoryBytes cap, or physical memory when there is none (0 if unknown),
// less HeldBytes.
func (n *Node) MemoryOffered() uint64 {
	total, _ := n.memory()
	return total
}

func (n *Node) memory() (total, avail uint64) {
	total, avail = systemMemory()
	held := n.cfg.HeldBytes
	if total == 0 { // unknown: offer the cap, if any, as free
		c := n.cfg.MemoryBytes - min(held, n.cfg.MemoryBytes)
		return c, c
	}
	if c := n.cfg.MemoryBytes; c > 0 {
		total = min(total, c)
	}
	total -= min(held, total)
	avail -= min(held, avail)
	if avail > total {
		avail = total
	}
	if n.cfg.UsedBytes != nil {
		// What the node already holds for the cluster (shards, KV caches)
		// is not free to offer again, even when the cap hides it from the OS.
		avail = min(avail, total-min(total, n.cfg.UsedBytes()))
	}
	return total, avail
}

// PingActor is the name of the actor every node runs that answers a
// messages.Ping with a messages.Pong.
const PingActor = "ping"

func pingActor(ctx actor.Context) {
	if p, ok := ctx.Message().(*messages.Ping); ok {
		ctx.Respond(&messages.Pong{Seq: p.Seq, Payload: p.Payload})
	}
}

// protoactorLogger passes protoactor's own log lines on at Warn and above:
// its Info lines (actor system started, dead letters) are noise here.
func protoactorLogger(l *slog.Logger) *slog.Logger {
	return slog.New(levelFilter{l.Handler(), slog.LevelWarn}).With("lib", "protoactor")
}

type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.Handler.Enabled(ctx, l)
}

func (f levelFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return levelFilter{f.Handler.WithAttrs(as), f.min}
}

func (f levelFilter) WithGroup(g string) slog.Handler {
	return levelFilter{f.Handler.WithGroup(g), f.min}
}

// oneLine flattens a multi-line error (libp2p lists every failed dial on
// its own line) for a log line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Transports a node may allow for activations (Config.Transport).
const (
	TransportAuto = side.TransportAuto // the best both ends share
	TransportTCP  = side.TransportTCP  // the libp2p stream only
	TransportShm  = side.TransportShm  // shared memory on one host, else the stream
	TransportRDMA = side.TransportRDMA // RDMA (a build with an RDMA backend), else the stream
)

// SystemMemory is the machine's physical memory and what the system
// reports available now (0, 0 when unknown).
func SystemMemory() (total, avail uint64) { return systemMemory() }

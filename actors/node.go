package actors

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"strata/actors/origin"
	"strata/actors/stage"
	"strata/internal/units"
	"strata/messages"
	"strata/peers"
	"strata/peers/allreduce"
	"strata/peers/verbs"
	"strata/runtime/catalog"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

// NodeConfig configures a full strata node: peers plus the actors that
// hold shards and drive sessions.
type NodeConfig struct {
	Peers  peers.Config
	Origin origin.Options
	// Models is where the node finds models by name; it announces the
	// complete ones (cfg.Peers.Models, when unset) and serves their bytes
	// to peers over weights.Protocol (cfg.Peers.Weights, when unset).
	// Models.Partial, when nil, is DATA_DIR/weights when cfg.Peers.DataDir
	// is set: there the node keeps the layers it fetches from peers of
	// models it lacks. With neither, it fetches nothing and plans give it
	// only models it holds.
	Models catalog.Catalog
	// Hub, when set, reads the ranges no peer holds of models pulled from
	// the Hugging Face hub (hfhub.Client); nil = peers only.
	Hub HubReader
	// OnBatch, when set, hears every forward pass the node's shards run
	// (stage.HostConfig.OnBatch): the steps and token positions it carried.
	OnBatch func(steps, rows int)
	// Accelerate, when set, puts the matrix products of the shards the
	// node holds on a device (stage.HostConfig.Accelerate), whose scratch
	// takes up to DeviceBytes: memory the node keeps, not offered for
	// shards (placement plans without it). 0 with Accelerate: no cap, and
	// nothing kept.
	Accelerate  func(m *model.Model, rows int, free uint64) (stage.Acceleration, error)
	DeviceBytes uint64
	// UnloadAfter unloads a shard no session has used for that long
	// (stage.HostConfig.UnloadAfter); 0 = never.
	UnloadAfter time.Duration
	// DiskBytes caps the bytes of fetched layers kept (the --disk
	// budget); 0 = no cap. Used only when the store is created here.
	DiskBytes int64
	// Threads for the kernels; 0 = GOMAXPROCS.
	Threads int
	// SenderMiddleware wraps every actor message the node's shard host,
	// shards and sessions send (HostConfig.SenderMiddleware; and
	// Origin.SenderMiddleware unless set); nil = none. An in-process
	// cluster shapes and breaks its links with it.
	SenderMiddleware []actor.SenderMiddleware
	// AllReduce tunes the all-reduce groups of the tensor-parallel stages
	// the node is a member of (wire format, round timeout); its Shm is
	// set unless Peers.Transport is tcp: members on one host then sum
	// through shared memory.
	AllReduce allreduce.Options
	// FetchProgress, when set, hears each fetch of layers from peers: the
	// model, bytes done and total (after every batch); a terminal's bar.
	FetchProgress func(model string, done, total int64)
}

// Node is one strata node: a libp2p peer whose shard host serves the
// cluster's plans and whose Origin starts sessions from here.
type Node struct {
	Peers  *peers.Node
	Host   *stage.Host
	Origin *origin.Origin
	// Weights finds models by name, fetching the layers a shard needs
	// from peers; the API's model store too.
	Weights *Weights
	pool    *tensor.Pool
	hostPID *actor.PID

	closeOnce sync.Once
	closeErr  error
}

// StartNode starts the peer, spawns the shard host, and returns the node.
// Models are found through cfg.Models.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if d := cfg.Origin.Draft; d != nil {
		// The draft guesses for the sessions this node starts: its weights
		// and a cache for one of them (one speculates at a time: a session
		// that starts beside others does not) are memory the node keeps,
		// not memory it offers for shards. Checked first: a refusal costs
		// nothing started.
		cfg.Peers.HeldBytes = d.Footprint()
		if c := cfg.Peers.MemoryBytes; c > 0 && cfg.Peers.HeldBytes >= c {
			return nil, fmt.Errorf("the draft model (--speculate draft) needs %s of the node's memory, and --memory offers %s: nothing would be left for shards",
				units.Bytes(cfg.Peers.HeldBytes), units.Bytes(c))
		}
	}
	if cfg.Accelerate != nil && cfg.DeviceBytes > 0 {
		// The devices' scratch (a device that shares the host's memory
		// allocates the node's) is kept like the draft's.
		cfg.Peers.HeldBytes += cfg.DeviceBytes
		if c := cfg.Peers.MemoryBytes; c > 0 && cfg.Peers.HeldBytes >= c {
			what := "the device's scratch (--gpu-memory " + units.Bytes(cfg.DeviceBytes) + ")"
			if cfg.Origin.Draft != nil {
				what += " and the draft model"
			}
			return nil, fmt.Errorf("%s need %s of the node's memory, and --memory offers %s: nothing would be left for shards",
				what, units.Bytes(cfg.Peers.HeldBytes), units.Bytes(c))
		}
	}
	var host atomic.Pointer[stage.Host] // set once the peer is up; heartbeats may ask before
	cfg.Peers.UsedBytes = func() uint64 {
		if h := host.Load(); h != nil {
			return h.UsedBytes()
		}
		return 0
	}
	log := cfg.Peers.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Models.Partial == nil && cfg.Peers.DataDir != "" {
		st, err := catalog.OpenStore(filepath.Join(cfg.Peers.DataDir, "weights"), cfg.DiskBytes)
		if err != nil {
			return nil, fmt.Errorf("weights store: %w", err)
		}
		cfg.Models.Partial = st
	}
	weights := newWeights(cfg.Models, log)
	weights.hub, weights.progress = cfg.Hub, cfg.FetchProgress
	if cfg.Peers.Fetching == nil {
		cfg.Peers.Fetching = func() []*messages.FetchProgress {
			var out []*messages.FetchProgress
			for _, f := range weights.Fetching() {
				out = append(out, &messages.FetchProgress{Model: f.Model, DoneBytes: uint64(f.Done), TotalBytes: uint64(f.Total)})
			}
			return out
		}
	}
	cfg.Peers.FetchesWeights = cfg.Models.Partial != nil
	if cfg.Peers.Models == nil {
		cfg.Peers.Models = announcer(cfg.Models, log)
	}
	if cfg.Peers.Weights == nil {
		cfg.Peers.Weights = weights
	}
	pool := tensor.NewPool(cfg.Threads)
	if cfg.Peers.ComputeFlops == 0 {
		cfg.Peers.ComputeFlops = MeasureCompute(pool, 100*time.Millisecond)
	}
	if cfg.Peers.MemoryBandwidth == 0 {
		cfg.Peers.MemoryBandwidth = MeasureMemoryBandwidth(pool.Threads())
	}
	cfg.Peers.Inbound = append(slices.Clone(cfg.Peers.Inbound), PeerInbound()...)
	p, err := peers.New(ctx, cfg.Peers)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if cfg.Peers.HeldBytes > 0 && p.MemoryOffered() == 0 {
		// Physical memory (below the cap, or no cap given) is what the
		// draft does not leave room in.
		p.Close()
		pool.Close()
		return nil, fmt.Errorf("the draft model (--speculate draft) needs %s, all of the node's memory: nothing would be left for shards", units.Bytes(cfg.Peers.HeldBytes))
	}
	n := &Node{Peers: p, pool: pool, Weights: weights}
	weights.peers, weights.dir = p, viewDirectory{p}
	store := weights
	// The host holds no more than the node offers: the --memory cap, or
	// physical memory (what placement plans with).
	maxCtx := cfg.Origin.PlanContext
	if maxCtx <= 0 {
		maxCtx = model.DefaultContext
	}
	ar := cfg.AllReduce
	ar.Shm = cfg.Peers.Transport != peers.TransportTCP
	n.Host = stage.NewHost(stage.HostConfig{Models: store, Pool: n.pool, MemoryBytes: p.MemoryOffered(), Name: shortID(p.ID().String()), MaxContext: maxCtx, SenderMiddleware: cfg.SenderMiddleware, KVType: cfg.Origin.KVType,
		Groups: peerGroups{p: p, opts: ar}, NodeAddress: func(node string) string { return node }, Machines: machines(p),
		OnShards: func(shards []string) { p.Membership().SetShards(shards) }, OnBatch: cfg.OnBatch, Accelerate: cfg.Accelerate, DeviceBytes: cfg.DeviceBytes,
		UnloadAfter: cfg.UnloadAfter})
	host.Store(n.Host)
	weights.busy = n.Host.Uses
	hostPID, err := p.ActorSystem().Root.SpawnNamed(n.Host.Props(), stage.HostName)
	if err != nil {
		p.Close()
		n.pool.Close()
		return nil, fmt.Errorf("spawn shard host: %w", err)
	}
	n.hostPID = hostPID
	if cfg.Origin.Logger == nil {
		cfg.Origin.Logger = cfg.Peers.Logger
		if cfg.Origin.Logger == nil {
			cfg.Origin.Logger = slog.Default()
		}
	}
	if cfg.Origin.SenderMiddleware == nil {
		cfg.Origin.SenderMiddleware = cfg.SenderMiddleware
	}
	// One description per model on this node: the host's.
	n.Origin = origin.New(p.ActorSystem(), viewDirectory{p}, n.Host, cfg.Origin)
	return n, nil
}

// Leave starts a graceful leave: the node announces that it is leaving
// (other nodes' plans leave it out from their next plan), its host
// refuses new shards and stops the ones it holds, so every session using
// them re-plans on the other members at once and replays (as after a
// lost node, without waiting for a timeout). Then Leave waits until the
// sessions started on this node have ended (the caller stops admitting
// new ones first), or ctx is done. Close the node afterwards.
func (n *Node) Leave(ctx context.Context) error {
	n.Peers.Membership().SetLeaving(true)
	if _, err := n.Peers.ActorSystem().Root.RequestFuture(n.hostPID, stage.Leave{}, 10*time.Second).Result(); err != nil {
		return fmt.Errorf("leave: shard host: %w", err)
	}
	for len(n.Origin.Sessions()) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("leave: %d sessions still running: %w", len(n.Origin.Sessions()), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Close stops the node: sessions, shards, then the peer. It may be called
// more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		// Stop the host first: its shards stop with it and free their
		// KV caches; then the model files and the peer.
		n.Peers.ActorSystem().Root.StopFuture(n.hostPID).Wait()
		n.Origin.Close()
		n.closeErr = n.Peers.Close()
		n.pool.Close()
	})
	return n.closeErr
}

// PeerInbound is what other nodes may send to this node's actors: plans
// to the shard host, steps and frees to its shards, answers to session
// inboxes (unnamed actors), and watches of shards (by sessions) and of
// inboxes (by shards). Nothing else, and never Stop or PoisonPill.
func PeerInbound() []peers.Inbound {
	return []peers.Inbound{
		{Actor: stage.HostName, Types: typeNames(&messages.LoadShard{}, &messages.ShardStats{})},
		// Shards read activations in place from side-channel slots.
		{Actor: stage.HostName + "/*", Types: typeNames(&messages.Forward{}, &messages.FreeSession{}, &messages.Chain{}, &messages.ShardStats{}), Watch: true, Borrow: true},
		{Actor: "$*", Types: typeNames(&messages.Token{}, &messages.ForwardError{}), Watch: true},
	}
}

func typeNames(msgs ...proto.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.ProtoReflect().Descriptor().FullName()))
	}
	return out
}

// peerGroups forms all-reduce groups over libp2p (peers.Node.AllReduce().Join):
// the members' node IDs are their peer IDs.
type peerGroups struct {
	p    *peers.Node
	opts allreduce.Options
}

// Join implements Groups.
func (g peerGroups) Join(ctx context.Context, id [16]byte, members []string, self int) (stage.Group, error) {
	ids := make([]peer.ID, len(members))
	for i, m := range members {
		var err error
		if ids[i], err = peer.Decode(m); err != nil {
			return nil, fmt.Errorf("tensor-parallel member %d: %q is not a peer ID: %w", i, m, err)
		}
	}
	if self < 0 || self >= len(ids) || ids[self] != g.p.ID() {
		return nil, fmt.Errorf("this node is not member %d of the group", self)
	}
	return g.p.AllReduce().Join(ctx, allreduce.GroupID(id), ids, g.opts)
}

// viewDirectory presents the peers membership view as Members.
type viewDirectory struct{ p *peers.Node }

// Members implements Directory.
func (d viewDirectory) Members() []origin.Member {
	v := d.p.Membership().View()
	out := make([]origin.Member, 0, len(v.Members))
	for _, m := range v.Members {
		info := m.Info
		if info.GetLeaving() {
			continue // plans leave it out; its shards are moving away
		}
		mem := origin.Member{ID: m.ID.String(), Host: d.p.PID(m.ID, stage.HostName), MemoryBytes: info.GetMemoryTotalBytes(), Compute: info.GetComputeFlops(),
			MemBandwidth: info.GetMemoryBandwidth(), LastSeen: m.LastSeen}
		for _, l := range info.GetLinks() {
			if l.GetRttUs() > 0 {
				if mem.Links == nil {
					mem.Links = map[string]time.Duration{}
				}
				mem.Links[l.GetPeerId()] = time.Duration(l.GetRttUs()) * time.Microsecond
			}
		}
		mem.Fetches = info.GetFetchesWeights()
		mem.Arch = archOf(info.GetPlatform())
		for _, mi := range info.GetModels() {
			if !mi.GetPartial() {
				mem.Models = append(mem.Models, mi.GetName())
				continue
			}
			h := catalog.Holding{Embed: mi.GetEmbedding(), Head: mi.GetHead()}
			for _, l := range mi.GetLayers() {
				h.Held = append(h.Held, int(l))
			}
			slices.Sort(h.Held)
			if mem.Partial == nil {
				mem.Partial = map[string]catalog.Holding{}
			}
			mem.Partial[mi.GetName()] = h
		}
		out = append(out, mem)
	}
	return out
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[len(id)-8:]
	}
	return id
}

// archOf is the GOARCH of a platform a node announces ("linux/amd64
// 6.1.0"); "" when it does not say.
func archOf(platform string) string {
	_, rest, ok := strings.Cut(platform, "/")
	if !ok {
		return ""
	}
	arch, _, _ := strings.Cut(rest, " ")
	return arch
}

// machines counts the members among nodes (their peer IDs) on this
// machine (this node, or one that announced this boot's ID) and elsewhere
// (HostConfig.Machines).
func machines(p *peers.Node) func(nodes []string) (here, elsewhere int) {
	boot := verbs.BootID()
	return func(nodes []string) (here, elsewhere int) {
		view := p.Membership().View()
		for _, node := range nodes {
			id, err := peer.Decode(node)
			if err != nil {
				continue
			}
			if id == p.ID() {
				here++
				continue
			}
			m, ok := view.Member(id)
			switch {
			case !ok:
			case boot != "" && m.Info.GetBootId() == boot:
				here++
			default:
				elsewhere++
			}
		}
		return here, elsewhere
	}
}

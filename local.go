package strata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"strata/actors"
	"strata/actors/origin"
	"strata/actors/plan"
	"strata/actors/stage"
	"strata/peers"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/tensor"
)

// Request is one generation (engine.Request): Model names the model.
type Request = engine.Request

// Result is a finished generation, with its own step statistics.
type Result = engine.Result

// Token is one generated token as the callback sees it.
type Token = engine.Token

// Placer computes placements (plan.Place is the default).
type Placer = origin.Placer

// NodeSpec is one node of a local cluster.
type NodeSpec struct {
	// MemoryBytes is what the node offers the cluster for weights and KV
	// caches; its host never holds more.
	MemoryBytes uint64
	// Models names the models (keys of LocalConfig.Models) the node
	// holds; nil = all of them.
	Models []string
}

// Link shapes the link between nodes A and B, both ways: each message
// takes Latency plus its size over BytesPerSecond (0 = no limit), and
// messages queue behind each other as on a wire.
type Link struct {
	A, B           int
	Latency        time.Duration
	BytesPerSecond float64
}

// LocalConfig describes a cluster inside this process. Zero values pick
// the defaults noted; Nodes and Models are required.
type LocalConfig struct {
	Nodes  []NodeSpec
	Models map[string]string // model name → GGUF file (the first of a split model)
	// Libp2p makes every node a real libp2p peer on 127.0.0.1 (TCP, a
	// private network, membership by heartbeats), as separate machines
	// would be. false = in-memory links: the nodes share one actor
	// system. Either way Links, Cut and Stall shape and break the actor
	// messages between nodes (over libp2p, before they reach the wire;
	// heartbeats go on, as from a node whose link or process is stuck).
	Libp2p bool
	Links  []Link // links not listed are instant
	Placer Placer // nil = plan.Place
	// Context is the KV positions placement reserves per session; 0 =
	// min(model context, model.DefaultContext).
	Context int
	// Sessions is the concurrent sessions placement reserves KV memory
	// for; 0 = 1.
	Sessions int
	// StepTimeout bounds the wait for one token before the ring is probed
	// and rebuilt; 0 = 30 s.
	StepTimeout time.Duration
	// NoShortcut sends every token from the session to the first stage,
	// not from the last stage (origin.Options.NoShortcut).
	NoShortcut bool
	// Threads run the kernels of all nodes together (one pool); 0 =
	// GOMAXPROCS. Over libp2p each node has a pool of this many.
	Threads int
	// Logger hears recoveries and the nodes' warnings; nil = silent.
	Logger *slog.Logger
}

// LocalCluster is N strata nodes in this process. Generate starts
// sessions on node 0 (the origin); Cluster(i) starts them elsewhere.
type LocalCluster struct {
	cfg      LocalConfig
	view     *view
	clusters []*origin.Origin
	kill     []func() error

	// In-memory links.
	system *actor.ActorSystem
	pool   *tensor.Pool
	links  *links

	// Over libp2p.
	nodes []*actors.Node
	dirs  []string

	closeOnce sync.Once
}

// ErrNoNode is the error for a node index out of range.
var ErrNoNode = errors.New("strata: no such node")

// NewLocalCluster starts the nodes and returns once each one sees them
// all. Close stops them.
func NewLocalCluster(ctx context.Context, cfg LocalConfig) (*LocalCluster, error) {
	if len(cfg.Nodes) == 0 || len(cfg.Models) == 0 {
		return nil, errors.New("strata: a local cluster needs nodes and models")
	}
	for i, n := range cfg.Nodes {
		for _, m := range n.Models {
			if _, ok := cfg.Models[m]; !ok {
				return nil, fmt.Errorf("strata: node %d holds model %q, which LocalConfig.Models does not name", i, m)
			}
		}
	}
	for _, l := range cfg.Links {
		if l.A < 0 || l.B < 0 || l.A >= len(cfg.Nodes) || l.B >= len(cfg.Nodes) || l.A == l.B {
			return nil, fmt.Errorf("strata: link %d-%d between nodes that are not two of the %d", l.A, l.B, len(cfg.Nodes))
		}
	}
	c := &LocalCluster{cfg: cfg, links: newLinks(len(cfg.Nodes), cfg.Links, cfg.Libp2p)}
	var err error
	if cfg.Libp2p {
		err = c.startPeers(ctx)
	} else {
		err = c.startInMemory()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// models returns the names of the models node i holds.
func (c *LocalCluster) models(i int) []string {
	if m := c.cfg.Nodes[i].Models; m != nil {
		return m
	}
	return slices.Sorted(maps.Keys(c.cfg.Models))
}

func (c *LocalCluster) options(i int) origin.Options {
	return origin.Options{PlanContext: c.cfg.Context, PlanSessions: c.cfg.Sessions, StepTimeout: c.cfg.StepTimeout, NoShortcut: c.cfg.NoShortcut,
		Placer: c.cfg.Placer, Logger: c.cfg.Logger, SenderMiddleware: []actor.SenderMiddleware{c.links.middleware(i)}}
}

// hostName is node i's host actor in the shared actor system.
func hostName(i int) string { return fmt.Sprintf("%s-%d", stage.HostName, i) }

func (c *LocalCluster) startInMemory() error {
	c.system = actors.NewSystem(c.cfg.Logger)
	c.pool = tensor.NewPool(c.cfg.Threads)
	c.view = &view{}
	files := catalog.Files(c.cfg.Models)
	var hosts []*stage.Host
	for i, n := range c.cfg.Nodes {
		h := stage.NewHost(stage.HostConfig{Models: files, Pool: c.pool, MemoryBytes: n.MemoryBytes, Name: fmt.Sprintf("n%d", i),
			MaxContext: c.cfg.Context, SenderMiddleware: []actor.SenderMiddleware{c.links.middleware(i)}})
		pid, err := c.system.Root.SpawnNamed(h.Props(), hostName(i))
		if err != nil {
			return err
		}
		hosts = append(hosts, h)
		c.view.members = append(c.view.members, origin.Member{ID: fmt.Sprintf("n%d", i), Host: pid, MemoryBytes: n.MemoryBytes, Models: c.models(i), LastSeen: time.Now()})
		c.kill = append(c.kill, func() error {
			c.links.kill(i)
			c.view.remove(fmt.Sprintf("n%d", i))
			return c.system.Root.StopFuture(pid).Wait()
		})
	}
	for i, h := range hosts {
		// Each node reads each model once: its host describes it.
		c.clusters = append(c.clusters, origin.New(c.system, c.view, h, c.options(i)))
	}
	return nil
}

func (c *LocalCluster) startPeers(ctx context.Context) error {
	secret := peers.NewSecret()
	for i, n := range c.cfg.Nodes {
		// Each node finds its models in a directory of its own.
		dir, err := os.MkdirTemp("", "strata-node-")
		if err != nil {
			return err
		}
		c.dirs = append(c.dirs, dir)
		for _, name := range c.models(i) {
			path, err := filepath.Abs(c.cfg.Models[name])
			if err == nil {
				err = os.Symlink(path, filepath.Join(dir, name+".gguf"))
			}
			if err != nil {
				return err
			}
		}
		cfg := actors.NodeConfig{
			Peers: peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: secret, NoMDNS: true, MemoryBytes: n.MemoryBytes,
				Logger: c.cfg.Logger, HeartbeatInterval: 200 * time.Millisecond, MemberTimeout: time.Second},
			Models:           catalog.Catalog{Dirs: []string{dir}},
			Origin:           c.options(i),
			Threads:          c.cfg.Threads,
			SenderMiddleware: []actor.SenderMiddleware{c.links.middleware(i)},
		}
		if cfg.Peers.Logger == nil {
			cfg.Peers.Logger = slog.New(slog.DiscardHandler)
		}
		if i > 0 {
			first := c.nodes[0].Peers
			cfg.Peers.Join = []string{fmt.Sprintf("%s/p2p/%s", first.Addrs()[0], first.ID())}
		}
		nd, err := actors.StartNode(ctx, cfg)
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, nd)
		c.clusters = append(c.clusters, nd.Origin)
		c.links.addPeer(nd.Peers.ID().String(), i)
		c.kill = append(c.kill, func() error {
			c.links.kill(i)
			return nd.Close()
		})
	}
	for _, nd := range c.nodes {
		if _, err := nd.Peers.Membership().Wait(ctx, func(v peers.View) bool {
			withModels := 0
			for _, m := range v.Members {
				if len(m.Info.GetModels()) > 0 {
					withModels++
				}
			}
			return withModels == len(c.nodes)
		}); err != nil {
			return fmt.Errorf("strata: the nodes' views did not converge: %w", err)
		}
	}
	return nil
}

// Generate runs one generation from node 0, calling onToken for each
// token in order (see engine.Engine.Generate).
func (c *LocalCluster) Generate(ctx context.Context, req Request, onToken func(Token) error) (Result, error) {
	return c.clusters[0].Generate(ctx, req, onToken)
}

// Cluster returns node i's session driver: Generate, Plan and Sessions
// from that node. (Over in-memory links, the shaping and cuts of messages
// to session inboxes count them as node 0's.)
func (c *LocalCluster) Cluster(i int) *origin.Origin { return c.clusters[i] }

// Plan is the placement of a model on the view of node 0, with NodeIndex
// to map its stages back to nodes.
func (c *LocalCluster) Plan(model string) (plan.Plan, error) {
	p, _, err := c.clusters[0].Plan(model)
	return p, err
}

// NodeIndex is the index of the node whose ID a plan names; -1 if none.
func (c *LocalCluster) NodeIndex(id string) int {
	if c.nodes != nil {
		for i, nd := range c.nodes {
			if nd.Peers.ID().String() == id {
				return i
			}
		}
		return -1
	}
	var i int
	if _, err := fmt.Sscanf(id, "n%d", &i); err != nil || i < 0 || i >= len(c.cfg.Nodes) {
		return -1
	}
	return i
}

// Kill stops node i as if its process died: its shards go with it, and
// it leaves the others' view (at once in memory, within MemberTimeout
// over libp2p).
func (c *LocalCluster) Kill(i int) error {
	if i < 0 || i >= len(c.kill) {
		return ErrNoNode
	}
	return c.kill[i]()
}

// Cut drops every message between nodes a and b from now on, both ways
// (the nodes stay in the view: a cut link, not a dead node); Heal ends it.
func (c *LocalCluster) Cut(a, b int) error { return c.setCut(a, b, true) }

// Heal undoes Cut.
func (c *LocalCluster) Heal(a, b int) error { return c.setCut(a, b, false) }

func (c *LocalCluster) setCut(a, b int, cut bool) error {
	if a < 0 || b < 0 || a >= len(c.cfg.Nodes) || b >= len(c.cfg.Nodes) {
		return ErrNoNode
	}
	c.links.setCut(a, b, cut)
	return nil
}

// Stall makes node i a black hole: it stays in the view, but every
// message to it is dropped (a stuck process); Resume ends it.
func (c *LocalCluster) Stall(i int) error { return c.setStall(i, true) }

// Resume undoes Stall.
func (c *LocalCluster) Resume(i int) error { return c.setStall(i, false) }

func (c *LocalCluster) setStall(i int, stall bool) error {
	if i < 0 || i >= len(c.cfg.Nodes) {
		return ErrNoNode
	}
	c.links.setStall(i, stall)
	return nil
}

// Close stops every node and releases what the cluster holds (actor
// system, kernel pool, link queues, model files).
func (c *LocalCluster) Close() error {
	c.closeOnce.Do(func() {
		for _, cl := range c.clusters {
			if c.nodes == nil {
				cl.Close()
			}
		}
		for _, nd := range c.nodes {
			nd.Close()
		}
		if c.system != nil {
			c.system.Shutdown()
		}
		c.links.close()
		if c.pool != nil {
			c.pool.Close()
		}
		for _, d := range c.dirs {
			os.RemoveAll(d)
		}
	})
	return nil
}

// view is the membership of an in-memory cluster: every node, until killed.
type view struct {
	mu      sync.Mutex
	members []origin.Member
}

// Members implements origin.Directory.
func (v *view) Members() []origin.Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.members)
}

func (v *view) remove(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.members = slices.DeleteFunc(v.members, func(m origin.Member) bool { return m.ID == id })
}

// links carries the actor messages between a local cluster's nodes:
// shaped, cut or dropped. Each node's actors send through
// middleware(node). Over libp2p the node of a target is its PID's address
// (a peer ID); in memory, its actor name (shards-I/...), and anything
// else there (session inboxes, futures) belongs to node 0, the origin.
type links struct {
	n      int
	libp2p bool
	peers  map[string]int // peer ID → node, over libp2p
	shape  map[[2]int]Link
	mu     sync.Mutex
	cut    map[[2]int]bool
	stall  []bool
	dead   []bool
	queues map[[2]int]*queue
	done   chan struct{}
	wg     sync.WaitGroup
}

func newLinks(n int, shaped []Link, libp2p bool) *links {
	l := &links{n: n, libp2p: libp2p, peers: map[string]int{}, shape: map[[2]int]Link{}, cut: map[[2]int]bool{}, stall: make([]bool, n), dead: make([]bool, n),
		queues: map[[2]int]*queue{}, done: make(chan struct{})}
	for _, s := range shaped {
		l.shape[[2]int{s.A, s.B}] = s
		l.shape[[2]int{s.B, s.A}] = s
	}
	return l
}

func (l *links) addPeer(id string, i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.peers[id] = i
}

// nodeOf is the node a target actor lives on; from if unknown over libp2p.
func (l *links) nodeOf(from int, pid *actor.PID) int {
	if l.libp2p {
		l.mu.Lock()
		defer l.mu.Unlock()
		if i, ok := l.peers[pid.Address]; ok {
			return i
		}
		return from
	}
	var i int
	if _, err := fmt.Sscanf(pid.Id, stage.HostName+"-%d", &i); err == nil && i >= 0 && i < l.n {
		return i
	}
	return 0
}

func (l *links) middleware(from int) actor.SenderMiddleware {
	return func(next actor.SenderFunc) actor.SenderFunc {
		return func(ctx actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			to := l.nodeOf(from, target)
			if from == to {
				next(ctx, target, env)
				return
			}
			l.send(from, to, env.Message, func() { next(ctx, target, env) })
		}
	}
}

func (l *links) send(from, to int, msg any, deliver func()) {
	pair := [2]int{from, to}
	l.mu.Lock()
	drop := l.cut[pair] || l.stall[to] || l.dead[to] || l.dead[from]
	shape, shaped := l.shape[pair]
	var q *queue
	if !drop && shaped {
		if q = l.queues[pair]; q == nil {
			q = &queue{in: make(chan item, 1024)}
			l.queues[pair] = q
			l.wg.Go(func() { q.run(l.done) })
		}
	}
	l.mu.Unlock()
	switch {
	case drop:
	case !shaped:
		deliver()
	default:
		size := 0
		if m, ok := msg.(proto.Message); ok {
			size = proto.Size(m)
		}
		q.add(shape, size, deliver, l.done)
	}
}

func (l *links) setCut(a, b int, cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut[[2]int{a, b}], l.cut[[2]int{b, a}] = cut, cut
}

func (l *links) setStall(i int, stall bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stall[i] = stall
}

func (l *links) kill(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead[i] = true
}

func (l *links) close() {
	close(l.done)
	l.wg.Wait()
}

// queue is one direction of a shaped link: messages leave in order, each
// after the ones before it have crossed the wire, and arrive Latency later.
type queue struct {
	mu   sync.Mutex
	free time.Time // when the wire is next idle
	in   chan item
}

type item struct {
	due     time.Time
	deliver func()
}

func (q *queue) add(s Link, size int, deliver func(), done <-chan struct{}) {
	q.mu.Lock()
	start := time.Now()
	if q.free.After(start) {
		start = q.free
	}
	if s.BytesPerSecond > 0 {
		start = start.Add(time.Duration(float64(size) / s.BytesPerSecond * float64(time.Second)))
	}
	q.free = start
	// Queued under the lock: in the order the wire was given out.
	defer q.mu.Unlock()
	select {
	case q.in <- item{start.Add(s.Latency), deliver}:
	case <-done:
	}
}

func (q *queue) run(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case it := <-q.in:
			if d := time.Until(it.due); d > 0 {
				select {
				case <-time.After(d):
				case <-done:
					return
				}
			}
			it.deliver()
		}
	}
}

package origin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/wire"
	"strata/actors/plan"
	"strata/actors/session"
	"strata/messages"
	"strata/runtime/engine"
	"strata/runtime/model"
	"strata/runtime/modelinfo"
)

// Origin starts sessions from this node: it plans, has the stages load
// their shards, and drives generation.
type Origin struct {
	system *actor.ActorSystem
	root   *actor.RootContext // sends to stages, through opts.SenderMiddleware
	dir    Directory
	models Models
	opts   Options

	prefix *prefixCache // retained sessions; nil = prompt caching off
	// started is when the origin was made: a node that just started has
	// not heard from every member yet (planFresh).
	started time.Time

	mu       sync.Mutex
	sessions map[string]*SessionInfo
}

// Models describes the models sessions run: their tokenizers and
// profiles. The node's stage host (stage.Host.Info) is one: a node reads
// each model once, and its API, sessions and stages share one tokenizer.
type Models interface {
	Info(name string) (*modelinfo.Info, error)
}

// SessionInfo describes an active session (for status APIs).
type SessionInfo struct {
	// ID is a label for the session: a hash of its ID, which lets whoever
	// knows it (and the origin's inbox) step the session on its shards,
	// so is never listed.
	ID        string
	Model     string
	Stages    []StageInfo
	Prompt    int
	Generated int
	Started   time.Time
	inbox     *actor.PID
}

// StageInfo is one stage of a session's ring.
type StageInfo struct {
	Node       string
	Actor      string
	First, End int
	// TP lists the nodes of a tensor-parallel stage (Node leads); nil
	// for a stage on one node.
	TP []string
}

// New returns an Origin that plans over dir and describes models with
// models (the origin node must have the model file).
func New(system *actor.ActorSystem, dir Directory, models Models, opts Options) *Origin {
	if opts.StepTimeout <= 0 {
		opts.StepTimeout = 30 * time.Second
	}
	if opts.ViewSettle <= 0 {
		opts.ViewSettle = 4 * time.Second
	}
	root := system.Root
	if len(opts.SenderMiddleware) > 0 {
		root = actor.NewRootContext(system, nil, opts.SenderMiddleware...)
	}
	c := &Origin{system: system, root: root, dir: dir, models: models, opts: opts, sessions: map[string]*SessionInfo{}, started: time.Now()}
	if opts.PromptCache == 0 {
		opts.PromptCache = defaultPromptCache
	}
	if opts.PromptCache > 0 {
		c.prefix = &prefixCache{max: opts.PromptCache}
	}
	return c
}

// Close asks the stages to drop the prompt caches this origin kept there.
func (c *Origin) Close() {
	if c.prefix != nil {
		for _, e := range c.prefix.all() {
			c.dropEntry(e, false)
		}
	}
}

// Request is one generation across the cluster: Model names the model;
// Schema travels to the last stage, which masks its sampling. Constraint
// (a sampler constraint in this process) does not run on a cluster.
type Request = engine.Request

// Sessions lists the sessions this node drives now.
func (c *Origin) Sessions() []SessionInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []SessionInfo
	for _, s := range c.sessions {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// planContext is the per-session context placement reserves for m.
func (c *Origin) planContext(m *modelinfo.Info) int {
	return model.SessionContext(m.Config.Context, c.opts.PlanContext)
}

// Plan computes the placement of a model on the current view.
func (c *Origin) Plan(name string) (plan.Plan, []Member, error) {
	return c.plan(name, nil)
}

// errNoNode: no member can run the model.
var errNoNode = errors.New("no node of the cluster")

// planFresh is plan for a session's ring. On a node that started less
// than ViewSettle ago, a plan refused for want of nodes is tried again
// until then: the node takes requests as soon as its API is up, before it
// has heard every member's heartbeat (a restarted node in a rolling
// upgrade is asked at once).
func (c *Origin) planFresh(ctx context.Context, name string, excluded []string) (plan.Plan, []Member, error) {
	for {
		p, members, err := c.plan(name, excluded)
		var refusal *plan.RefusalError
		if err == nil || !errors.As(err, &refusal) && !errors.Is(err, errNoNode) || time.Since(c.started) >= c.opts.ViewSettle {
			return p, members, err
		}
		select {
		case <-ctx.Done():
			return p, members, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Origin) plan(name string, excluded []string) (plan.Plan, []Member, error) {
	m, err := c.models.Info(name)
	if err != nil {
		return plan.Plan{}, nil, err
	}
	// Nodes that hold the model take part, and so do nodes that fetch the
	// layers they are given from those that hold them (when any member
	// holds any of it).
	var nodes []plan.Node
	var members []Member
	var announced []plan.Announced
	all := c.dir.Members()
	available := false
	for _, mem := range all {
		_, partial := mem.Partial[name]
		available = available || partial || slices.Contains(mem.Models, name)
	}
	for _, mem := range all {
		lost := slices.Contains(excluded, mem.ID)
		held, holds := heldLayers(mem, name, m.Profile.Layers)
		if lost || !holds && !(mem.Fetches && available) {
			continue
		}
		nodes = append(nodes, plan.Node{ID: mem.ID, FreeBytes: mem.MemoryBytes, Compute: mem.Compute, MemBandwidth: mem.MemBandwidth, Held: held})
		members = append(members, mem)
		a := plan.Announced{ID: mem.ID, MemoryBytes: mem.MemoryBytes, Compute: mem.Compute, MemBandwidth: mem.MemBandwidth}
		for _, peer := range slices.Sorted(maps.Keys(mem.Links)) {
			a.Links = append(a.Links, plan.AnnouncedLink{Peer: peer, RTT: mem.Links[peer]})
		}
		announced = append(announced, a)
	}
	if len(nodes) == 0 {
		if available {
			return plan.Plan{}, nil, fmt.Errorf("%w that holds or can fetch model %q is left", errNoNode, name)
		}
		return plan.Plan{}, nil, fmt.Errorf("%w has model %q", errNoNode, name)
	}
	pm := plan.FromProfile(name, m.Profile)
	pm.NoTP, pm.ExpertFFNUnits = m.NoTP, m.ExpertUnits
	opts := plan.Options{Context: c.planContext(m), Sessions: c.opts.PlanSessions, KVType: c.opts.KVType}
	if c.opts.Placer != nil {
		p, err := c.opts.Placer(pm, nodes, opts)
		return p, members, err
	}
	link := c.opts.Link
	if link == (plan.Link{}) {
		link = plan.LinkPresets["tcp"]
	}
	_, network := plan.Inputs(announced, link)
	act := 4
	if c.opts.Hidden == messages.HiddenType_HIDDEN_F16 {
		act = 2
	}
	p, err := plan.PlaceMode(pm, nodes, network, opts, plan.CostOptions{ActBytes: act, Experts: c.opts.Experts}, c.opts.Placement)
	return p, members, err
}

// heldLayers says which layers of model a member holds (all when it has
// the file; a slice of layers) and whether it holds any of the model.
func heldLayers(mem Member, model string, layers int) ([]bool, bool) {
	if slices.Contains(mem.Models, model) {
		held := make([]bool, layers)
		for i := range held {
			held[i] = true
		}
		return held, true
	}
	held := make([]bool, layers)
	h, ok := mem.Partial[model]
	if !ok {
		return held, false
	}
	for _, l := range h.Held {
		if l >= 0 && l < layers {
			held[l] = true
		}
	}
	return held, true
}

// fetchRate is the transfer rate a load's deadline assumes for layers a
// node has to fetch from peers (bytes per second): slow enough for a
// 1 Gbit/s link shared by several fetches.
const fetchRate = 20 << 20

// leftOut is the nodes a load found unable to take part: the caller may
// re-plan without them.
type leftOut struct {
	unreachable []string // did not answer at all, or are leaving the cluster
	refused     []string // answered that they cannot hold their shard
	refusedErr  error    // what they answered
}

// load asks every stage's host to load its shard (every member's, for a
// tensor-parallel stage: the others first, then the leader, which is told
// their shard actors). Nodes that do not answer at all, are leaving, or
// cannot fetch their shard's layers are returned apart.
func (c *Origin) load(name string, p plan.Plan, members []Member) ([]session.Stage, leftOut, error) {
	byID := map[string]Member{}
	for _, m := range members {
		byID[m.ID] = m
	}
	layers := 0
	if len(p.Stages) > 0 {
		layers = p.Stages[len(p.Stages)-1].End
	}
	stages := make([]session.Stage, len(p.Stages))
	errs := make([]error, len(p.Stages))
	var mu sync.Mutex
	var left leftOut
	leave := func(list *[]string, node string) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(*list, node) {
			*list = append(*list, node)
		}
	}
	// one loads one shard on node.
	one := func(node string, spec *messages.ShardSpec, group []*messages.PID, weightBytes uint64) (session.Stage, error) {
		mem := byID[node]
		if mem.Host == nil {
			return session.Stage{}, fmt.Errorf("node %s is not in the view", node)
		}
		// A node that lacks the layers fetches them first: its answer
		// may take as long as moving their bytes.
		timeout := c.opts.StepTimeout
		if held, _ := heldLayers(mem, name, layers); !slices.Equal(held[spec.First:spec.End], allTrue(int(spec.End-spec.First))) {
			timeout += time.Duration(weightBytes/fetchRate+1) * time.Second
		}
		res, err := c.root.RequestFuture(mem.Host, &messages.LoadShard{Shard: spec, Group: group}, timeout).Result()
		if err != nil {
			leave(&left.unreachable, node)
			return session.Stage{}, fmt.Errorf("node %s did not load layers %d-%d of %s: %w", node, spec.First, spec.End-1, name, err)
		}
		loaded, ok := res.(*messages.ShardLoaded)
		switch {
		case ok && loaded.Leaving:
			// A node leaving the cluster: plan again without it, as for
			// one that did not answer.
			leave(&left.unreachable, node)
			return session.Stage{}, errors.New(loaded.Error)
		case ok && loaded.FetchFailed:
			// A node that lacks the layers and could not fetch them (its
			// disk budget is full, say): plan again without it.
			err := errors.New(loaded.Error)
			leave(&left.refused, node)
			mu.Lock()
			left.refusedErr = errors.Join(left.refusedErr, err)
			mu.Unlock()
			return session.Stage{}, err
		case !ok:
			return session.Stage{}, fmt.Errorf("node %s answered LoadShard with %T", node, res)
		case loaded.Error != "" && loaded.Busy:
			return session.Stage{}, fmt.Errorf("%s: %w", loaded.Error, engine.ErrBusy)
		case loaded.Error != "":
			return session.Stage{}, errors.New(loaded.Error)
		}
		return session.Stage{Node: node, Address: mem.Host.Address, Actor: loaded.ActorId, First: int(spec.First), End: int(spec.End)}, nil
	}
	var wg sync.WaitGroup
	for i, s := range p.Stages {
		wg.Go(func() {
			spec := &messages.ShardSpec{Model: name, First: uint32(s.First), End: uint32(s.End), Layers: uint32(layers)}
			if len(s.TP) == 0 {
				stages[i], errs[i] = one(s.Node, spec, nil, s.WeightBytes)
				return
			}
			leader := byID[s.TP[0].Node]
			if leader.Host == nil {
				errs[i] = fmt.Errorf("node %s is not in the view", s.TP[0].Node)
				return
			}
			for _, m := range s.TP {
				spec.TpNodes = append(spec.TpNodes, m.Node)
				spec.TpWeights = append(spec.TpWeights, m.Weight)
			}
			spec.TpExpertParallel = s.ExpertParallel
			specOf := func(j int) *messages.ShardSpec {
				return &messages.ShardSpec{Model: spec.Model, First: spec.First, End: spec.End, Layers: spec.Layers,
					TpNodes: spec.TpNodes, TpWeights: spec.TpWeights, TpIndex: uint32(j), TpExpertParallel: spec.TpExpertParallel}
			}
			tp := make([]session.Stage, len(s.TP)-1)
			memberErrs := make([]error, len(tp))
			var mwg sync.WaitGroup
			for j := range tp {
				mwg.Go(func() {
					m := s.TP[j+1]
					tp[j], memberErrs[j] = one(m.Node, specOf(j+1), []*messages.PID{wire.FromPID(leader.Host)}, m.WeightBytes)
				})
			}
			mwg.Wait()
			if err := errors.Join(memberErrs...); err != nil {
				errs[i] = err
				return
			}
			var group []*messages.PID
			for _, m := range tp {
				group = append(group, wire.FromPID(stagePID(m)))
			}
			if stages[i], errs[i] = one(s.TP[0].Node, specOf(0), group, s.TP[0].WeightBytes); errs[i] == nil {
				stages[i].TP = tp
			}
		})
	}
	wg.Wait()
	slices.Sort(left.unreachable)
	slices.Sort(left.refused)
	return stages, left, errors.Join(errs...)
}

func allTrue(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

func (c *Origin) logf(format string, args ...any) {
	if c.opts.Logger != nil {
		c.opts.Logger.Warn(fmt.Sprintf(format, args...))
	}
}

// sessionLabel is the public label of a session ID: 48 bits of its
// SHA-256, enough to tell sessions apart, useless to address one.
func sessionLabel(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:6])
}

func newSessionID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

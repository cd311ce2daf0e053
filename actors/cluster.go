package actors

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/plan"
	"strata/actors/session"
	"strata/messages"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/tokenizer"
)

// Member is one node of the membership view, as sessions see it.
type Member struct {
	ID          string     // the node's peer ID (the Address of its PIDs)
	Host        *actor.PID // its shard host
	MemoryBytes uint64     // memory it offers (the --memory cap or physical memory)
	Compute     float64    // relative compute rate; 0 = unknown
	Models      []string   // models it holds complete
	LastSeen    time.Time  // when the node was last heard from (zero: unknown)
	// Partial are the models it holds only some layers of (fetched from
	// peers), by name: Held, Embed and Head are set (Layers and Bytes not).
	Partial map[string]catalog.Holding
	// Fetches says it keeps layers it fetches from peers: a plan may give
	// it layers of a model it lacks.
	Fetches bool
}

// Directory is the current membership view.
type Directory interface {
	Members() []Member
}

// StaticDirectory is a fixed view, for tests and single nodes.
type StaticDirectory []Member

// Members implements Directory.
func (d StaticDirectory) Members() []Member { return d }

// ClusterOptions tunes a Cluster. Zero values pick the defaults noted.
type ClusterOptions struct {
	// PlanContext is the KV cache positions placement reserves per session
	// (and the most a session may use); 0 = min(model context, 4096). It
	// is one number for all sessions so every session of a model gets the
	// same plan and shares its shards.
	PlanContext int
	// PlanSessions is how many concurrent sessions of a model placement
	// reserves KV memory for; 0 = 1. More concurrent sessions than this
	// may be refused by a stage that runs out of memory.
	PlanSessions int
	// StepTimeout bounds the wait for one token before the session
	// rebuilds its ring and replays: stages that do not answer a probe
	// then (stuck, though their node still heartbeats) are left out of
	// the new ring; else it was a message lost on a cut link. 0 = 30 s.
	StepTimeout time.Duration
	// Hidden is the activation encoding between stages (F32 default, F16 halves the bytes).
	Hidden messages.HiddenType
	// ViewSettle is how long a session that lost a node waits for the
	// view to show whether the node is really gone, when the model does
	// not fit without it; 0 = 4 s (the membership drops a silent node
	// within 3 s).
	ViewSettle time.Duration
	// Placer computes placements; nil = plan.Place. It must be a
	// deterministic function of its inputs (every node computes the plans
	// of the sessions it starts), never place more than fits, and return a
	// *plan.RefusalError when the nodes are too small: a session that lost
	// a node then waits for the view to settle.
	Placer Placer
	// SenderMiddleware wraps every message the sessions started here send
	// (to first stages, and their probes and frees); nil = none. With
	// HostConfig.SenderMiddleware it shapes or cuts in-process links.
	SenderMiddleware []actor.SenderMiddleware
	// Open, when set, returns a model's file owned by someone else (the
	// node's Host.File), so a node opens each model once; nil = the
	// Cluster opens the files itself, through its ModelStore.
	Open func(name string) (*gguf.File, error)
	// Metrics hears the timing of every decode step; nil = none.
	Metrics Metrics
	// Logger receives one line per recovery; nil = silent.
	Logger *slog.Logger
}

// Placer is a placement function with plan.Place's signature.
type Placer func(m plan.Model, nodes []plan.Node, opts plan.Options) (plan.Plan, error)

// Metrics receives step timings (api.Metrics implements it).
type Metrics interface {
	// ObserveStep is one decode step's round trip through the ring.
	ObserveStep(d time.Duration)
	// ObserveHop is the transport time of one hop into the stage on peer:
	// (step time − compute time) shared evenly by the ring's hops.
	ObserveHop(peer string, d time.Duration)
}

// Cluster starts sessions from this node: it plans, has the stages load
// their shards, and drives generation.
type Cluster struct {
	system *actor.ActorSystem
	root   *actor.RootContext // sends to stages, through opts.SenderMiddleware
	dir    Directory
	models ModelStore
	opts   ClusterOptions

	mu       sync.Mutex
	local    map[string]*localModel // tokenizer and profile by model name
	sessions map[string]*SessionInfo
}

// localModel is what the origin node needs of a model: its tokenizer and profile.
type localModel struct {
	file *gguf.File // nil when opts.Open lent it
	tok  *tokenizer.Tokenizer
	cfg  model.Config
	prof model.Profile
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
}

// NewCluster returns a Cluster that plans over dir and reads tokenizers
// and profiles from models (the origin node must have the model file).
func NewCluster(system *actor.ActorSystem, dir Directory, models ModelStore, opts ClusterOptions) *Cluster {
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
	return &Cluster{system: system, root: root, dir: dir, models: models, opts: opts, local: map[string]*localModel{}, sessions: map[string]*SessionInfo{}}
}

// Close releases the model files the cluster opened.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.local {
		m.close()
	}
	c.local = map[string]*localModel{}
}

// Request is one generation across the cluster: Model names the model.
// Constraint is not supported on a cluster yet.
type Request = engine.Request

// Sessions lists the sessions this node drives now.
func (c *Cluster) Sessions() []SessionInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []SessionInfo
	for _, s := range c.sessions {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// model returns the tokenizer and profile of a model, opening its file on
// first use. The file is opened and read without c.mu (which status
// requests and every session need): two sessions may open it at once,
// and the second copy is closed.
func (c *Cluster) model(name string) (*localModel, error) {
	c.mu.Lock()
	m, ok := c.local[name]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := c.open(name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if other, ok := c.local[name]; ok {
		m.close()
		return other, nil
	}
	c.local[name] = m
	return m, nil
}

func (c *Cluster) open(name string) (*localModel, error) {
	var f *gguf.File
	var err error
	m := &localModel{}
	if c.opts.Open != nil {
		f, err = c.opts.Open(name)
	} else {
		f, err = openModel(c.models, name)
		m.file = f
	}
	if err != nil {
		return nil, err
	}
	// The tokenizer and profile copy what they need: the file is only
	// read here.
	if m.cfg, err = model.ConfigOf(f.Metadata()); err == nil {
		if m.prof, err = model.ProfileOf(f); err == nil {
			m.tok, err = tokenizer.FromGGUF(f.Metadata())
		}
	}
	if err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// close closes the model's file if the Cluster opened it.
func (m *localModel) close() {
	if m.file != nil {
		m.file.Close()
	}
}

// planContext is the per-session context placement reserves for m.
func (c *Cluster) planContext(m *localModel) int {
	if c.opts.PlanContext > 0 {
		return min(c.opts.PlanContext, m.cfg.Context)
	}
	return min(m.cfg.Context, 4096)
}

// Plan computes the placement of a model on the current view.
func (c *Cluster) Plan(name string) (plan.Plan, []Member, error) {
	return c.plan(name, nil)
}

func (c *Cluster) plan(name string, excluded []string) (plan.Plan, []Member, error) {
	m, err := c.model(name)
	if err != nil {
		return plan.Plan{}, nil, err
	}
	// Nodes that hold the model take part, and so do nodes that fetch the
	// layers they are given from those that hold them (when any member
	// holds any of it).
	var nodes []plan.Node
	var members []Member
	all := c.dir.Members()
	available := false
	for _, mem := range all {
		_, partial := mem.Partial[name]
		available = available || partial || slices.Contains(mem.Models, name)
	}
	for _, mem := range all {
		lost := slices.Contains(excluded, mem.ID)
		held, holds := heldLayers(mem, name, m.prof.Layers)
		if lost || !holds && !(mem.Fetches && available) {
			continue
		}
		nodes = append(nodes, plan.Node{ID: mem.ID, FreeBytes: mem.MemoryBytes, Compute: mem.Compute, Held: held})
		members = append(members, mem)
	}
	if len(nodes) == 0 {
		if available {
			return plan.Plan{}, nil, fmt.Errorf("no node of the cluster that holds or can fetch model %q is left", name)
		}
		return plan.Plan{}, nil, fmt.Errorf("no node of the cluster has model %q", name)
	}
	place := c.opts.Placer
	if place == nil {
		place = plan.Place
	}
	p, err := place(plan.FromProfile(name, m.prof), nodes, plan.Options{Context: c.planContext(m), Sessions: c.opts.PlanSessions})
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

// load asks every stage's host to load its shard. Nodes that do not
// answer at all are returned apart: the caller may re-plan without them.
func (c *Cluster) load(name string, p plan.Plan, members []Member) ([]session.Stage, []string, error) {
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
	silent := make([]bool, len(p.Stages))
	var wg sync.WaitGroup
	for i, s := range p.Stages {
		wg.Go(func() {
			mem := byID[s.Node]
			spec := &messages.ShardSpec{Model: name, First: uint32(s.First), End: uint32(s.End), Layers: uint32(layers)}
			// A node that lacks the layers fetches them first: its answer
			// may take as long as moving their bytes.
			timeout := c.opts.StepTimeout
			if held, _ := heldLayers(mem, name, layers); !slices.Equal(held[s.First:s.End], allTrue(s.End-s.First)) {
				timeout += time.Duration(s.WeightBytes/fetchRate+1) * time.Second
			}
			res, err := c.root.RequestFuture(mem.Host, &messages.LoadShard{Shard: spec}, timeout).Result()
			if err != nil {
				errs[i] = fmt.Errorf("node %s did not load layers %d-%d of %s: %w", s.Node, s.First, s.End-1, name, err)
				silent[i] = true
				return
			}
			loaded, ok := res.(*messages.ShardLoaded)
			switch {
			case !ok:
				errs[i] = fmt.Errorf("node %s answered LoadShard with %T", s.Node, res)
			case loaded.Error != "":
				errs[i] = errors.New(loaded.Error)
			default:
				stages[i] = session.Stage{Node: s.Node, Address: mem.Host.Address, Actor: loaded.ActorId, First: s.First, End: s.End}
			}
		})
	}
	wg.Wait()
	var unreachable []string
	for i, s := range p.Stages {
		if silent[i] {
			unreachable = append(unreachable, s.Node)
		}
	}
	return stages, unreachable, errors.Join(errs...)
}

func allTrue(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

// inbox is the session's actor: it watches the stages and hands Token,
// ForwardError and Terminated messages to the goroutine that drives the
// session.
type inbox struct {
	ch      chan any
	watched []*actor.PID // touched only by Receive
}

// watchStages asks the inbox to watch a ring's stage actors.
type watchStages struct{ pids []*actor.PID }

func (in *inbox) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case watchStages:
		for _, p := range in.watched {
			ctx.Unwatch(p)
		}
		in.watched = m.pids
		for _, p := range m.pids {
			ctx.Watch(p)
		}
	case *actor.Stopping:
		// Long-lived shards would otherwise collect a dead watcher per session.
		for _, p := range in.watched {
			ctx.Unwatch(p)
		}
	case *messages.Token, *messages.ForwardError, *actor.Terminated:
		select {
		case in.ch <- m:
		default: // a stage sent more than one answer per step: drop it
		}
	}
}

// Generate runs one generation on the cluster, calling onToken for each
// generated token in order, like engine.Engine.Generate (the same loop).
func (c *Cluster) Generate(ctx context.Context, req Request, onToken func(engine.Token) error) (res engine.Result, err error) {
	if err := req.Sampling.Validate(); err != nil {
		return res, err
	}
	if req.Constraint != nil {
		return res, errors.New("constrained sampling does not run on a cluster yet")
	}
	lm, err := c.model(req.Model)
	if err != nil {
		return res, err
	}
	prompt := req.Tokens
	if prompt == nil {
		prompt = lm.tok.Encode(req.Prompt, true, false)
	}
	ctxLen := c.planContext(lm)
	if len(prompt) == 0 || len(prompt) >= ctxLen {
		return res, fmt.Errorf("prompt of %d tokens does not fit the context of %d", len(prompt), ctxLen)
	}
	r := c.newRing(lm, req, prompt, ctxLen)
	defer func() { r.finish(err) }()
	// A ring keeps one of its positions free.
	return engine.Loop(ctx, lm.tok, prompt, req, ctxLen-1, r, onToken)
}

// sessionInbox returns the inbox of one running session (tests).
func (c *Cluster) sessionInbox() *actor.PID {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		return s.inbox
	}
	return nil
}

// ring is the shell around one session's core (strata/actors/session):
// it carries out the core's actions with actors, timers and the view, and
// turns what its inbox, its timer and the caller do into events. All of
// it runs on the goroutine that called Generate.
type ring struct {
	c       *Cluster
	core    *session.Session
	req     Request
	tok     *tokenizer.Tokenizer
	in      *inbox
	self    *actor.PID
	ctxLen  int
	info    *SessionInfo
	members []Member // of the last plan: whom Load asks

	// The wait for a token: its position and timer (nil: none).
	waitPos int
	timer   *time.Timer

	// Decode step timing: round trips, and the stages' compute within them.
	stepStart             time.Time
	stepTime, stepCompute time.Duration
	steps                 int
}

func (c *Cluster) newRing(lm *localModel, req Request, prompt []int, ctxLen int) *ring {
	in := &inbox{ch: make(chan any, 8)}
	self := c.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }))
	info := &SessionInfo{Model: req.Model, Prompt: len(prompt), Started: time.Now(), inbox: self}
	core := session.New(session.Config{Prompt: prompt, Context: ctxLen, MaxBatch: MaxBatch, Vocab: lm.tok.VocabSize(), StepTimeout: c.opts.StepTimeout})
	return &ring{c: c, core: core, req: req, tok: lm.tok, in: in, self: self, ctxLen: ctxLen, info: info}
}

var _ engine.Stepper = (*ring)(nil)

// Prefill implements engine.Stepper: plan, load, run the prompt.
func (r *ring) Prefill(ctx context.Context) (int, error) {
	return r.emitted(r.do(ctx, r.core.Step(session.Start{})))
}

// Step implements engine.Stepper.
func (r *ring) Step(ctx context.Context, fed int) (int, error) {
	r.stepStart = time.Now()
	return r.emitted(r.do(ctx, r.core.Step(session.Next{Token: fed})))
}

// emitted counts a generated token for the session's listing.
func (r *ring) emitted(id int, err error) (int, error) {
	if err == nil && !r.tok.IsEOG(id) {
		r.c.mu.Lock()
		r.info.Generated++
		r.c.mu.Unlock()
	}
	return id, err
}

// do carries out acts, and the actions the events they lead to call for,
// until the core emits a token or is done.
func (r *ring) do(ctx context.Context, acts []session.Action) (int, error) {
	c := r.c
	for {
		for len(acts) > 0 {
			a := acts[0]
			acts = acts[1:]
			var ev session.Event
			switch a := a.(type) {
			case session.Log:
				c.logf("%s", a.Text)
			case session.Free:
				r.free(a.Session, a.Stages)
			case session.Plan:
				if err := ctx.Err(); err != nil {
					ev = session.Cancel{Err: err}
					break
				}
				p, members, err := c.plan(r.req.Model, a.Exclude)
				r.members = members
				ev = session.Planned{Plan: p, Err: err}
			case session.AwaitView:
				back, err := r.settle(ctx, a.Lost)
				if ev = (session.ViewBack{Nodes: back}); err != nil {
					ev = session.Cancel{Err: err}
				}
			case session.Load:
				stages, unreachable, err := c.load(r.req.Model, a.Plan, r.members)
				ev = session.Loaded{ID: newSessionID(), Ring: stages, Unreachable: unreachable, At: time.Now(), Err: err}
			case session.Ring:
				r.use(a.ID, a.Stages)
			case session.Forward:
				r.send(a)
			case session.Wait:
				r.waitPos = a.Position
				if r.timer != nil {
					r.timer.Stop()
				}
				r.timer = time.NewTimer(a.Timeout)
			case session.Probe:
				ev = session.Probed{Silent: r.silentStages(a.Stages), At: time.Now()}
			case session.Emit:
				if a.Step {
					r.observe(time.Since(r.stepStart), a.Compute)
				}
				return a.Token, nil
			case session.Done:
				return 0, a.Err
			}
			if ev != nil {
				acts = append(acts, r.core.Step(ev)...)
			}
		}
		if r.core.Finished() {
			return 0, r.core.Err()
		}
		acts = r.core.Step(r.await(ctx))
	}
}

// await returns the next event of the ring: a message to the inbox, the
// wait's timeout, or the caller's cancel.
func (r *ring) await(ctx context.Context) session.Event {
	var expired <-chan time.Time
	if r.timer != nil {
		expired = r.timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return session.Cancel{Err: ctx.Err()}
		case <-expired:
			r.timer = nil
			return session.Timeout{Position: r.waitPos}
		case m := <-r.in.ch:
			switch m := m.(type) {
			case *actor.Terminated:
				_, stages := r.core.Ring()
				for _, s := range stages {
					if s.Address == m.Who.Address && s.Actor == m.Who.Id {
						return session.StageLost{Node: s.Node, Cause: "its shard actor stopped or its peer disconnected", At: time.Now()}
					}
				}
			case *messages.ForwardError:
				return session.ForwardFailed{Session: m.Session, Stage: m.Stage, Err: m.Error}
			case *messages.Token:
				return session.Token{Session: m.Session, Position: int(m.Position), ID: int(m.Id), Compute: time.Duration(m.ComputeNs)}
			}
		}
	}
}

// use makes a new ring current: the inbox watches its stages, and the
// session is listed under its new ID.
func (r *ring) use(id string, stages []session.Stage) {
	c := r.c
	var pids []*actor.PID
	for _, s := range stages {
		pids = append(pids, stagePID(s))
	}
	c.system.Root.Send(r.self, watchStages{pids})
	c.mu.Lock()
	defer c.mu.Unlock()
	for old, si := range c.sessions {
		if si == r.info {
			delete(c.sessions, old)
		}
	}
	r.info.ID = sessionLabel(id)
	// A fresh slice: Sessions() hands out copies that share it.
	r.info.Stages = make([]StageInfo, 0, len(stages))
	for _, s := range stages {
		r.info.Stages = append(r.info.Stages, StageInfo{Node: s.Node, Actor: s.Actor, First: s.First, End: s.End})
	}
	c.sessions[id] = r.info
}

func stagePID(s session.Stage) *actor.PID { return &actor.PID{Address: s.Address, Id: s.Actor} }

// send delivers a Forward to the ring's first stage.
func (r *ring) send(a session.Forward) {
	_, stages := r.core.Ring()
	var route []*messages.PID
	for _, s := range stages[1:] {
		route = append(route, fromPID(stagePID(s)))
	}
	f := &messages.Forward{Session: a.Session, Position: uint32(a.Position), Count: uint32(len(a.Tokens)), Route: route,
		ReplyTo: fromPID(r.self), HiddenType: r.c.opts.Hidden, Sample: a.Sample, Context: uint32(r.ctxLen)}
	for _, t := range a.Tokens {
		f.Tokens = append(f.Tokens, int32(t))
	}
	if a.Open {
		f.Sampling = samplingMessage(r.req.Sampling)
		for _, t := range a.Accept {
			f.Accept = append(f.Accept, int32(t))
		}
	}
	r.c.root.Send(stagePID(stages[0]), f)
}

// settle is the wait the core asks for when the model does not fit
// without the nodes this session lost. A lost link is not always a lost
// node: it returns the nodes heard from again (a heartbeat after they were
// lost) within ViewSettle, or none.
func (r *ring) settle(ctx context.Context, lost map[string]time.Time) ([]string, error) {
	deadline := time.Now().Add(r.c.opts.ViewSettle)
	for {
		var back []string
		for _, m := range r.c.dir.Members() {
			if lostAt, ok := lost[m.ID]; ok && m.LastSeen.After(lostAt) {
				back = append(back, m.ID)
			}
		}
		if len(back) > 0 || time.Now().After(deadline) {
			return back, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// maxProbe bounds the wait for a stage's answer to a probe after a step
// timed out.
const maxProbe = 5 * time.Second

// silentStages asks every stage of the ring for its stats and returns the
// nodes of those that do not answer within min(StepTimeout, maxProbe).
func (r *ring) silentStages(stages []session.Stage) []string {
	wait := min(r.c.opts.StepTimeout, maxProbe)
	futures := make([]*actor.Future, len(stages))
	for i, s := range stages {
		futures[i] = r.c.root.RequestFuture(stagePID(s), &messages.ShardStats{}, wait)
	}
	var silent []string
	for i, f := range futures {
		if _, err := f.Result(); err != nil && !slices.Contains(silent, stages[i].Node) {
			silent = append(silent, stages[i].Node)
		}
	}
	return silent
}

// observe reports one decode step: its round trip, and the transport
// share of each hop (session → stage 0 → … → last stage → session).
func (r *ring) observe(step, compute time.Duration) {
	r.stepTime += step
	r.stepCompute += compute
	r.steps++
	m := r.c.opts.Metrics
	if m == nil {
		return
	}
	m.ObserveStep(step)
	_, stages := r.core.Ring()
	hop := (step - compute) / time.Duration(len(stages)+1)
	for _, s := range stages {
		m.ObserveHop(s.Node, max(hop, 0))
	}
}

// Stats implements engine.Stepper.
func (r *ring) Stats() engine.Stats {
	_, stages := r.core.Ring()
	if r.steps == 0 {
		return engine.Stats{Stages: len(stages), Recoveries: r.core.Recoveries()}
	}
	return engine.Stats{Steps: r.steps, Stages: len(stages), Round: r.stepTime / time.Duration(r.steps), Compute: r.stepCompute / time.Duration(r.steps), Recoveries: r.core.Recoveries()}
}

// free releases a ring's KV caches and waits (briefly) until the live
// stages confirm, so a new ring's shards find the memory free.
func (r *ring) free(id string, stages []session.Stage) {
	// Excluded nodes too: a node left out for not answering may be back
	// in the next ring, and must not still hold this ring's KV cache. (A
	// node that left the view fails its future at once.)
	var futures []*actor.Future
	for _, s := range stages {
		futures = append(futures, r.c.root.RequestFuture(stagePID(s), &messages.FreeSession{Session: id}, 2*time.Second))
	}
	for _, f := range futures {
		f.Wait()
	}
}

// finish ends the session (err: why it ended early), frees its ring and
// stops its inbox.
func (r *ring) finish(err error) {
	if !r.core.Finished() {
		ev := session.Event(session.Stop{})
		if err != nil {
			ev = session.Cancel{Err: err}
		}
		// Free and Done only: nothing here waits.
		r.do(context.Background(), r.core.Step(ev))
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	id, _ := r.core.Ring()
	r.c.system.Root.Stop(r.self)
	r.c.mu.Lock()
	delete(r.c.sessions, id)
	r.c.mu.Unlock()
}

func (c *Cluster) logf(format string, args ...any) {
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

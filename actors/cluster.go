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
	"strata/messages"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/gguf"
	"strata/runtime/grammar"
	"strata/runtime/model"
	"strata/runtime/sample"
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
	// KVType is the KV cache element type placement counts (the zero
	// value is f16, the default); the node's shards use the same
	// (NodeConfig passes it to its Host).
	KVType model.KVType
	// ViewSettle is how long a session that lost a node waits for the
	// view to show whether the node is really gone, when the model does
	// not fit without it; 0 = 4 s (the membership drops a silent node
	// within 3 s).
	ViewSettle time.Duration
	// Metrics hears the timing of every decode step; nil = none.
	Metrics Metrics
	// Logger receives one line per recovery; nil = silent.
	Logger *slog.Logger
	// PromptCache is how many finished sessions' KV caches this origin
	// keeps on their stages for prompt caching (prefixcache.go); 0 = 16,
	// negative = none. The stages drop entries sooner when they need the
	// memory.
	PromptCache int
}

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
	dir    Directory
	models ModelStore
	opts   ClusterOptions

	prefix *prefixCache // retained sessions; nil = prompt caching off

	mu       sync.Mutex
	local    map[string]*localModel // tokenizer and profile by model name
	sessions map[string]*SessionInfo
	last     StepStats
}

// StepStats summarises the decode steps of a finished session.
type StepStats struct {
	Steps, Stages, Recoveries int
	Round                     time.Duration // mean round trip of one step
	Compute                   time.Duration // mean compute of all stages within it
}

// HopOverhead is the mean transport time per hop (a ring of k stages has
// k+1 hops, counting the session's own).
func (s StepStats) HopOverhead() time.Duration {
	if s.Stages == 0 {
		return 0
	}
	return (s.Round - s.Compute) / time.Duration(s.Stages+1)
}

// LastStats returns the step statistics of the last session that finished.
func (c *Cluster) LastStats() StepStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// localModel is what the origin node needs of a model: its tokenizer and profile.
type localModel struct {
	file *gguf.File
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
	c := &Cluster{system: system, dir: dir, models: models, opts: opts, local: map[string]*localModel{}, sessions: map[string]*SessionInfo{}}
	if opts.PromptCache == 0 {
		opts.PromptCache = defaultPromptCache
	}
	if opts.PromptCache > 0 {
		c.prefix = &prefixCache{max: opts.PromptCache}
	}
	return c
}

// Close releases the model files the cluster opened, and asks the stages
// to drop the prompt caches this origin kept there.
func (c *Cluster) Close() {
	if c.prefix != nil {
		for _, e := range c.prefix.all() {
			c.dropEntry(e, false)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.local {
		m.file.Close()
	}
	c.local = map[string]*localModel{}
}

// Request is one generation across the cluster.
type Request struct {
	Model     string
	Prompt    string
	Tokens    []int // used instead of Prompt when set (no BOS added)
	MaxTokens int   // 0 = until end of generation or a full context
	Sampling  sample.Params
	Stop      []string
	// Schema, when set, constrains the output to a JSON document of this
	// schema (structured output): the last stage masks its sampling.
	Schema *grammar.Schema
}

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
		m.file.Close()
		return other, nil
	}
	c.local[name] = m
	return m, nil
}

func (c *Cluster) open(name string) (*localModel, error) {
	f, err := openModel(c.models, name)
	if err != nil {
		return nil, err
	}
	m := &localModel{file: f}
	if m.cfg, err = model.ConfigOf(f.Metadata()); err == nil {
		if m.prof, err = model.ProfileOf(f); err == nil {
			m.tok, err = tokenizer.FromGGUF(f.Metadata())
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
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

func (c *Cluster) plan(name string, excluded map[string]time.Time) (plan.Plan, []Member, error) {
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
		_, lost := excluded[mem.ID]
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
	pm := plan.FromProfile(name, m.prof)
	pm.KVBytesPerToken = m.prof.KVBytesPerTokenOf(c.opts.KVType)
	p, err := plan.Place(pm, nodes, plan.Options{Context: c.planContext(m), Sessions: c.opts.PlanSessions})
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

// stage is one loaded stage of a session.
type stage struct {
	pid        *actor.PID
	first, end int
	node       string
}

// load asks every stage's host to load its shard. Nodes that do not
// answer at all are returned apart: the caller may re-plan without them.
func (c *Cluster) load(ctx context.Context, name string, p plan.Plan, members []Member) ([]stage, []string, error) {
	byID := map[string]Member{}
	for _, m := range members {
		byID[m.ID] = m
	}
	layers := 0
	if len(p.Stages) > 0 {
		layers = p.Stages[len(p.Stages)-1].End
	}
	stages := make([]stage, len(p.Stages))
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
			res, err := c.system.Root.RequestFuture(mem.Host, &messages.LoadShard{Shard: spec}, timeout).Result()
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
				stages[i] = stage{pid: &actor.PID{Address: mem.Host.Address, Id: loaded.ActorId}, first: s.First, end: s.End, node: s.Node}
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

// stageLost reports that a stage of the ring went away mid-session.
type stageLost struct {
	node  string
	cause string
}

func (e *stageLost) Error() string {
	if e.node == "" {
		return "the ring stalled (" + e.cause + ")"
	}
	return fmt.Sprintf("node %s left the session's ring (%s)", e.node, e.cause)
}

// Generate runs one generation on the cluster, calling onToken for each
// generated token in order, like engine.Engine.Generate.
func (c *Cluster) Generate(ctx context.Context, req Request, onToken func(engine.Token) error) (res engine.Result, err error) {
	if err := req.Sampling.Validate(); err != nil {
		return res, err
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
	res.PromptTokens = len(prompt)
	start := time.Now()
	in := &inbox{ch: make(chan any, 8)}
	self := c.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }))
	info := &SessionInfo{Model: req.Model, Prompt: len(prompt), Started: start, inbox: self}
	r := &run{c: c, lm: lm, req: req, in: in, self: self, ctxLen: ctxLen, info: info, excluded: map[string]time.Time{}}
	defer r.close()
	defer func() {
		if r.steps > 0 {
			c.mu.Lock()
			c.last = StepStats{Steps: r.steps, Stages: len(r.stages), Round: r.stepTime / time.Duration(r.steps), Compute: r.stepCompute / time.Duration(r.steps), Recoveries: r.recoveries}
			c.mu.Unlock()
		}
	}()

	// seq is every token the ring has to have seen: the prompt, then each
	// generated token once it is fed back.
	seq := append([]int(nil), prompt...)
	next, err := r.start(ctx, seq)
	if err != nil {
		return res, err
	}
	res.PrefillDuration = time.Since(start)
	res.CachedTokens = r.cached
	decodeStart := time.Now()
	defer func() { res.DecodeDuration = time.Since(decodeStart) }()

	text := engine.NewTextStream(lm.tok, prompt, req.Stop)
	for {
		piece, stop := text.Add(next)
		if !lm.tok.IsEOG(next) {
			res.Tokens = append(res.Tokens, next)
			c.mu.Lock()
			info.Generated = len(res.Tokens)
			c.mu.Unlock()
		}
		if piece != "" || !stop {
			if err := onToken(engine.Token{ID: next, Index: len(res.Tokens) - 1, Text: piece}); err != nil {
				res.Text = text.Text()
				return res, err
			}
		}
		if stop {
			res.FinishReason = engine.FinishStop
			r.keep = seq
			break
		}
		if (req.MaxTokens > 0 && len(res.Tokens) >= req.MaxTokens) || len(seq)+1 >= ctxLen {
			res.FinishReason = engine.FinishLength
			r.keep = seq
			if rest := text.Flush(); rest != "" {
				if err := onToken(engine.Token{ID: next, Index: len(res.Tokens) - 1, Text: rest}); err != nil {
					res.Text = text.Text()
					return res, err
				}
			}
			break
		}
		seq = append(seq, next)
		stepStart := time.Now()
		r.send(len(seq)-1, seq[len(seq)-1:], true, nil)
		next, err = r.wait(ctx, len(seq))
		if err == nil {
			r.observe(time.Since(stepStart))
		}
		var lost *stageLost
		if errors.As(err, &lost) {
			// A node went away: re-plan without it and replay what the
			// ring had seen. Greedy output is the same as without the
			// failure; nothing streamed is repeated.
			c.logf("session %s: %v; re-planning and replaying %d tokens", r.id, lost, len(seq))
			if lost.node != "" {
				r.excluded[lost.node] = time.Now()
			}
			r.recoveries++
			next, err = r.start(ctx, seq)
		}
		if err != nil {
			res.Text = text.Text()
			return res, err
		}
	}
	res.Text = text.Text()
	return res, nil
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

// run is one session's ring and the state needed to rebuild it.
type run struct {
	c          *Cluster
	lm         *localModel
	req        Request
	in         *inbox
	self       *actor.PID
	ctxLen     int
	info       *SessionInfo
	id         string  // the current ring's session ID
	stages     []stage // the current ring
	route      []*messages.PID
	excluded   map[string]time.Time // nodes lost during this session, and when
	recoveries int

	// Decode step timing: round trips, and the stages' compute within them.
	lastCompute           time.Duration
	stepTime, stepCompute time.Duration
	steps                 int

	// Prompt caching (prefixcache.go): the retained session the first
	// Forward resumes, the positions it covers, whether resuming failed
	// once, and the tokens the KV caches hold at a clean end.
	resume  string
	resumed *prefixEntry
	cached  int
	noCache bool
	keep    []int
}

// maxRecoveries bounds how many times one session rebuilds its ring.
const maxRecoveries = 8

// start plans a ring (without the excluded nodes), loads its shards,
// feeds it seq and returns the token that follows seq.
func (r *run) start(ctx context.Context, seq []int) (int, error) {
	c := r.c
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if r.recoveries > maxRecoveries {
			return 0, fmt.Errorf("session lost its ring %d times; giving up", r.recoveries)
		}
		r.free()
		p, members, err := c.plan(r.req.Model, r.excluded)
		if err != nil {
			var refusal *plan.RefusalError
			if errors.As(err, &refusal) && r.settle(ctx) {
				r.recoveries++
				continue
			}
			return 0, err
		}
		stages, unreachable, err := c.load(ctx, r.req.Model, p, members)
		if len(unreachable) > 0 {
			c.logf("session: nodes %v did not answer LoadShard; re-planning without them", unreachable)
			for _, n := range unreachable {
				r.excluded[n] = time.Now()
			}
			r.recoveries++
			continue
		}
		if err != nil {
			return 0, err
		}
		r.id, r.stages = newSessionID(), stages
		r.route = r.route[:0]
		var pids []*actor.PID
		for i, s := range stages {
			pids = append(pids, s.pid)
			if i > 0 {
				r.route = append(r.route, fromPID(s.pid))
			}
		}
		c.system.Root.Send(r.self, watchStages{pids})
		c.mu.Lock()
		for old, si := range c.sessions {
			if si == r.info {
				delete(c.sessions, old)
			}
		}
		r.info.ID = sessionLabel(r.id)
		// A fresh slice: Sessions() hands out copies that share it.
		r.info.Stages = make([]StageInfo, 0, len(stages))
		for _, s := range stages {
			r.info.Stages = append(r.info.Stages, StageInfo{Node: s.node, Actor: s.pid.Id, First: s.first, End: s.end})
		}
		c.sessions[r.id] = r.info
		c.mu.Unlock()

		// The prompt goes in chunks of MaxBatch, and on a replay each
		// generated token goes alone, all without waiting: the same
		// batches as the uninterrupted run, so the KV caches come out bit
		// for bit the same (batched and one-token kernels may round
		// differently) and greedy output does not change. Only the last
		// message samples. (A prompt that resumes a cached prefix starts
		// its batches after it: it may round differently from a run
		// without the cache.)
		promptLen := r.info.Prompt
		skip := r.resumeFrom(seq)
		for i := skip; i < promptLen; i += MaxBatch {
			chunk := seq[i:min(i+MaxBatch, promptLen)]
			var accept []int
			if i == skip {
				accept = seq
			}
			r.send(i, chunk, i+len(chunk) == len(seq), accept)
		}
		for i := promptLen; i < len(seq); i++ {
			r.send(i, seq[i:i+1], i+1 == len(seq), nil)
		}
		// One step timeout per eight messages in flight: a long replay is
		// progress, not a stall.
		messages := (promptLen+MaxBatch-1)/MaxBatch + len(seq) - promptLen
		next, err := r.waitFor(ctx, len(seq), r.c.opts.StepTimeout*time.Duration(1+messages/8))
		if r.cacheFailed(ctx, err) {
			continue
		}
		var lost *stageLost
		if errors.As(err, &lost) {
			c.logf("session %s: %v; re-planning", r.id, lost)
			if lost.node != "" {
				r.excluded[lost.node] = time.Now()
			}
			r.recoveries++
			continue
		}
		return next, err
	}
}

// settle is called when the model does not fit without the nodes this
// session lost. A lost link is not always a lost node: a node that is
// heard from again (a heartbeat after it was lost) within ViewSettle is
// given back. It reports whether any came back.
func (r *run) settle(ctx context.Context) bool {
	if len(r.excluded) == 0 {
		return false
	}
	deadline := time.Now().Add(r.c.opts.ViewSettle)
	for {
		back := map[string]bool{}
		for _, m := range r.c.dir.Members() {
			if lostAt, ok := r.excluded[m.ID]; ok && m.LastSeen.After(lostAt) {
				back[m.ID] = true
			}
		}
		if len(back) > 0 {
			for id := range back {
				delete(r.excluded, id)
			}
			r.c.logf("session: nodes %v are heard from again; trying them again", keys(back))
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// send feeds tokens at positions pos.. to the first stage. The first
// message of a ring carries the sampler settings and accept: every token
// before the first sampled position, for the last stage's penalties.
func (r *run) send(pos int, tokens []int, sampleNow bool, accept []int) {
	f := &messages.Forward{Session: r.id, Position: uint32(pos), Count: uint32(len(tokens)), Route: r.route,
		ReplyTo: fromPID(r.self), HiddenType: r.c.opts.Hidden, Sample: sampleNow, Context: uint32(r.ctxLen)}
	for _, t := range tokens {
		f.Tokens = append(f.Tokens, int32(t))
	}
	if accept != nil {
		f.Resume, r.resume = r.resume, ""
		f.Sampling = samplingMessage(r.req.Sampling)
		r.constrain(f.Sampling)
		for _, t := range accept {
			f.Accept = append(f.Accept, int32(t))
		}
	}
	r.c.system.Root.Send(r.stages[0].pid, f)
}

// wait returns the token for position pos.
func (r *run) wait(ctx context.Context, pos int) (int, error) {
	return r.waitFor(ctx, pos, r.c.opts.StepTimeout)
}

// waitFor is wait with a given timeout.
func (r *run) waitFor(ctx context.Context, pos int, timeout time.Duration) (int, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timer.C:
			// A stage that is stuck (its node still heartbeats, so the
			// view keeps it), or a message lost on a cut link: the stages
			// that do not answer a probe either are left out of the next
			// ring; then rebuild it and replay.
			lost := &stageLost{cause: fmt.Sprintf("no token for position %d within %v", pos, timeout)}
			if silent := r.silentStages(); len(silent) > 0 {
				lost.node, lost.cause = silent[0], lost.cause+"; it does not answer"
				for _, n := range silent[1:] {
					r.excluded[n] = time.Now()
				}
			}
			return 0, lost
		case m := <-r.in.ch:
			switch m := m.(type) {
			case *actor.Terminated:
				for _, s := range r.stages {
					if s.pid.Address == m.Who.Address && s.pid.Id == m.Who.Id {
						return 0, &stageLost{node: s.node, cause: "its shard actor stopped or its peer disconnected"}
					}
				}
			case *messages.ForwardError:
				if m.Session == r.id {
					return 0, fmt.Errorf("stage %s: %s", m.Stage, m.Error)
				}
			case *messages.Token:
				if m.Session != r.id || int(m.Position) != pos {
					continue // a stale answer
				}
				if m.Id < 0 || int(m.Id) >= r.lm.tok.VocabSize() {
					return 0, fmt.Errorf("the last stage sent token id %d, outside the vocabulary", m.Id)
				}
				r.lastCompute = time.Duration(m.ComputeNs)
				return int(m.Id), nil
			}
		}
	}
}

// maxProbe bounds the wait for a stage's answer to a probe after a step
// timed out.
const maxProbe = 5 * time.Second

// silentStages asks every stage of the ring for its stats and returns the
// nodes of those that do not answer within min(StepTimeout, maxProbe).
func (r *run) silentStages() []string {
	wait := min(r.c.opts.StepTimeout, maxProbe)
	futures := make([]*actor.Future, len(r.stages))
	for i, s := range r.stages {
		futures[i] = r.c.system.Root.RequestFuture(s.pid, &messages.ShardStats{}, wait)
	}
	var silent []string
	for i, f := range futures {
		if _, err := f.Result(); err != nil && !slices.Contains(silent, r.stages[i].node) {
			silent = append(silent, r.stages[i].node)
		}
	}
	return silent
}

// observe reports one decode step: its round trip, and the transport
// share of each hop (session → stage 0 → … → last stage → session).
func (r *run) observe(step time.Duration) {
	r.stepTime += step
	r.stepCompute += r.lastCompute
	r.steps++
	m := r.c.opts.Metrics
	if m == nil {
		return
	}
	m.ObserveStep(step)
	hop := (step - r.lastCompute) / time.Duration(len(r.stages)+1)
	for _, s := range r.stages {
		m.ObserveHop(s.node, max(hop, 0))
	}
}

// free releases the current ring's KV caches and waits (briefly) until
// the live stages confirm, so a new ring's shards find the memory free.
func (r *run) free() {
	// Excluded nodes too: a node left out for not answering may be back
	// in the next ring, and must not still hold this ring's KV cache. (A
	// node that left the view fails its future at once.)
	var futures []*actor.Future
	for _, s := range r.stages {
		futures = append(futures, r.c.system.Root.RequestFuture(s.pid, &messages.FreeSession{Session: r.id}, 2*time.Second))
	}
	for _, f := range futures {
		f.Wait()
	}
	r.stages = nil
}

func (r *run) close() {
	if r.keep != nil && r.c.prefix != nil && len(r.stages) > 0 {
		r.retain(r.keep)
	} else {
		r.free()
	}
	r.c.system.Root.Stop(r.self)
	r.c.mu.Lock()
	delete(r.c.sessions, r.id)
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

package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/plan"
	"strata/messages"
	"strata/runtime/engine"
	"strata/runtime/gguf"
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
	Models      []string   // models in its models directory
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
	// StepTimeout bounds the wait for one token; 0 = 60 s.
	StepTimeout time.Duration
	// Hidden is the activation encoding between stages (F32 default, F16 halves the bytes).
	Hidden messages.HiddenType
}

// Cluster starts sessions from this node: it plans, has the stages load
// their shards, and drives generation.
type Cluster struct {
	system *actor.ActorSystem
	dir    Directory
	models ModelStore
	opts   ClusterOptions

	mu       sync.Mutex
	local    map[string]*localModel // tokenizer and profile by model name
	sessions map[string]*SessionInfo
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
	ID        string
	Model     string
	Stages    []StageInfo
	Prompt    int
	Generated int
	Started   time.Time
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
		opts.StepTimeout = 60 * time.Second
	}
	return &Cluster{system: system, dir: dir, models: models, opts: opts, local: map[string]*localModel{}, sessions: map[string]*SessionInfo{}}
}

// Close releases the model files the cluster opened.
func (c *Cluster) Close() {
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

func (c *Cluster) model(name string) (*localModel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.local[name]; ok {
		return m, nil
	}
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
	c.local[name] = m
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
	m, err := c.model(name)
	if err != nil {
		return plan.Plan{}, nil, err
	}
	var nodes []plan.Node
	var members []Member
	for _, mem := range c.dir.Members() {
		if slices.Contains(mem.Models, name) {
			nodes = append(nodes, plan.Node{ID: mem.ID, FreeBytes: mem.MemoryBytes, Compute: mem.Compute})
			members = append(members, mem)
		}
	}
	if len(nodes) == 0 {
		return plan.Plan{}, nil, fmt.Errorf("no node of the cluster has model %q", name)
	}
	p, err := plan.Place(plan.FromProfile(name, m.prof), nodes, plan.Options{Context: c.planContext(m)})
	return p, members, err
}

// stage is one loaded stage of a session.
type stage struct {
	pid        *actor.PID
	first, end int
	node       string
}

// load asks every stage's host to load its shard.
func (c *Cluster) load(ctx context.Context, name string, p plan.Plan, members []Member) ([]stage, error) {
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
	var wg sync.WaitGroup
	for i, s := range p.Stages {
		wg.Go(func() {
			mem := byID[s.Node]
			spec := &messages.ShardSpec{Model: name, First: uint32(s.First), End: uint32(s.End), Layers: uint32(layers)}
			res, err := c.system.Root.RequestFuture(mem.Host, &messages.LoadShard{Shard: spec}, c.opts.StepTimeout).Result()
			if err != nil {
				errs[i] = fmt.Errorf("node %s did not load layers %d-%d of %s: %w", s.Node, s.First, s.End-1, name, err)
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
	return stages, errors.Join(errs...)
}

// inbox is the session's actor: it hands Token and ForwardError messages
// to the goroutine that drives the session.
type inbox struct{ ch chan any }

func (in *inbox) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Token, *messages.ForwardError:
		select {
		case in.ch <- m:
		default: // a stage sent more than one answer per step: drop it
		}
	}
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
	p, members, err := c.Plan(req.Model)
	if err != nil {
		return res, err
	}
	stages, err := c.load(ctx, req.Model, p, members)
	if err != nil {
		return res, err
	}

	in := &inbox{ch: make(chan any, 4)}
	self := c.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }))
	id := newSessionID()
	info := &SessionInfo{ID: id, Model: req.Model, Prompt: len(prompt), Started: start}
	for _, s := range stages {
		info.Stages = append(info.Stages, StageInfo{Node: s.node, Actor: s.pid.Id, First: s.first, End: s.end})
	}
	c.mu.Lock()
	c.sessions[id] = info
	c.mu.Unlock()
	defer func() {
		for _, s := range stages {
			c.system.Root.Send(s.pid, &messages.FreeSession{Session: id})
		}
		c.system.Root.Stop(self)
		c.mu.Lock()
		delete(c.sessions, id)
		c.mu.Unlock()
	}()

	route := make([]*messages.PID, 0, len(stages)-1)
	for _, s := range stages[1:] {
		route = append(route, fromPID(s.pid))
	}
	first := stages[0].pid
	send := func(pos int, tokens []int, sampleNow bool, setup bool) {
		f := &messages.Forward{Session: id, Position: uint32(pos), Count: uint32(len(tokens)), Route: route,
			ReplyTo: fromPID(self), HiddenType: c.opts.Hidden, Sample: sampleNow, Context: uint32(ctxLen)}
		for _, t := range tokens {
			f.Tokens = append(f.Tokens, int32(t))
		}
		if setup {
			f.Sampling = samplingMessage(req.Sampling)
			for _, t := range prompt {
				f.Accept = append(f.Accept, int32(t))
			}
		}
		c.system.Root.Send(first, f)
	}
	// wait returns the next token of the session.
	wait := func(pos int) (int, error) {
		timer := time.NewTimer(c.opts.StepTimeout)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-timer.C:
				return 0, fmt.Errorf("no token for position %d within %v", pos, c.opts.StepTimeout)
			case m := <-in.ch:
				switch m := m.(type) {
				case *messages.ForwardError:
					return 0, fmt.Errorf("stage %s: %s", m.Stage, m.Error)
				case *messages.Token:
					if m.Session != id || int(m.Position) != pos {
						continue // a stale answer
					}
					if m.Id < 0 || int(m.Id) >= lm.tok.VocabSize() {
						return 0, fmt.Errorf("the last stage sent token id %d, outside the vocabulary", m.Id)
					}
					return int(m.Id), nil
				}
			}
		}
	}

	// Prefill in chunks; only the last chunk samples.
	for i := 0; i < len(prompt); i += MaxBatch {
		chunk := prompt[i:min(i+MaxBatch, len(prompt))]
		send(i, chunk, i+len(chunk) == len(prompt), i == 0)
	}
	pos := len(prompt)
	id0, err := wait(pos)
	if err != nil {
		return res, err
	}
	res.PrefillDuration = time.Since(start)
	decodeStart := time.Now()
	defer func() { res.DecodeDuration = time.Since(decodeStart) }()

	text := engine.NewTextStream(lm.tok, prompt, req.Stop)
	next := id0
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
			break
		}
		pos++
		if (req.MaxTokens > 0 && len(res.Tokens) >= req.MaxTokens) || pos >= ctxLen {
			res.FinishReason = engine.FinishLength
			if rest := text.Flush(); rest != "" {
				if err := onToken(engine.Token{ID: next, Index: len(res.Tokens) - 1, Text: rest}); err != nil {
					res.Text = text.Text()
					return res, err
				}
			}
			break
		}
		send(pos-1, []int{next}, true, false)
		if next, err = wait(pos); err != nil {
			res.Text = text.Text()
			return res, err
		}
	}
	res.Text = text.Text()
	return res, nil
}

func newSessionID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

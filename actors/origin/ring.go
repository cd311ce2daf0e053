package origin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/wire"
	"strata/actors/session"
	"strata/messages"
	"strata/runtime/engine"
	"strata/runtime/grammar"
	"strata/runtime/modelinfo"
	"strata/runtime/tokenizer"
)

// The session shell: one generation's core (strata/actors/session) driven
// with actors, timers and the membership view. The shell decides nothing
// about recovery or replay; it carries out the core's actions and turns
// what happens into the core's events.

// inbox is the session's actor: it watches the stages and hands Token,
// ForwardError and Terminated messages to the goroutine that drives the
// session.
type inbox struct {
	ch      chan any
	watched []*actor.PID // touched only by Receive
}

// inboxDispatcher runs an inbox's Receive on the goroutine that sends to
// it, as protoactor's futures do. The default dispatcher starts a
// goroutine for every message to an idle actor, and readying one wakes
// another OS thread where one is idle, paid by the sender: the stage,
// between its steps. On a 2-core VM a node's stories260K token took 134
// us with the Go runtime on two threads and 89 on one (GOMAXPROCS; one
// compute thread both times); this saves one such hand-off per token
// (in process, BenchmarkRetoldStoryOnNode off: 72-77 us a token before,
// 68-76 after, alternated). Receive only hands a message on to a
// buffered channel, or (un)watches, so it never blocks its caller.
var inboxDispatcher = actor.NewSynchronizedDispatcher(300)

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
//
// A stage with no memory for the session's KV cache (other sessions hold
// it) does not fail the request at once: while nothing has been
// generated, the session is tried again, backing off, for up to
// StepTimeout; then Generate returns an error that is engine.ErrBusy.
func (c *Origin) Generate(ctx context.Context, req Request, onToken func(engine.Token) error) (engine.Result, error) {
	emitted := false
	tokens := func(t engine.Token) error {
		emitted = true
		return onToken(t)
	}
	deadline := time.Now().Add(c.opts.StepTimeout)
	busyTries := 0
	for delay := busyBackoff; ; delay = min(2*delay, maxBusyBackoff) {
		res, r, err := c.generate(ctx, req, tokens)
		retry := errors.Is(err, engine.ErrBusy) && !emitted && time.Now().Add(delay).Before(deadline)
		if retry {
			select {
			case <-ctx.Done():
				retry = false
			case <-time.After(delay):
			}
		}
		if !retry {
			// One line per request, however many tries it took.
			if r != nil {
				c.logSession(r, res, err, busyTries)
			}
			return res, err
		}
		busyTries++
	}
}

// The waits between tries of a session the cluster has no room for.
const (
	busyBackoff    = 50 * time.Millisecond
	maxBusyBackoff = time.Second
)

// generate is one try of Generate; the ring it ran (nil when it failed
// before one began) is for the session's log line.
func (c *Origin) generate(ctx context.Context, req Request, onToken func(engine.Token) error) (res engine.Result, r *ring, err error) {
	if err := req.Sampling.Validate(); err != nil {
		return res, nil, err
	}
	if req.Constraint != nil {
		return res, nil, errors.New("a Constraint runs in this process only; a cluster takes a Schema")
	}
	lm, err := c.models.Info(req.Model)
	if err != nil {
		return res, nil, err
	}
	prompt := req.Tokens
	if prompt == nil {
		prompt = lm.Tokenizer.Encode(req.Prompt, true, false)
	}
	ctxLen := c.planContext(lm)
	if len(prompt) == 0 || len(prompt) >= ctxLen {
		return res, nil, fmt.Errorf("prompt of %d tokens does not fit the context of %d", len(prompt), ctxLen)
	}
	r, err = c.newRing(lm, req, prompt, ctxLen)
	if err != nil {
		return res, nil, err
	}
	defer func() { r.finish(err) }()
	// A ring keeps one of its positions free.
	res, err = engine.Loop(ctx, lm.Tokenizer, prompt, req, ctxLen-1, r, onToken)
	res.CachedTokens = r.cached
	if r.spec != nil {
		// Checked tokens the answer stopped before did not count.
		res.Drafted, res.Accepted = r.spec.Drafted, r.spec.Accepted-r.core.Ahead()
	} else if r.stageDraft {
		d, a := r.core.StageGuesses()
		res.Drafted, res.Accepted = d, a-r.core.Ahead()
	}
	return res, r, err
}

// logSession writes the one line per session an owner reads: how it
// ended, its tokens, its rates, the recoveries it took and how often it
// was tried again for want of room (busy).
func (c *Origin) logSession(r *ring, res engine.Result, err error, busyTries int) {
	if c.opts.Logger == nil {
		return
	}
	outcome, level := "ok", slog.LevelInfo
	switch {
	case errors.Is(err, context.Canceled):
		outcome = "cancelled"
	case err != nil:
		outcome, level = "error", slog.LevelWarn
	}
	r.c.mu.Lock()
	label := r.info.ID
	r.c.mu.Unlock()
	attrs := []slog.Attr{slog.String("outcome", outcome), slog.String("model", r.req.Model), slog.String("session", label),
		slog.Int("prompt_tokens", r.info.Prompt), slog.Int("cached_tokens", r.cached), slog.Int("tokens", len(res.Tokens)),
		slog.Int("recoveries", res.Stats.Recoveries), slog.Int("stages", res.Stats.Stages),
		slog.Duration("prefill", res.PrefillDuration.Round(time.Millisecond)), slog.Duration("elapsed", time.Since(r.info.Started).Round(time.Millisecond))}
	if d := res.DecodeDuration; d > 0 && len(res.Tokens) > 1 {
		attrs = append(attrs, slog.Float64("decode_tok_s", math.Round(float64(len(res.Tokens)-1)/d.Seconds()*10)/10))
	}
	if busyTries > 0 {
		attrs = append(attrs, slog.Int("busy_retries", busyTries))
	}
	if res.FinishReason != "" {
		attrs = append(attrs, slog.String("finish", res.FinishReason))
	}
	if err != nil {
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	c.opts.Logger.LogAttrs(context.Background(), level, "session", attrs...)
}

// ring is the shell around one session's core (strata/actors/session):
// it carries out the core's actions with actors, timers and the view, and
// turns what its inbox, its timer and the caller do into events. All of
// it runs on the goroutine that called Generate.
type ring struct {
	c      *Origin
	core   *session.Session
	req    Request
	tok    *tokenizer.Tokenizer
	in     *inbox
	self   *actor.PID
	ctxLen int
	// chainLimit is the first position the caller never feeds (the
	// shortcut's end, session.Config.ChainBelow).
	chainLimit int
	info       *SessionInfo
	members    []Member // of the last plan: whom Load asks

	// The wait for a token: its position and timer (nil: none).
	waitPos int
	timer   *time.Timer

	// Prompt caching (prefixcache.go): the retained session the ring
	// resumes until its first answer, and the prompt positions reused.
	resumed *prefixEntry
	cached  int

	// Speculative decoding (nil: off): the guesser, and the guesses sent
	// with the step in flight. stageDraft: the last stage guesses by
	// n-gram lookup itself instead (session.Config.Draft; spec is nil).
	spec       *engine.Speculator
	stageDraft bool
	seq        []int // the text so far for the guesser, reused
	// mostGuesses bounds a step's guesses: the model's batch-invariance
	// bound here where every stage runs on this node's architecture, the
	// bound that holds on every one where not (see use).
	mostGuesses, mostHere, mostAnywhere int
	// guard follows the answer with the schema's grammar (structured
	// output with speculation): guesses it would mask are cut here, as
	// the last stage would not draw them.
	guard *grammar.Matcher

	// Decode step timing: round trips, and the stages' compute within them.
	stepStart             time.Time
	stepTime, stepCompute time.Duration
	steps                 int
}

func (c *Origin) newRing(lm *modelinfo.Info, req Request, prompt []int, ctxLen int) (*ring, error) {
	cfg := session.Config{Prompt: prompt, MaxBatch: wire.MaxBatch, Vocab: lm.Tokenizer.VocabSize(), StepTimeout: c.opts.StepTimeout,
		PromptCache: c.prefix != nil}
	source := req.Speculate
	if source == "" {
		source = c.opts.Speculate
		if source == engine.SpeculateDraft && (c.opts.Draft == nil || engine.DraftFits(lm.Tokenizer, c.opts.Draft) != nil) {
			source = engine.SpeculateOff // the node's draft guesses for other models only
		}
	} else if source == engine.SpeculateDraft && c.opts.Draft != nil {
		if err := engine.DraftFits(lm.Tokenizer, c.opts.Draft); err != nil {
			return nil, fmt.Errorf("model %s: %w", req.Model, err)
		}
	}
	// Guesses stay within the model's batch invariance bound, so the
	// answer is the one without them.
	spec, err := engine.NewSpeculator(source, c.opts.Draft, ctxLen, lm.Tokenizer.VocabSize(), min(lm.InvariantRows, wire.MaxBatch)-1)
	if err != nil {
		return nil, err
	}
	if spec != nil && c.opts.GuessEveryStep {
		spec.GuessEveryStep()
	}
	if spec != nil && c.driving() > 0 {
		// Other sessions share the stages' passes now: this one would
		// step aside from guessing anyway, and keeps the shortcut.
		spec = nil
	}
	chainLimit := feedLimit(len(prompt), req.MaxTokens, ctxLen)
	stageDraft := spec != nil && source == engine.SpeculateNGram && !c.opts.NoShortcut
	if stageDraft {
		// n-gram guesses need only the session's tokens, which the last
		// stage knows: it drafts them for the steps it feeds through the
		// shortcut, and the session's round trip stays off each step's
		// path (as for plain steps; no pacing between the two ways then).
		cfg.Draft, spec = spec.Most(), nil
	}
	if !c.opts.NoShortcut && spec == nil {
		cfg.ChainBelow = chainLimit
	}
	core, err := session.New(cfg)
	if err != nil {
		return nil, err
	}
	in := &inbox{ch: make(chan any, 8)}
	self := c.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }, actor.WithDispatcher(inboxDispatcher)))
	info := &SessionInfo{Model: req.Model, Prompt: len(prompt), Started: time.Now(), inbox: self}
	r := &ring{c: c, core: core, req: req, tok: lm.Tokenizer, in: in, self: self, ctxLen: ctxLen, chainLimit: chainLimit, info: info, spec: spec,
		stageDraft: stageDraft, mostHere: min(lm.InvariantRows, wire.MaxBatch) - 1, mostAnywhere: min(lm.InvariantRowsAnywhere, wire.MaxBatch) - 1}
	r.mostGuesses = r.mostAnywhere
	if spec != nil && req.Schema != nil {
		var p messages.Sampling
		r.constrain(&p)
		r.guard = grammar.NewMatcher(req.Schema, lm.Vocab(), int(p.SchemaBudget))
	}
	return r, nil
}

// feedLimit is the first position engine.Loop never feeds a token at,
// for a prompt of n tokens: it feeds below the room it is given (ctxLen-1,
// see Generate), and with maxTokens > 0 it stops at the maxTokens-th
// token, which is not fed.
func feedLimit(n, maxTokens, ctxLen int) int {
	limit := ctxLen - 1
	if maxTokens > 0 {
		limit = min(limit, n+maxTokens-1)
	}
	return limit
}

var _ engine.Stepper = (*ring)(nil)

// Prefill implements engine.Stepper: plan, load, run the prompt.
func (r *ring) Prefill(ctx context.Context) (int, error) {
	return r.emitted(r.do(ctx, r.core.Step(session.Start{})))
}

// Step implements engine.Stepper. With speculation, a step whose token
// the ring has not checked yet carries guesses for the tokens after it.
func (r *ring) Step(ctx context.Context, fed int) (int, error) {
	r.stepStart = time.Now()
	next := session.Next{Token: fed}
	if r.guard != nil {
		r.guard.Accept(fed) // every token of the answer is fed once, in order
	}
	if r.spec != nil {
		r.spec.Tick(r.core.Ahead())
	}
	if n := r.plain(); n > 0 {
		// Plain steps have been faster than checked ones: this step and
		// the next n-1 are plain, and the shortcut feeds the tokens they
		// feed (at len(Fed)+1 .. len(Fed)+n-1; the one after them goes
		// with guesses again).
		next.ChainBelow = min(len(r.core.Fed())+n, r.chainLimit)
	} else if r.spec != nil && r.core.CanGuess() && r.c.driving() <= 1 {
		// fed goes at len(seq)-1; the guesses after it stay below the
		// ring's last position (ctxLen-1, kept free).
		r.seq = append(append(r.seq[:0], r.core.Fed()...), fed)
		guesses, err := r.spec.Guess(r.seq, min(r.ctxLen-1-len(r.seq), r.mostGuesses))
		if err != nil {
			r.c.logf("session: the draft model failed (%v); going on without guesses", err)
		}
		if r.guard != nil {
			guesses = guesses[:r.guard.Allows(guesses)]
		}
		next.Guesses = guesses
		if _, stages := r.core.Ring(); len(stages) > 1 {
			// The draft model goes on drafting while the stages check the
			// guesses (Speculator.DraftAhead): this node computes a part
			// of the step at most. With one stage, perhaps this node's,
			// the draft would take its cores.
			r.spec.DraftAhead(r.seq, guesses, r.mostGuesses)
		}
	}
	guessed, recoveries := len(next.Guesses), r.core.Recoveries()
	id, err := r.emitted(r.do(ctx, r.core.Step(next)))
	if err == nil && guessed > 0 && r.core.Recoveries() == recoveries {
		// The guesses the last stage agreed with wait in the core (a
		// recovery drops them and samples again: that step learns nothing).
		r.spec.Learn(guessed, r.core.Ahead())
	}
	return id, err
}

// plain is how many tokens a speculating session takes the plain way
// from now: its speculator found plain steps faster (the shortcut on).
func (r *ring) plain() int {
	if r.spec == nil || r.c.opts.NoShortcut || r.core.Ahead() > 0 {
		return 0
	}
	return r.spec.Plain()
}

// driving is how many sessions the node drives now. A speculating
// session steps aside while it is not the only one: the others' steps
// share the stages' forward passes (batching reads the weights once for
// them).
func (c *Origin) driving() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// allOfThisArch reports whether every node of stages announces this
// node's architecture.
func (c *Origin) allOfThisArch(stages []session.Stage) bool {
	arch := map[string]string{}
	for _, m := range c.dir.Members() {
		arch[m.ID] = m.Arch
	}
	for _, s := range stages {
		for _, node := range s.Nodes() {
			if arch[node] != runtime.GOARCH {
				return false
			}
		}
	}
	return true
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
			case session.Retain:
				r.retain(a.Session, a.Stages, a.Tokens)
			case session.DropCache:
				r.dropResumed()
			case session.Plan:
				if err := ctx.Err(); err != nil {
					ev = session.Cancel{Err: err}
					break
				}
				p, members, err := c.planFresh(ctx, r.req.Model, a.Exclude)
				r.members = members
				ev = session.Planned{Plan: p, Err: err}
			case session.AwaitView:
				back, err := r.settle(ctx, a.Lost)
				if ev = (session.ViewBack{Nodes: back}); err != nil {
					ev = session.Cancel{Err: err}
				}
			case session.Load:
				stages, left, err := c.load(r.req.Model, a.Plan, r.members)
				loaded := session.Loaded{ID: newSessionID(), Ring: stages, Unreachable: left.unreachable, Refused: left.refused, RefusedErr: left.refusedErr, At: time.Now(), Err: err}
				if a.Resume && err == nil {
					loaded.Resume, loaded.Cached = r.resumable(stages)
				}
				ev = loaded
			case session.Ring:
				r.use(a.ID, a.Stages)
			case session.Forward:
				r.send(a)
			case session.Chain:
				_, stages := r.core.Ring()
				// From the inbox: the stage takes it from the session's origin only.
				r.c.root.RequestWithCustomSender(stagePID(stages[len(stages)-1]), &messages.Chain{Session: a.Session, Until: uint32(a.Until)}, r.self)
			case session.Wait:
				r.stopTimer()
				r.waitPos, r.timer = a.Position, time.NewTimer(a.Timeout)
			case session.Probe:
				ev = session.Probed{Silent: r.silentStages(a.Stages), At: time.Now()}
			case session.Emit:
				r.stopTimer()
				r.resumed = nil // adopted by the stages
				if a.Step {
					r.observe(time.Since(r.stepStart), a.Compute)
				}
				return a.Token, nil
			case session.Done:
				r.stopTimer()
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

// stopTimer ends the current wait's timer: a wait lasts from the core's
// Wait to its token (the caller's time with a token is not the ring's).
func (r *ring) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
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
					for _, a := range append([]session.Stage{s}, s.TP...) {
						if a.Address == m.Who.Address && a.Actor == m.Who.Id {
							return session.StageLost{Node: a.Node, Cause: "its shard actor stopped or its peer disconnected", At: time.Now()}
						}
					}
				}
			case *messages.ForwardError:
				return session.ForwardFailed{Session: m.Session, Stage: m.Stage, Err: m.Error, Gap: m.Gap, Group: m.GroupFailed, Busy: m.Busy}
			case *messages.Token:
				t := session.Token{Session: m.Session, Position: int(m.Position), ID: int(m.Id), Compute: time.Duration(m.ComputeNs), Guessed: int(m.Guessed)}
				if len(m.More) > 0 {
					t.More = make([]int, len(m.More))
					for i, id := range m.More {
						t.More[i] = int(id)
					}
				}
				return t
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
		for _, m := range s.TP {
			pids = append(pids, stagePID(m))
		}
	}
	if r.spec != nil || r.stageDraft {
		// A stage elsewhere (or of unknown kind) checks the guesses with
		// its own kernels.
		r.mostGuesses = r.mostHere
		if !c.allOfThisArch(stages) {
			r.mostGuesses = r.mostAnywhere
		}
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
		si := StageInfo{Node: s.Node, Actor: s.Actor, First: s.First, End: s.End}
		if len(s.TP) > 0 {
			si.TP = s.Nodes()
		}
		r.info.Stages = append(r.info.Stages, si)
	}
	c.sessions[id] = r.info
}

func stagePID(s session.Stage) *actor.PID { return &actor.PID{Address: s.Address, Id: s.Actor} }

// send delivers a Forward to the ring's first stage.
func (r *ring) send(a session.Forward) {
	_, stages := r.core.Ring()
	var route []*messages.PID
	for _, s := range stages[1:] {
		route = append(route, wire.FromPID(stagePID(s)))
	}
	f := &messages.Forward{Session: a.Session, Position: uint32(a.Position), Count: uint32(len(a.Tokens)), Route: route,
		ReplyTo: wire.FromPID(r.self), HiddenType: r.c.opts.Hidden, Sample: a.Sample, Context: uint32(r.ctxLen)}
	for _, t := range a.Tokens {
		f.Tokens = append(f.Tokens, int32(t))
	}
	for _, t := range a.Guesses {
		f.Guesses = append(f.Guesses, int32(t))
	}
	if a.Draft > 0 && r.mostGuesses > 0 {
		// Within the batch invariance bound of every stage's kernels.
		f.Draft, f.DraftUntil = uint32(min(a.Draft, r.mostGuesses)), uint32(a.DraftUntil)
	}
	if a.ChainUntil > 0 {
		f.ChainUntil = uint32(a.ChainUntil)
		for _, s := range stages {
			f.Loop = append(f.Loop, wire.FromPID(stagePID(s)))
		}
	}
	if a.Open {
		f.Resume = a.Resume
		f.Sampling = wire.Sampling(r.req.Sampling)
		r.constrain(f.Sampling)
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
// The members of tensor-parallel stages are asked too.
func (r *ring) silentStages(stages []session.Stage) []string {
	wait := min(r.c.opts.StepTimeout, maxProbe)
	var all []session.Stage
	for _, s := range stages {
		all = append(append(all, s), s.TP...)
	}
	futures := make([]*actor.Future, len(all))
	for i, s := range all {
		futures[i] = r.c.root.RequestFuture(stagePID(s), &messages.ShardStats{}, wait)
	}
	var silent []string
	for i, f := range futures {
		if _, err := f.Result(); err != nil && !slices.Contains(silent, all[i].Node) {
			silent = append(silent, all[i].Node)
		}
	}
	return silent
}

// observe reports one decode step: its round trip, and the transport
// share of each hop (session → stage 0 → … → last stage → session; with
// the shortcut, the last stage feeds stage 0 while the session's caller
// has the token, so a step's round trip is often shorter than its hops).
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

// Ready implements engine.Ready: the checked tokens not yet handed out.
func (r *ring) Ready() int { return r.core.Ahead() }

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
	r.stopTimer()
	if r.spec != nil {
		r.spec.Close()
	}
	id, _ := r.core.Ring()
	r.c.system.Root.Stop(r.self)
	r.c.mu.Lock()
	delete(r.c.sessions, id)
	r.c.mu.Unlock()
}

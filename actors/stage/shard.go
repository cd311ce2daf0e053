package stage

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"strata/actors/internal/wire"
	"strata/messages"
	"strata/peers/side"
	"strata/runtime/gguf"
	"strata/runtime/grammar"
	"strata/runtime/model"
	"strata/runtime/sample"
)

// shard is the actor that owns one stage's weights and its sessions' KV
// caches. Its Receive runs on one goroutine at a time; mu only guards
// what Stats reads from other goroutines.
type shard struct {
	host *Host
	spec *messages.ShardSpec
	// m is the stage's model; on a tensor-parallel member only its
	// Config, First and End are set (the weights are tp's).
	m     *model.Model
	state *model.State // scratch shared by all sessions: the actor runs one batch at a time (nil on a TP member)
	// releaseAcc frees the device's hold on the shard's weights
	// (HostConfig.Accelerate); nil = none. deviceBytes is what the
	// device's scratch takes (counted in Host.deviceUsed).
	releaseAcc  func()
	deviceBytes uint64
	tp          *tpShard           // set on a member of a tensor-parallel stage
	ids         [wire.MaxBatch]int // token ids of the batch being gathered (first stage)
	// verifyLogits holds a speculative step's logits, a row per guess and
	// one more (last stage).
	verifyLogits []float32
	// The batch being gathered (batch.go): steps of several sessions that
	// run as one forward pass; and the prompt chunks held back from it
	// (and any later step of their sessions), oldest first.
	batch       batch
	held        []heldStep
	deferred    deferral // steps held back to even out a pipeline's groups (evenout.go)
	pid         *actor.PID
	weightBytes uint64
	lastUse     atomic.Uint64 // host clock at the last load or session start
	maxContext  int           // the most KV positions one session may reserve
	// pinnedUntil (Unix ns) keeps a shard that a plan just asked for from
	// being evicted before its session's first step arrives.
	pinnedUntil atomic.Int64
	// activeAt (Unix ns) is when a session last started or ended on the
	// shard, or a plan asked for it (HostConfig.UnloadAfter counts from it).
	activeAt atomic.Int64

	mu       sync.Mutex
	sessions map[string]*shardSession
	// freed remembers recently freed sessions: a Forward still in flight
	// when its session ended must not bring it back.
	freed freedSessions
	// cached holds retained sessions' KV caches (prompt caching,
	// retained.go), by the ID of the session that filled them.
	cached map[string]*cachedKV

	// Structured output on the last stage (constrain.go): the model's
	// file, whose description the host keeps; used on the actor's goroutine.
	file *gguf.File
	gram grammars
}

// shardSession is one session's state on a shard.
type shardSession struct {
	origin *actor.PID // the session's inbox, which may free it
	// watch is the actor whose end ends the session: the origin, or on a
	// tensor-parallel member the leader's shard (see open).
	watch *actor.PID
	cache *model.Cache
	// A tensor-parallel member's: its heads' KV cache, the session's
	// all-reduce group (formed on its first step), and the error that
	// failed the group (every later step fails with it).
	tpc     *model.TPCache
	ar      Group
	arErr   error
	sampler *sample.Sampler // last stage only
	// matcher constrains the sampler (structured output), last stage
	// only; it follows the tokens from position schemaFrom on.
	matcher    *grammar.Matcher
	schemaFrom int
	kvBytes    uint64
	// The token shortcut, last stage only: the ring (first stage first),
	// the session's allowance (see mayFeed), and a sampled token's step
	// held until the session allows it (Chain), with the position the
	// step before it started at.
	loop       []*messages.PID
	chainUntil int
	held       *messages.Forward
	heldAfter  int
	// draft: speculation here (draft.go), last stage only; nil: none.
	draft *stageDraft
	// ranAt is when the session's last step ran here, ranSeq in which
	// batch, ranOne whether it was a one-token step (first stage of a
	// pipeline: evenout.go).
	ranAt  time.Time
	ranSeq uint64
	ranOne bool
}

// kv is the session's KV cache: a stage's, or a tensor-parallel member's.
func (ss *shardSession) kv() *model.Cache {
	if ss.tpc != nil {
		return ss.tpc
	}
	return ss.cache
}

// errSessionFreed marks a Forward for a session that has ended: dropped quietly.
var errSessionFreed = errors.New("session freed")

// Receive implements actor.Actor.
func (s *shard) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *messages.Forward, *side.Borrowed, runBatch, runDeferred, *messages.ShardStats:
	case *messages.Chain:
		// A chain only lets the shortcut send a session's next step
		// sooner; whether that step is gathered now or held changes
		// nothing of its result. Waiting for it would break up batches
		// (every session's origin sends one per token).
	case *actor.Stopping, *actor.Stopped:
		s.takeDeferred(ctx)
		s.runBatch(ctx)
		s.dropHeld() // a stopping shard computes no more prompts
	default:
		// Anything else sees the sessions as after the steps before it
		// (a free, a watch's end): run those first (and the held steps of
		// the sessions it ends, below).
		s.takeDeferred(ctx)
		s.runBatch(ctx)
	}
	switch m := ctx.Message().(type) {
	case runBatch:
		switch {
		case m.deadline > 0: // a wait's end: its batch, unless it ran
			if m.deadline == s.batch.gen+1 {
				s.evenOut(ctx)
				s.runBatch(ctx)
				s.runHeld(ctx)
			}
		default:
			s.batch.scheduled = false
			if s.batch.awaiting == 0 { // else the batch's last step schedules it, or its deadline
				s.pullHeld(ctx)
				s.evenOut(ctx)
				s.runBatch(ctx)
				s.runHeld(ctx)
			}
		}
	case runDeferred:
		if m.gen == s.deferred.gen {
			s.takeDeferred(ctx)
			if m.shape {
				s.evenOut(ctx)
			}
			s.runBatch(ctx)
		}
	case *messages.Forward:
		s.receiveForward(ctx, m, nil)
	case *side.Borrowed:
		// An activation in a side channel's receive slot: decoded from
		// there straight into the stage's input, and the slot given back.
		if fw, ok := m.Message.(*messages.Forward); ok {
			s.receiveForward(ctx, fw, m.Release)
		}
		m.Release()
	case *messages.FreeSession:
		// The session's held steps (a prompt cancelled while it was
		// being read) run first where it is retained, else are dropped.
		may := s.mayFree(m.Session, ctx.Sender())
		switch {
		case may && m.Retain:
			s.runHeldOf(ctx, m.Session)
		case may:
			s.takeHeld(m.Session)
		}
		switch {
		case !may:
		case m.Retain && s.retain(m.Session):
			s.relayFree(ctx, m.Session, true)
		case s.dropCached(m.Session, ctx.Sender()):
			s.relayFree(ctx, m.Session, false)
		default:
			if s.free(m.Session) {
				s.relayFree(ctx, m.Session, false)
			}
		}
		// A member does not answer its leader's relayed frees: the
		// leader would take the answer for a free of its own.
		if ctx.Sender() != nil && !(s.tp != nil && s.tp.fromLeader(ctx.Sender())) {
			ctx.Respond(&messages.FreeSession{Session: m.Session})
		}
	case *actor.Terminated:
		// The origin of some sessions stopped, or its node vanished:
		// nobody will free them, so free them now.
		ids := s.sessionsOf(m.Who)
		s.takeHeld(ids...)
		for _, id := range ids {
			if s.free(id) {
				s.relayFree(ctx, id, false)
			}
		}
	case *messages.Chain:
		s.chain(ctx, m)
	case *messages.ShardStats:
		ctx.Respond(&messages.ShardStatsReply{Shards: []*messages.ShardState{s.stats()}})
	case *actor.Stopped:
		s.batch.stopDeadline()
		for id := range s.sessions {
			s.free(id)
		}
		s.host.release(s.dropAllCached())
		if s.releaseAcc != nil {
			s.releaseAcc()
			s.releaseAcc = nil
		}
	}
}

// pinFor is how long a shard handed to a plan stays pinned without a
// session (a variable for tests).
var pinFor = time.Minute

func (s *shard) pin() {
	now := time.Now()
	s.pinnedUntil.Store(now.Add(pinFor).UnixNano())
	s.activeAt.Store(now.UnixNano())
}

// unusedFor is how long the shard has gone without a session (0 while
// it has one, or is pinned).
func (s *shard) unusedFor(now time.Time) time.Duration {
	if !s.idleAt(now) {
		return 0
	}
	return now.Sub(time.Unix(0, s.activeAt.Load()))
}

// idle reports whether the shard may be evicted: no session uses it and
// no plan is about to.
func (s *shard) idle() bool { return s.idleAt(time.Now()) }

func (s *shard) idleAt(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions) == 0 && now.UnixNano() > s.pinnedUntil.Load()
}

// kvBytes is the KV memory the shard's sessions hold.
func (s *shard) kvBytes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for _, ss := range s.sessions {
		n += ss.kvBytes
	}
	for _, e := range s.cached {
		n += e.ss.kvBytes
	}
	return n
}

// sessionsOf lists the sessions whose origin is pid.
func (s *shard) sessionsOf(pid *actor.PID) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, ss := range s.sessions {
		if ss.watch != nil && ss.watch.Address == pid.Address && ss.watch.Id == pid.Id {
			ids = append(ids, id)
		}
	}
	return ids
}

// mayFree reports whether sender may free the session: only the node the
// session's origin runs on (the bridge makes sure a peer's messages carry
// its own address). A session not open here may be freed by anyone: that
// only stops a Forward still in flight from opening it, and session IDs
// are random and never published.
func (s *shard) mayFree(session string, sender *actor.PID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[session]
	return !ok || sender != nil && sender.Address == ss.origin.Address || s.tp != nil && s.tp.fromLeader(sender)
}

func (s *shard) stats() *messages.ShardState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &messages.ShardState{Shard: s.spec, ActorId: s.pid.Id, Sessions: uint32(len(s.sessions)), WeightBytes: s.weightBytes}
	for _, ss := range s.sessions {
		st.KvBytes += ss.kvBytes
	}
	for _, e := range s.cached {
		st.KvBytes += e.ss.kvBytes
		st.CachedKvBytes += e.ss.kvBytes
	}
	st.Cached = uint32(len(s.cached))
	return st
}

// free drops a session; it reports whether the session was open here.
func (s *shard) free(session string) bool {
	s.mu.Lock()
	ss, ok := s.sessions[session]
	delete(s.sessions, session)
	s.markFreedLocked(session)
	s.mu.Unlock()
	if ok {
		s.activeAt.Store(time.Now().UnixNano())
		if ss.ar != nil {
			ss.ar.Close()
		}
		s.host.release(ss.kvBytes)
	}
	return ok
}

// markFreedLocked remembers that a session ended (s.mu held).
func (s *shard) markFreedLocked(session string) {
	s.freed.add(session)
}

// session returns the session's state, creating it on its first Forward.
func (s *shard) session(ctx actor.Context, m *messages.Forward) (*shardSession, error) {
	s.mu.Lock()
	ss, ok := s.sessions[m.Session]
	freed := s.freed.has(m.Session)
	s.mu.Unlock()
	if ok {
		if m.ReplyTo == nil || !wire.PID(m.ReplyTo).Equal(ss.origin) {
			return nil, fmt.Errorf("session %s belongs to another origin", m.Session)
		}
		return ss, nil
	}
	switch {
	case m.Session == "":
		return nil, fmt.Errorf("forward without a session")
	case freed:
		return nil, errSessionFreed
	case m.ReplyTo != nil && m.Resume != "":
		// Prompt caching: the session starts from a retained one.
		ss, err := s.adopt(m)
		if err != nil {
			return nil, err
		}
		return s.open(ctx, m, ss)
	case m.Position != 0:
		return nil, missedStep{fmt.Errorf("session %s is not open here (a session starts at position 0)", m.Session)}
	case m.ReplyTo == nil:
		return nil, fmt.Errorf("session %s has no reply_to: nobody could free it", m.Session)
	}
	ctxLen := int(m.Context)
	if ctxLen <= 0 || ctxLen > s.maxContext {
		return nil, fmt.Errorf("session %s asks for a context of %d; this node allows 1..%d", m.Session, ctxLen, s.maxContext)
	}
	var kv uint64
	if s.tp != nil {
		kv = s.tp.cacheBytes(ctxLen)
	} else {
		kv = s.m.CacheBytes(ctxLen)
	}
	if err := s.host.reserve(kv, fmt.Sprintf("the KV cache of session %s on %s", m.Session, s.pid.Id), s); err != nil {
		return nil, noMemory{err}
	}
	ss = &shardSession{kvBytes: kv, origin: wire.PID(m.ReplyTo)}
	if s.tp != nil {
		ss.tpc = s.tp.m.NewCache(ctxLen)
	} else {
		ss.cache = s.m.NewCache(ctxLen)
	}
	return s.open(ctx, m, ss)
}

// open makes ss (whose KV memory is reserved) the session m starts: its
// sampler on the last stage, and the watch on its origin. On error the
// memory is released.
func (s *shard) open(ctx actor.Context, m *messages.Forward, ss *shardSession) (*shardSession, error) {
	ss.watch = ss.origin
	if s.tp != nil && !s.tp.leads() {
		// A member's sessions end with its leader's relayed frees and
		// retains, which follow the session's steps in order (the leader
		// watches the origin). Watching the origin too, a member would
		// free a session the origin retains before the leader's relayed
		// retain arrives. Its leader's end ends them.
		ss.watch = ctx.Sender()
	}
	ctx.Watch(ss.watch)
	s.pinnedUntil.Store(0)
	s.activeAt.Store(time.Now().UnixNano())
	if s.m.IsLast() && (s.tp == nil || s.tp.leads()) {
		sp, err := sample.New(wire.Params(m.Sampling), s.m.Vocab)
		if err == nil && m.Sampling.GetConstrained() {
			err = s.constrain(ss, sp, m.Sampling)
		}
		if err != nil {
			s.host.release(ss.kvBytes)
			return nil, err
		}
		ss.sampler = sp
	}
	s.mu.Lock()
	s.sessions[m.Session] = ss
	s.mu.Unlock()
	return ss, nil
}

// receiveForward takes a step and answers its errors. release, when set,
// is called once m.Hidden has been read.
func (s *shard) receiveForward(ctx actor.Context, m *messages.Forward, release func()) {
	err := s.forward(ctx, m, release)
	if err != nil && s.tp == nil {
		s.stepFailed(ctx, m)
	}
	s.answerError(ctx, m, err)
}

// answerError tells a step's origin why the step failed (nothing for a
// freed session's).
func (s *shard) answerError(ctx actor.Context, m *messages.Forward, err error) {
	if err != nil && err != errSessionFreed && m.ReplyTo != nil {
		ctx.Send(wire.PID(m.ReplyTo), &messages.ForwardError{Session: m.Session, Stage: s.pid.Id, Error: s.host.label() + err.Error(),
			CacheMiss: errors.Is(err, errCacheMiss), Gap: errors.As(err, new(missedStep)), GroupFailed: errors.Is(err, errGroup),
			Busy: errors.As(err, new(noMemory))})
	}
}

// noMemory is the error for a session this stage has no memory for now:
// other sessions hold it, and the origin may try again.
type noMemory struct{ error }

// missedStep is the error for a Forward that follows a step this stage
// never got (an activation lost between stages): the origin replays.
type missedStep struct{ error }

// forward takes one step of a session: checked, then gathered into the
// batch this stage runs next (a tensor-parallel stage runs it at once).
// release, when set, is called as soon as m.Hidden has been read (the
// caller calls it again, harmlessly, on any path that returns before).
func (s *shard) forward(ctx actor.Context, m *messages.Forward, release func()) error {
	start := time.Now()
	n := int(m.Count)
	if n < 1 || n > wire.MaxBatch {
		return fmt.Errorf("forward of %d positions; 1..%d allowed", n, wire.MaxBatch)
	}
	if s.tp != nil && !s.tp.leads() && !s.tp.fromLeader(ctx.Sender()) {
		return fmt.Errorf("stage %s is a tensor-parallel member: it takes steps from its leader only", s.pid.Id)
	}
	if err := s.checkGuesses(m, n); err != nil {
		return err
	}
	// Accept lists the session's sequence so far (a replay sends it all
	// with its first chunk): no longer than the session's context, nor
	// than a context this node allows (each token costs the actor, which
	// every session of the model shares, a grammar step).
	if limit := min(int(m.Context), s.maxContext); len(m.Accept) > limit {
		return fmt.Errorf("forward at position %d accepts %d tokens; its context allows at most %d", m.Position, len(m.Accept), limit)
	}
	ss, err := s.session(ctx, m)
	if err != nil {
		if s.tp != nil && !s.tp.leads() {
			s.tp.abandon(m.Session) // the leader would wait for this member
		}
		return err
	}
	if s.tp == nil {
		if s.holds(m, ss, n) {
			s.hold(ctx, m, ss, release)
			return nil
		}
		return s.gather(ctx, m, ss, n, m.BatchFollows, start, release)
	}
	// A tensor-parallel leader relays m to its members, which may read it
	// after this step: it must not point into a receive slot. It works on
	// its own copy: releasing the slot (here and again by the caller)
	// clears the borrowed message's Hidden.
	if release != nil {
		m = proto.Clone(m).(*messages.Forward)
		release()
	}
	hidden, logits, err := s.tpStep(ctx, m, ss, n)
	if err != nil || !s.tp.leads() {
		return err // a member's part ends here: its leader passes the step on
	}
	return s.pass(ctx, m, ss, start, hidden, logits, 0)
}

// pass sends a step's result on: its hidden states to the next stage, or
// on the last stage the sampled token to the session's origin (and, with
// the shortcut, to the first stage). logits are the step's last row's, as
// a tensor-parallel group gathered them; nil: row of the stage's state,
// computed only when the step samples.
func (s *shard) pass(ctx actor.Context, m *messages.Forward, ss *shardSession, start time.Time, hidden, logits []float32, row int) error {
	if !s.m.IsLast() {
		if len(m.Route) == 0 {
			return fmt.Errorf("stage %s is not the last, but the message has no route onward", s.pid.Id)
		}
		next := &messages.Forward{
			Session: m.Session, Position: m.Position, Count: m.Count,
			Hidden: encodeHidden(hidden, m.HiddenType), HiddenType: m.HiddenType,
			Route: m.Route[1:], ReplyTo: m.ReplyTo, Context: m.Context, Sampling: m.Sampling,
			Accept: m.Accept, Sample: m.Sample, ComputeNs: m.ComputeNs + time.Since(start).Nanoseconds(),
			Resume: m.Resume, ChainUntil: m.ChainUntil, Loop: m.Loop, Guesses: m.Guesses, Draft: m.Draft, DraftUntil: m.DraftUntil,
		}
		s.send(ctx, m.Route[0], next)
		return nil
	}
	ss.noteDraft(m, s.m.Vocab)
	for i, t := range m.Accept {
		if t >= 0 && int(t) < s.m.Vocab {
			ss.sampler.Accept(int(t))
			// Accept lists the sequence from position 0: on a replay, the
			// tokens from schemaFrom on are the document so far.
			if ss.matcher != nil && i >= ss.schemaFrom {
				ss.matcher.Accept(int(t))
			}
		}
	}
	if !m.Sample {
		return nil
	}
	if len(m.Guesses) > 0 {
		return s.verify(ctx, m, ss, start, row, logits)
	}
	if logits == nil && s.tp == nil {
		var err error
		if logits, err = s.state.LogitsOf(row); err != nil {
			return err
		}
	}
	id := ss.sampler.Sample(logits)
	ss.sampler.Accept(id)
	pos := int(m.Position + m.Count)
	ss.drew(pos, int32(id))
	s.feedOn(ctx, m, ss, pos, id)
	own := time.Since(start).Nanoseconds()
	s.send(ctx, m.ReplyTo, &messages.Token{Session: m.Session, Position: m.Position + m.Count, Id: int32(id), ElapsedNs: own, ComputeNs: m.ComputeNs + own})
	return nil
}

// feedOn is the token shortcut on the last stage: the token id just
// sampled (or checked) after step m, for position pos, goes straight to
// the ring's first stage as the next step, when the session allows its
// position (Forward.chain_until, Chain), or is held until it does; with
// the guesses drafted here (draft.go), if any. The session sends that
// step itself when it did not allow it, so every step runs once.
func (s *shard) feedOn(ctx actor.Context, m *messages.Forward, ss *shardSession, pos, id int) {
	if m.ChainUntil > 0 && len(m.Loop) > 0 {
		// A copy: m may be borrowed from a receive slot, and the steps
		// sent on share the slice.
		ss.loop = make([]*messages.PID, 0, len(m.Loop))
		for _, p := range m.Loop {
			ss.loop = append(ss.loop, &messages.PID{Address: p.GetAddress(), Id: p.GetId()})
		}
		ss.chainUntil = max(ss.chainUntil, int(m.ChainUntil))
	}
	ss.held = nil
	if len(ss.loop) == 0 || (ss.draft != nil && pos > ss.draft.until) {
		return // the caller never feeds past draft_until: it stops before
	}
	next := &messages.Forward{Session: m.Session, Position: uint32(pos), Count: 1, Tokens: []int32{int32(id)},
		Route: ss.loop[1:], ReplyTo: &messages.PID{Address: m.ReplyTo.GetAddress(), Id: m.ReplyTo.GetId()}, HiddenType: m.HiddenType, Context: m.Context, Sample: true}
	if g := s.guessesAfter(ss, pos); len(g) > 0 {
		next.Guesses = g
		next.Tokens = append(next.Tokens, g...)
		next.Count += uint32(len(g))
	}
	if !ss.mayFeed(int(m.Position)) {
		ss.held, ss.heldAfter = next, int(m.Position)
		return
	}
	s.send(ctx, ss.loop[0], next)
}

// mayFeed reports whether the shortcut may feed the step that follows
// the step that started at after: the session allows one step ahead of
// its caller, the step after the one that samples the token at
// chain_until (which starts before it), wherever that one ends. For a
// plain step (one position) that is the step at chain_until itself; with
// drafting here a step spans several.
func (ss *shardSession) mayFeed(after int) bool { return after < ss.chainUntil }

// chain takes a session's leave to feed its tokens on up to m.Until
// (only from the session's origin), and sends a held step it covers.
func (s *shard) chain(ctx actor.Context, m *messages.Chain) {
	s.mu.Lock()
	ss, ok := s.sessions[m.Session]
	s.mu.Unlock()
	if !ok || len(ss.loop) == 0 || ctx.Sender() == nil || ctx.Sender().Address != ss.origin.Address {
		return
	}
	ss.chainUntil = max(ss.chainUntil, int(m.Until))
	if h := ss.held; h != nil && ss.mayFeed(ss.heldAfter) {
		ss.held = nil
		ctx.Send(wire.PID(ss.loop[0]), h)
	}
}

// checkGuesses refuses a step whose speculative guesses the stages cannot
// check: more guesses than rows after the first, ids outside the
// vocabulary, a step that does not sample or feeds on through the
// shortcut.
func (s *shard) checkGuesses(m *messages.Forward, n int) error {
	g := len(m.Guesses)
	switch {
	case g == 0:
		return nil
	case g > wire.MaxGuesses:
		return fmt.Errorf("a step with %d guesses; at most %d", g, wire.MaxGuesses)
	case g >= n || !m.Sample || m.ChainUntil != 0:
		return fmt.Errorf("a step of %d positions with %d guesses (sample %v, chain_until %d): guesses need a sampled step of more positions, without the shortcut", n, g, m.Sample, m.ChainUntil)
	}
	for _, t := range m.Guesses {
		if t < 0 || int(t) >= s.m.Vocab {
			return fmt.Errorf("guess %d outside the vocabulary of %d", t, s.m.Vocab)
		}
	}
	return nil
}

// verify is the last stage's end of a speculative step: it draws the
// token of each row from the first sampled one on, in order, with the
// session's sampler (as one-token steps would), and stops at the first
// draw that differs from the guess for the next position. The draws go
// to the session: the first as Token.id, the others as Token.more. row is
// the step's last row in the stage's state; logits, when not nil, are
// the rows' logits a tensor-parallel group gathered.
func (s *shard) verify(ctx actor.Context, m *messages.Forward, ss *shardSession, start time.Time, row int, logits []float32) error {
	rows := len(m.Guesses) + 1
	vocab := s.m.Vocab
	if logits == nil {
		if need := rows * vocab; cap(s.verifyLogits) < need {
			s.verifyLogits = make([]float32, need)
		}
		logits = s.verifyLogits[:rows*vocab]
		if err := s.state.LogitsRows(row-rows+1, rows, logits); err != nil {
			return err
		}
	}
	if len(logits) != rows*vocab {
		return fmt.Errorf("session %s: %d logits for %d rows of %d", m.Session, len(logits), rows, vocab)
	}
	var draws []int32
	for i := range rows {
		id := ss.sampler.Sample(logits[i*vocab : (i+1)*vocab])
		ss.sampler.Accept(id)
		draws = append(draws, int32(id))
		if i == rows-1 || int32(id) != m.Guesses[i] {
			break
		}
	}
	first := int(m.Position+m.Count) - len(m.Guesses)
	ss.drew(first, draws...)
	if ss.draft != nil {
		// The guesses were drafted here: the last draw goes on through
		// the shortcut, as a plain step's token does.
		ss.draft.guesser.Learn(len(m.Guesses), len(draws)-1)
		s.feedOn(ctx, m, ss, first+len(draws)-1, int(draws[len(draws)-1]))
	}
	own := time.Since(start).Nanoseconds()
	s.send(ctx, m.ReplyTo, &messages.Token{Session: m.Session, Position: uint32(first), Id: draws[0], More: draws[1:],
		Guessed: uint32(len(m.Guesses)), ElapsedNs: own, ComputeNs: m.ComputeNs + own})
	return nil
}

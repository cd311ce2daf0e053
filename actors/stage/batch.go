package stage

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"strata/actors/internal/wire"
	"strata/messages"
	"strata/runtime/model"
)

// Continuous batching on a stage. A shard does not run a step as it
// takes it: it gathers the step (its tokens, or its hidden states decoded
// into the stage's input rows) and sends itself a runBatch, which arrives
// after the Forwards already in its mailbox. Those join the batch (up to
// Model.InvariantRows rows in all: one-token steps, prompt chunks and
// speculative checks alike), and runBatch then runs them all as one
// forward pass (model.ForwardBatch: the weights read once for every
// session, each attending over its own cache), and passes each step on.
// Within the bound every row is computed as it would be alone, so a
// session's results do not depend on its company; a step of more rows
// than the bound (a prompt chunk of a float or Q8_0 model) runs alone, at
// once. One session alone waits for nothing. Any other message (a free,
// a chain, a watch's end) first runs the gathered batch, so it sees the
// sessions as it would have without batching.
//
// On a pipeline a batch stays whole from stage to stage: runBatch sends
// its steps on together, each Forward saying how many more of the batch
// follow it to the same stage (batch_follows), and the next stage waits
// for them (at most followWait) before it runs. Without that, the first
// step to arrive found the next stage idle and ran alone, and a pipeline
// of 3 stages under 8 streams ran batches of 1.6 sessions on average.

// A long prompt's chunks do not join the batch as they arrive: an origin
// sends a prompt's chunks all at once, and gathered in mailbox order they
// ran one after another before any step queued behind them (a 700-token
// prompt stopped 4 sessions' decoding for 7 s on one node). The shard
// holds back a chunk that would fill its batch (holds; a short prompt
// joins the batch as it comes) and runs it in its turns (runBatch's message):
// each turn first runs the steps gathered meanwhile (others' decoding)
// with the held chunks that fit beside them, then, if chunks are still
// held, a batch of those, and asks for another turn. Decoding then waits
// at most a chunk's batch a token, and a prompt still advances a chunk a
// turn however busy the shard is. A session's steps keep their order:
// once one is held, its later ones are held too. A free drops its
// session's held steps (runs them first if it retains the cache), and
// so does the end of their origin. Holding changes no result (the
// batches' rows are computed as alone), only when they run.

// heldStep is a step held back from the batch.
type heldStep struct {
	m  *messages.Forward
	ss *shardSession
}

// holds reports whether step m of session ss (n positions) is held back:
// a prompt chunk (several positions, no guesses) that would fill the
// batch (which would then run at once, before the steps queued behind
// it) or not fit beside its steps, and any step of a session with one
// held. A chunk with room to spare joins the batch as any step does.
func (s *shard) holds(m *messages.Forward, ss *shardSession, n int) bool {
	if n > 1 && len(m.Guesses) == 0 && s.batch.rows+n >= s.batch.limit {
		return true
	}
	for _, h := range s.held {
		if h.ss == ss {
			return true
		}
	}
	return false
}

// hold queues step m for a later turn (a copy if it lies in a receive
// slot, which is then given back) and makes sure a turn comes. When it
// runs, its batch_follows no longer counts: its company is long gone.
func (s *shard) hold(ctx actor.Context, m *messages.Forward, ss *shardSession, release func()) {
	if release != nil {
		m = proto.Clone(m).(*messages.Forward)
		release()
	}
	s.stepFailed(ctx, m) // not gathered: a batch waiting for it as its last waits no more
	s.held = append(s.held, heldStep{m: m, ss: ss})
	s.scheduleHeld(ctx)
}

// scheduleHeld asks for a turn if steps are held and none is on its way
// (a batch that waits for followers has its own way to a turn: its last
// step, a refusal or its deadline, each of which runs held steps after).
func (s *shard) scheduleHeld(ctx actor.Context) {
	if b := &s.batch; len(s.held) > 0 && !b.scheduled && b.awaiting == 0 {
		b.scheduled = true
		ctx.ActorSystem().Root.Send(ctx.Self(), runBatch{})
	}
}

// pullHeld gathers the oldest held steps into the batch while they fit
// beside its steps (into an empty batch, at least the oldest).
func (s *shard) pullHeld(ctx actor.Context) {
	b := &s.batch
	for len(s.held) > 0 {
		h := s.held[0]
		n := int(h.m.Count)
		if b.rows > 0 && (b.rows+n > b.limit || b.has(h.ss)) {
			return
		}
		s.held[0] = heldStep{}
		s.held = s.held[1:]
		s.gatherHeld(ctx, h)
		if len(b.steps) == 0 { // it ran (a step over the bound runs alone)
			return
		}
	}
}

// gatherHeld gathers held step h (its compute time counted from now).
func (s *shard) gatherHeld(ctx actor.Context, h heldStep) {
	if err := s.gather(ctx, h.m, h.ss, int(h.m.Count), 0, time.Now(), nil); err != nil {
		s.answerError(ctx, h.m, err)
	}
}

// runHeld runs a batch of held steps; steps still held get another turn.
func (s *shard) runHeld(ctx actor.Context) {
	if len(s.held) > 0 {
		s.pullHeld(ctx)
		s.runBatch(ctx)
	}
	s.scheduleHeld(ctx)
}

// takeHeld removes the held steps of sessions and returns them in order
// (the other sessions' stay held).
func (s *shard) takeHeld(sessions ...string) []heldStep {
	keep := s.held[:0]
	var taken []heldStep
	for _, h := range s.held {
		if slices.Contains(sessions, h.m.Session) {
			taken = append(taken, h)
		} else {
			keep = append(keep, h)
		}
	}
	clear(s.held[len(keep):])
	s.held = keep
	return taken
}

// runHeldOf runs, in order, the held steps of a session a message is
// about to retain, so that it sees the session as after those steps.
func (s *shard) runHeldOf(ctx actor.Context, session string) {
	for _, h := range s.takeHeld(session) {
		if b := &s.batch; b.rows+int(h.m.Count) > b.limit || b.has(h.ss) {
			s.runBatch(ctx)
		}
		s.gatherHeld(ctx, h)
	}
	s.runBatch(ctx)
}

// dropHeld forgets the held steps.
func (s *shard) dropHeld() {
	clear(s.held)
	s.held = nil
}

// runBatch is the shard's message to itself: run the gathered batch. A
// wait's deadline names the batch it waited for (deadline = the batch's
// gen + 1), and runs it only if that batch has not run meanwhile.
type runBatch struct{ deadline uint64 }

// followWait bounds how long a stage waits for the rest of a batch whose
// first steps arrived (the steps are sent back to back; a sender that
// dies between them, or a peer that promises steps it never sends, costs
// this much a batch). A variable for tests.
var followWait = 5 * time.Millisecond

// batch is the steps a shard has gathered and not run yet.
type batch struct {
	steps     []gathered
	rows      int  // the input rows they fill (state.X, or ids on the first stage)
	scheduled bool // a runBatch is on its way
	limit     int  // the most rows run together (Model.InvariantRows, at most wire.MaxBatch)
	segs      []model.Segment
	// awaiting is how many more steps of the sending stage's batch the
	// last step said follow it; gen counts the batches run; deadline is
	// the timer that ends this batch's wait (nil: none set).
	awaiting uint32
	gen      uint64
	deadline *time.Timer
	// While runBatch passes its steps on, the steps and tokens it sends
	// collect here, and go out together at its end.
	passing bool
	out     []outMessage
	// The last stage's sampled rows and their logits (runBatch).
	last   []int
	logits []float32
}

// logitsScratch returns n floats of the batch's logits scratch.
func (b *batch) logitsScratch(n int) []float32 {
	if cap(b.logits) < n {
		b.logits = make([]float32, n)
	}
	return b.logits[:n]
}

// gathered is one session's step in the batch.
type gathered struct {
	m     *messages.Forward
	ss    *shardSession
	row   int // its first row
	start time.Time
}

// gather checks session ss's step m (n positions) and adds it to the
// batch, its input in the batch's next rows; release is called once
// m.Hidden has been read.
func (s *shard) gather(ctx actor.Context, m *messages.Forward, ss *shardSession, n int, follows uint32, start time.Time, release func()) error {
	b := &s.batch
	s.takeDeferred(ctx) // steps deferred to even out groups go first (evenout.go)
	if b.rows+n > b.limit || b.has(ss) {
		s.runBatch(ctx) // room first; one step per session per batch
	}
	// A position before the cache's end rewinds it: a replay after a
	// failure, or a retried step, overwrites what was there.
	pos := int(m.Position)
	if pos > ss.cache.Len {
		return missedStep{fmt.Errorf("session %s: step at position %d, but the cache holds %d positions", m.Session, pos, ss.cache.Len)}
	}
	if room := min(ss.cache.Capacity, s.state.Capacity()); pos+n > room {
		return fmt.Errorf("session %s: context full: %d + %d positions exceed %d", m.Session, pos, n, room)
	}
	embd := s.m.Embd
	if s.m.IsFirst() {
		if len(m.Tokens) != n {
			return fmt.Errorf("first stage got %d tokens for %d positions", len(m.Tokens), n)
		}
		for i, t := range m.Tokens {
			s.ids[b.rows+i] = int(t)
		}
	} else if err := decodeHidden(s.state.X[b.rows*embd:(b.rows+n)*embd], m.Hidden, m.HiddenType); err != nil {
		return err
	}
	if release != nil {
		release() // m.Hidden is not read after this
	}
	ss.cache.Len = pos
	b.steps = append(b.steps, gathered{m: m, ss: ss, row: b.rows, start: start})
	b.rows += n
	if b.rows >= b.limit {
		s.runBatch(ctx) // full, or a step of more rows than the bound, alone
		return nil
	}
	// No more followers than the batch has room for (a peer's count is
	// a hint, not a claim on the stage's time).
	if b.awaiting = min(follows, uint32(b.limit-b.rows)); b.awaiting > 0 {
		if b.deadline == nil {
			self, deadline, root := ctx.Self(), b.gen+1, ctx.ActorSystem().Root
			b.deadline = time.AfterFunc(followWait, func() { root.Send(self, runBatch{deadline: deadline}) })
		}
		return nil
	}
	if !b.scheduled {
		b.scheduled = true
		// Straight to the mailbox, past the sender middleware (which
		// shapes links between nodes, not an actor's note to itself).
		ctx.ActorSystem().Root.Send(ctx.Self(), runBatch{})
	}
	return nil
}

// has reports whether the batch holds a step of session ss.
func (b *batch) has(ss *shardSession) bool {
	for _, g := range b.steps {
		if g.ss == ss {
			return true
		}
	}
	return false
}

// runBatch runs the gathered steps as one forward pass and passes each on
// (or answers its error).
func (s *shard) runBatch(ctx actor.Context) {
	b := &s.batch
	if len(b.steps) == 0 {
		return
	}
	b.gen, b.awaiting = b.gen+1, 0
	b.stopDeadline()
	if s.m.IsFirst() && !s.m.IsLast() {
		s.noteGroup()
	}
	b.segs = b.segs[:0]
	for _, g := range b.steps {
		b.segs = append(b.segs, model.Segment{Cache: g.ss.cache, N: int(g.m.Count)})
	}
	st, embd := s.state, s.m.Embd
	var err error
	if s.m.IsFirst() {
		err = st.Embed(s.ids[:b.rows])
	}
	if err == nil {
		err = st.ForwardBatch(b.segs)
	}
	if on := s.host.cfg.OnBatch; on != nil {
		on(len(b.steps), b.rows)
	}
	last := s.m.IsLast()
	b.passing = true
	defer func() { b.passing = false }() // a panic in a step must not leave sends collecting
	for i := 0; i < len(b.steps); {
		// On the last stage, the next steps that sample their last row
		// get their logits from one read of the output head.
		b.last = b.last[:0]
		for _, g := range b.steps[i:] {
			if !last || err != nil || !g.m.Sample || len(g.m.Guesses) > 0 || len(b.last) == model.LogitsGroup {
				break
			}
			b.last = append(b.last, g.row+int(g.m.Count)-1)
		}
		var logits []float32
		logitsErr := err
		if len(b.last) > 0 {
			logits = b.logitsScratch(len(b.last) * s.m.Vocab)
			logitsErr = st.LogitsAt(b.last, logits)
		}
		for k := range max(1, len(b.last)) {
			g := b.steps[i]
			stepErr := logitsErr
			if stepErr == nil {
				n := int(g.m.Count)
				var own []float32 // nil: pass computes them if the step samples
				if len(b.last) > 0 {
					own = logits[k*s.m.Vocab : (k+1)*s.m.Vocab : (k+1)*s.m.Vocab]
				}
				stepErr = s.pass(ctx, g.m, g.ss, g.start, st.X[g.row*embd:(g.row+n)*embd], own, g.row+n-1)
			}
			s.answerError(ctx, g.m, stepErr)
			i++
		}
	}
	s.sendCollected(ctx)
	clear(b.steps)
	b.steps, b.rows = b.steps[:0], 0
	s.scheduleHeld(ctx) // however the batch came to run, held steps get their turn
}

// outMessage is a message runBatch sends, and where to.
type outMessage struct {
	to *messages.PID
	m  proto.Message
}

// send sends m (a step on to the next stage, or a token to the session's
// origin) to: at once, or while runBatch passes its steps on, with the
// batch's others at its end.
func (s *shard) send(ctx actor.Context, to *messages.PID, m proto.Message) {
	if s.batch.passing {
		s.batch.out = append(s.batch.out, outMessage{to, m})
		return
	}
	ctx.Send(wire.PID(to), m)
}

// sendCollected sends what runBatch collected: first the steps, each
// telling how many more of them follow it to the same stage (the steps
// are on the pipeline's critical path: the token shortcut's next step is
// one), then the rest (tokens to origins) in their order. So an origin
// may hear of its next step's failure (a ForwardError from the first
// stage) before the token that step was fed: the session treats it as
// any failed step and replays, which draws that token again.
func (s *shard) sendCollected(ctx actor.Context) {
	out := s.batch.out
	for i, o := range out {
		fw, ok := o.m.(*messages.Forward)
		if !ok {
			continue
		}
		for _, later := range out[i+1:] {
			if _, step := later.m.(*messages.Forward); step && later.to.GetAddress() == o.to.GetAddress() && later.to.GetId() == o.to.GetId() {
				fw.BatchFollows++
			}
		}
		ctx.Send(wire.PID(o.to), fw)
	}
	for _, o := range out {
		if _, step := o.m.(*messages.Forward); !step {
			ctx.Send(wire.PID(o.to), o.m)
		}
	}
	clear(out)
	s.batch.out = out[:0]
}

// stopDeadline stops the timer of a wait, if one is set.
func (b *batch) stopDeadline() {
	if b.deadline != nil {
		b.deadline.Stop()
		b.deadline = nil
	}
}

// stepFailed tells the batch that step m was refused before it was
// gathered: if it was the last a batch waited for, the batch runs now,
// not at its deadline.
func (s *shard) stepFailed(ctx actor.Context, m *messages.Forward) {
	b := &s.batch
	if m.BatchFollows == 0 && b.awaiting > 0 {
		b.awaiting = 0
		if !b.scheduled {
			b.scheduled = true
			ctx.ActorSystem().Root.Send(ctx.Self(), runBatch{})
		}
	}
}

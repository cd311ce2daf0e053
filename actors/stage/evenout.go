package stage

import (
	"runtime"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/messages"
)

// Micro-batches on a pipeline. Under many streams a pipeline's sessions
// circle as groups: a batch stays whole from stage to stage, and the last
// stage's tokens come back to the first together. Left to arrivals, 8
// streams started at once circled as 3 + 5 and 12 as 8 + 4 on three
// stages. Two costs follow. The batch kernels take vectors four at a time
// (a short four padded), so 3 + 5 reads the weights for three fours where
// 4 + 4 needs two. And a stage is idle while no group is on it: S stages
// are all at work only with S groups in flight (vLLM's batch queue).
//
// So the first stage of a pipeline shapes its groups. When a batch of
// one-token steps is about to run, it counts the sessions circling: the
// batch's, and the others whose steps (prompts too) ran here since the
// batch's own sessions last did (a round); the groups are the batches of
// one-token steps those ran in. With T sessions and S stages that can
// compute at once it wants k = min(S, T/4 rounded up) groups of g = T/k
// rounded up to a four (below a four more groups cost weight reads and
// win no time). S counts distinct nodes of the route that are members:
// one for each elsewhere, and those on this machine as many as its cores
// hold this stage's threads (3 processes of 1 thread on 2 cores: 2; a
// group more than the cores run is one more read of every weight for no
// stage's time). Then:
//   - a batch of more than g steps runs its first g; the rest wait: if
//     fewer than k groups circle with this one, they are the next batch at
//     once, itself shaped (so 12 at once on three machines run as
//     4 + 4 + 4); else they are gathered into the next batch (another
//     group coming round), or run on their own after a round of their
//     session (timed from its last step here, at most a second) if
//     nothing comes;
//   - a batch of at most g steps runs as it is, unless more groups circle
//     with it than the stages compute at once (one would wait anyway):
//     then it waits (as above) to join the next.
// 3 + 5 on two or three stages becomes 4 + 4; 8 + 4 on three machines
// 4 + 4 + 4 (on 2 cores it stays 8 + 4); 8 alone on three stages 4 + 4;
// 1 + 1 + 1 on stages that compute one at a time one group of 3 (on
// stages of their own they stay apart: a one-vector product costs less
// than a padded four). With one session nothing changes. Nothing else
// changes either: a row's result does not depend on its batch, and a
// waiting step is its session's only step in flight (its next comes from
// its token).

// evenGrain is how many vectors the batch kernels take at a time.
const evenGrain = 4

// runDeferred is the shard's note to itself that deferred steps waited
// long enough (gen: the deferral it is for), or are to start a group of
// their own (shape: after evenOut, as another batch would be).
type runDeferred struct {
	gen   uint64
	shape bool
}

// deferral is the steps a first stage held back to shape its groups.
type deferral struct {
	steps []gathered
	gen   uint64 // counts deferrals; a runDeferred of an older one is stale
	timer *time.Timer
	// seq counts the batches run here; a session's ranSeq is the one
	// its last step ran in (ranOne: a one-token step). seqs is scratch
	// for counting groups.
	seq  uint64
	seqs []uint64
	// The stages of the last route that can compute at once
	// (stagesAtOnce), until when, the route's addresses and its distinct
	// nodes (scratch).
	stages      int
	stagesUntil time.Time
	route       []string
	nodes       []string
}

// circling counts the sessions other than the batch's whose steps ran
// here since the batch's own sessions last did (a session's prompt
// counts: its first token is on its way), and the batches of one-token
// steps (groups) they ran in.
func (s *shard) circling() (since uint64, others, groups int) {
	b, d := &s.batch, &s.deferred
	for _, g := range b.steps {
		if r := g.ss.ranSeq; r > 0 && (since == 0 || r < since) {
			since = r
		}
	}
	if since == 0 {
		// Sessions new here (no step of theirs ran, not even a prompt):
		// the batch before them is what they can be counted against (1
		// before the first: batches are numbered from 2).
		since = max(d.seq, 2) - 1
	}
	seqs := d.seqs[:0]
	s.mu.Lock()
	for _, ss := range s.sessions {
		if ss.ranSeq > since && !b.has(ss) {
			others++
			if ss.ranOne { // a prompt's batch is no group circling
				seqs = append(seqs, ss.ranSeq)
			}
		}
	}
	s.mu.Unlock()
	slices.Sort(seqs)
	d.seqs = slices.Compact(seqs)
	return since, others, len(d.seqs)
}

// evenOut defers the steps of the gathered batch that the pipeline's
// groups should not carry now (see above); only on the first stage of a
// pipeline.
func (s *shard) evenOut(ctx actor.Context) {
	b, d := &s.batch, &s.deferred
	if !s.m.IsFirst() || s.m.IsLast() || len(d.steps) > 0 || len(b.steps) == 0 {
		return
	}
	for _, g := range b.steps {
		if !oneToken(g) {
			return
		}
	}
	now := time.Now()
	n, stages := len(b.steps), s.stagesAtOnce(b.steps[0].m.Route, now)
	since, others, groups := s.circling()
	total := n + others
	k := min(stages, ceilDiv(total, evenGrain))
	size := ceilDiv(ceilDiv(total, k), evenGrain) * evenGrain
	keep := n
	var wait time.Duration
	switch {
	case n > size:
		keep = size
		if groups+1 >= k {
			wait = roundOf(b.steps[keep:], now)
		}
	case groups+1 > stages:
		keep, wait = 0, max(roundOf(b.steps, now), time.Millisecond)
	default:
		return
	}
	for _, g := range b.steps[keep:] {
		if g.ss.ranSeq == 0 {
			// New here: their round starts where this one did (so a
			// batch split again still counts the groups split off).
			g.ss.ranSeq = since
		}
	}
	d.steps = append(d.steps, b.steps[keep:]...)
	clear(b.steps[keep:])
	b.steps, b.rows = b.steps[:keep], keep
	if keep == 0 { // as if run: a later step starts a new batch
		b.gen, b.awaiting = b.gen+1, 0
		b.stopDeadline()
	}
	d.gen++
	self, gen, root := ctx.Self(), d.gen, ctx.ActorSystem().Root
	if wait == 0 {
		// A group of their own, after this batch (straight to the
		// mailbox: the shard's note to itself), itself shaped.
		root.Send(self, runDeferred{gen: gen, shape: true})
		return
	}
	d.timer = time.AfterFunc(wait, func() { root.Send(self, runDeferred{gen: gen}) })
}

// stagesAtOnce is how many stages of a pipeline (this one, then route)
// can compute at once: one a node elsewhere, and the nodes on this
// machine (HostConfig.Machines; this one among them) as many as its cores
// hold this stage's threads. Stages on one node share its pool, which runs
// one product at a time: they count once. Remembered for the last route
// seen, a few seconds (members come and go).
func (s *shard) stagesAtOnce(route []*messages.PID, now time.Time) int {
	d := &s.deferred
	route = route[:min(len(route), maxCountedStages)]
	if now.Before(d.stagesUntil) && slices.EqualFunc(route, d.route, func(p *messages.PID, a string) bool { return p.GetAddress() == a }) {
		return d.stages
	}
	d.route = d.route[:0]
	for _, p := range route {
		d.route = append(d.route, p.GetAddress())
	}
	nodes := append(d.nodes[:0], s.pid.GetAddress())
	for _, a := range d.route {
		if !slices.Contains(nodes, a) {
			nodes = append(nodes, a)
		}
	}
	d.nodes = nodes
	here, elsewhere := len(nodes), 0
	if count := s.host.cfg.Machines; count != nil {
		here, elsewhere = count(nodes)
	}
	threads := 1
	if p := s.host.cfg.Pool; p != nil {
		threads = p.Threads()
	}
	local := 0
	if here > 0 {
		local = min(here, max(1, hostCores()/threads))
	}
	d.stages = max(1, local+elsewhere)
	d.stagesUntil = now.Add(stagesFor)
	return d.stages
}

// maxCountedStages bounds the route stagesAtOnce reads (a peer's route
// may be long; 64 stages in groups of four already take 256 sessions).
const maxCountedStages = 64

// stagesFor is how long stagesAtOnce keeps its count.
const stagesFor = 5 * time.Second

// hostCores is how many cores this process may use (a variable for
// tests): GOMAXPROCS, which follows the CPU quota of a container.
var hostCores = func() int { return runtime.GOMAXPROCS(0) }

// roundOf is how long deferred steps wait for a batch to join: a round of
// their sessions (from their last step here), at least followWait, at
// most a second.
func roundOf(steps []gathered, now time.Time) time.Duration {
	wait := followWait
	for _, g := range steps {
		if round := now.Sub(g.ss.ranAt); !g.ss.ranAt.IsZero() && round > wait {
			wait = round
		}
	}
	return min(wait, time.Second)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// oneToken reports whether g is a one-token step (no prompt chunk, no
// speculative check).
func oneToken(g gathered) bool { return g.m.Count == 1 && len(g.m.Guesses) == 0 }

// noteGroup numbers the batch about to run and notes, for each of its
// sessions, when it ran, in which batch, and whether as a one-token step.
func (s *shard) noteGroup() {
	d := &s.deferred
	d.seq = max(d.seq+1, 2) // 0 is "never ran here", 1 a round's start before the first
	now := time.Now()
	for _, g := range s.batch.steps {
		g.ss.ranAt, g.ss.ranSeq, g.ss.ranOne = now, d.seq, oneToken(g)
	}
}

// takeDeferred gathers the deferred steps into the batch (which is empty
// while any are deferred: they go first into the next).
func (s *shard) takeDeferred(ctx actor.Context) {
	d := &s.deferred
	if len(d.steps) == 0 {
		return
	}
	steps := d.steps
	d.steps = nil
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	for _, g := range steps {
		if err := s.gather(ctx, g.m, g.ss, 1, 0, g.start, nil); err != nil {
			s.answerError(ctx, g.m, err)
		}
	}
}

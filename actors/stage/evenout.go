package stage

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Even groups on a pipeline. Under many streams a pipeline's sessions
// circle as groups: a batch stays whole from stage to stage, and the last
// stage's tokens come back to the first together. Which sessions make a
// group depends only on when they came, and a group never changes after:
// 8 streams started at once circled as groups of 3 and 5. That costs: the
// batch kernels take vectors four at a time (a short four padded), so a
// stage's products cost about as much for 5 rows as for 8 and for 3 as
// for 4 (Q4_K from memory, one thread: 0.53-0.59 ms a matrix at 3 or 4
// vectors, 0.70-0.83 at 5 to 8), and 3 + 5 reads the weights for three
// fours where 4 + 4 needs two.
//
// So the first stage of a pipeline evens out its groups. When a batch of
// one-token steps is about to run and the batch that ran before it was
// another group (none of its sessions) of one-token steps, and the two
// fit in fewer fours split evenly (each at most half of both, rounded up
// to a four), the steps over that share wait for the next batch: they
// are gathered first into it (the other group coming round, or whatever
// comes first), or run on their own after a round of their session
// (timed from its last step here, at most a second) if nothing comes.
// Nothing else changes: a row's result does not depend on its batch, and
// a deferred step is a session's only step in flight (its next comes
// from its token).

// evenGrain is how many vectors the batch kernels take at a time.
const evenGrain = 4

// runDeferred is the shard's note to itself that deferred steps waited
// long enough (gen: the deferral it is for).
type runDeferred struct{ gen uint64 }

// deferral is the steps a first stage held back to even out its groups.
type deferral struct {
	steps []gathered
	gen   uint64 // counts deferrals; a runDeferred of an older one is stale
	timer *time.Timer
	// The sessions of the batch that ran last, if it was one of
	// one-token steps (nil otherwise).
	lastGroup []*shardSession
}

// evenOut defers the steps of the gathered batch over its even share
// (see above); only on the first stage of a pipeline.
func (s *shard) evenOut(ctx actor.Context) {
	b, d := &s.batch, &s.deferred
	if !s.m.IsFirst() || s.m.IsLast() || len(d.steps) > 0 || len(d.lastGroup) == 0 {
		return
	}
	n, m := len(b.steps), len(d.lastGroup)
	share := (n + m + 1) / 2
	share = (share + evenGrain - 1) / evenGrain * evenGrain
	if n <= share {
		return
	}
	for _, g := range b.steps {
		if !oneToken(g) || slices.Contains(d.lastGroup, g.ss) {
			return
		}
	}
	now := time.Now()
	wait := followWait
	for _, g := range b.steps[share:] {
		if round := now.Sub(g.ss.ranAt); !g.ss.ranAt.IsZero() && round > wait {
			wait = round
		}
	}
	wait = min(wait, time.Second)
	d.steps = append(d.steps, b.steps[share:]...)
	clear(b.steps[share:])
	b.steps, b.rows = b.steps[:share], share
	d.gen++
	self, gen, root := ctx.Self(), d.gen, ctx.ActorSystem().Root
	d.timer = time.AfterFunc(wait, func() { root.Send(self, runDeferred{gen: gen}) })
}

// oneToken reports whether g is a one-token step (no prompt chunk, no
// speculative check).
func oneToken(g gathered) bool { return g.m.Count == 1 && len(g.m.Guesses) == 0 }

// noteGroup remembers the batch about to run as the last group (none if
// it is not all one-token steps) and when its sessions ran.
func (s *shard) noteGroup() {
	d := &s.deferred
	clear(d.lastGroup)
	d.lastGroup = d.lastGroup[:0]
	now, group := time.Now(), true
	for _, g := range s.batch.steps {
		g.ss.ranAt = now
		if group = group && oneToken(g); group {
			d.lastGroup = append(d.lastGroup, g.ss)
		}
	}
	if !group {
		clear(d.lastGroup)
		d.lastGroup = d.lastGroup[:0]
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

// Package session is one generation across a cluster, as a pure state
// machine: events go in (the prompt is ready, a plan or a load came back,
// a token arrived from the last stage, a stage was lost, a wait timed
// out, the caller fed a token back or stopped), and actions come out (plan,
// load, forward these positions, wait, probe, free, emit a token, finish).
// It has no goroutines, clock or network: a shell (strata/actors) carries
// out the actions and turns what happens into events, the way etcd's raft
// separates RawNode from its I/O.
//
// The core owns what makes a session recover correctly: which nodes are
// excluded from the next plan, how many times the ring was rebuilt, which
// answers are stale, and how a new ring replays what the old one had seen
// with the same batch boundaries as the uninterrupted run, so that greedy
// output does not change. With prompt caching, the first ring may resume
// a retained session's KV caches (prefill starts after the shared
// prefix), a failed resume falls back to the whole prompt once, and a
// clean end retains the ring instead of freeing it.
//
// The package example drives a session through a made-up ring.
package session

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"strata/actors/plan"
	"strata/runtime/engine"
)

// DefaultMaxRecoveries bounds how many times one session rebuilds its ring.
const DefaultMaxRecoveries = 8

// Config describes one session. Prompt, MaxBatch and Vocab are required.
type Config struct {
	Prompt   []int // token ids of the prompt, at positions 0..len-1
	MaxBatch int   // the most positions one Forward carries
	Vocab    int   // token ids the last stage may send are 0..Vocab-1
	// StepTimeout is how long one token may take before the ring is
	// probed; a (re)start's replay gets one StepTimeout per eight
	// messages on top. Only passed on in Wait actions.
	StepTimeout time.Duration
	// MaxRecoveries bounds the ring rebuilds; 0 = DefaultMaxRecoveries.
	MaxRecoveries int
	// PromptCache lets the first ring resume a retained session's KV
	// caches (Load.Resume), and retains the ring at a clean end (Retain)
	// instead of freeing it.
	PromptCache bool
	// ChainBelow turns on the token shortcut for the tokens fed at
	// positions below it: the last stage feeds the token it samples
	// straight to the first stage (one hop fewer per token), which the
	// session allows one token ahead (Forward.ChainUntil, then Chain as
	// it takes each token), so a stop costs at most one step computed in
	// vain. Set it to the first position the caller never feeds (the
	// context's room, or where the token limit ends); 0 = no shortcut.
	ChainBelow int
	// Draft (with ChainBelow) lets the last stage guess up to Draft tokens
	// after each token the shortcut feeds (n-gram lookup there,
	// Forward.Draft): its Tokens then carry More without guesses from the
	// caller. A Chain then allows the step after the one that samples the
	// awaited token, wherever it starts.
	Draft int
}

// Stage is one loaded stage of a ring: the shard actor Actor on node Node
// (whose actors have address Address) runs layers [First, End).
type Stage struct {
	Node, Address, Actor string
	First, End           int
	// TP lists the other members of a tensor-parallel stage (this Stage
	// is its leader): the session never sends them anything, but losing
	// one loses the stage.
	TP []Stage
}

// Nodes lists the nodes of the stage: its own, then its members'.
func (st Stage) Nodes() []string {
	out := []string{st.Node}
	for _, m := range st.TP {
		out = append(out, m.Node)
	}
	return out
}

// Event is something that happened, handed to Step.
type Event interface{ event() }

// Start begins the session: its prompt is ready.
type Start struct{}

// Planned is the answer to a Plan action: a placement, or why there is none.
type Planned struct {
	Plan plan.Plan
	Err  error // a *plan.RefusalError when the view is too small
}

// Loaded is the answer to a Load action. Ring is the loaded stages in
// order and ID a fresh session ID for them (never reused: a shard keeps
// a freed ID freed). Unreachable are the nodes that did not answer at
// all (At: when that was seen); Refused those that answered they cannot
// hold their shard (they could not fetch its layers), with RefusedErr
// their words; Err joins every failure. When the Load
// allowed it, Resume names a session the ring's stages retained whose KV
// caches hold the prompt's first Cached positions.
type Loaded struct {
	ID          string
	Ring        []Stage
	Unreachable []string
	Refused     []string
	RefusedErr  error
	At          time.Time
	Err         error
	Resume      string
	Cached      int
}

// ViewBack is the answer to an AwaitView action: the lost nodes heard
// from again since they were lost; none when the wait ran out.
type ViewBack struct{ Nodes []string }

// Token is a token from the last stage: the sample for Position (the
// position after the last one fed) of the ring Session.
type Token struct {
	Session  string
	Position int
	ID       int
	Compute  time.Duration // the stages' compute within the step
	// More, after a step with guesses (Next.Guesses, or the last stage's
	// own with Config.Draft): the draws after ID, for the positions after
	// it (each guess the last stage agreed with, then one more). Guessed
	// is how many guesses the step checked.
	More    []int
	Guessed int
}

// ForwardFailed is a stage's error for a Forward of the ring Session.
// Gap: the stage missed an earlier step (an activation lost between
// stages), which the ring recovers from like a lost message: rebuild,
// replay. Group marks the failure of a tensor-parallel stage's
// all-reduce (a member went silent or a link broke): the ring is probed,
// as after a Timeout, instead of the session ending.
type ForwardFailed struct {
	Session, Stage, Err string
	Gap                 bool
	Group               bool
	// Busy: the stage had no memory for the session's KV cache; the
	// session ends with a BusyError (its caller may try again later).
	Busy bool
}

// A BusyError ends a session that a stage had no memory for: the cluster
// is full with other sessions now (errors.Is(err, engine.ErrBusy)).
type BusyError struct{ Stage, Err string }

func (e *BusyError) Error() string { return fmt.Sprintf("stage %s: %s", e.Stage, e.Err) }

// Is makes a BusyError engine.ErrBusy.
func (e *BusyError) Is(target error) bool { return target == engine.ErrBusy }

// StageLost says a stage of the current ring went away (its actor
// stopped or its peer disconnected), seen at At.
type StageLost struct {
	Node  string
	Cause string
	At    time.Time
}

// Timeout says the Wait for Position ran out.
type Timeout struct{ Position int }

// Probed is the answer to a Probe action: the nodes whose stages did not
// answer, seen at At.
type Probed struct {
	Silent []string
	At     time.Time
}

// Next feeds the token the last Emit gave back into the ring: the caller
// wants the token after it. Guesses (speculative decoding) are tokens
// guessed to follow it: the ring runs them in the same step, and its last
// stage keeps those it agrees with (Token.More), so several tokens come
// back for one round. A token the shortcut fed already (see CanGuess)
// takes no guesses, nor one whose earlier guesses wait to be emitted.
//
// ChainBelow, when above Config.ChainBelow, raises it: the caller takes
// the tokens at positions below it without guesses, and the shortcut may
// feed them (a speculating caller whose guesses do not pay).
type Next struct {
	Token      int
	Guesses    []int
	ChainBelow int
}

// Stop ends a session that finished normally.
type Stop struct{}

// Cancel ends the session early with Err (the caller's context, or its
// callback's error).
type Cancel struct{ Err error }

func (Start) event()         {}
func (Planned) event()       {}
func (Loaded) event()        {}
func (ViewBack) event()      {}
func (Token) event()         {}
func (ForwardFailed) event() {}
func (StageLost) event()     {}
func (Timeout) event()       {}
func (Probed) event()        {}
func (Next) event()          {}
func (Stop) event()          {}
func (Cancel) event()        {}

// Action is something the shell must do, returned by Step in order.
type Action interface{ action() }

// Plan asks for a placement on the current view without the nodes in
// Exclude; answer with Planned.
type Plan struct{ Exclude []string }

// AwaitView asks the shell to watch the view for a while (the model does
// not fit without the lost nodes): answer with ViewBack, naming the nodes
// of Lost heard from after the time they were lost.
type AwaitView struct{ Lost map[string]time.Time }

// Load asks the stages' hosts to load their shards; answer with Loaded.
// Resume allows the ring to resume a retained session (prompt caching).
type Load struct {
	Plan   plan.Plan
	Resume bool
}

// Ring says a new ring is in use from now on: watch its stages (a lost
// one is a StageLost), list it.
type Ring struct {
	ID     string
	Stages []Stage
}

// Forward sends Tokens at positions Position.. to the ring's first stage.
// Open marks the ring's first message: it carries the sampler settings
// and Accept, every token before the first sampled position, for the last
// stage's penalties, and Resume, the retained session whose KV caches the
// stages adopt. Sample asks the last stage for the next token; ChainUntil
// (> 0) lets it feed that token, and later ones, to the first stage
// itself while their positions are at most ChainUntil (the shortcut).
type Forward struct {
	Session    string
	Position   int
	Tokens     []int
	Sample     bool
	Open       bool
	Accept     []int
	Resume     string
	ChainUntil int
	// Guesses are the last len(Guesses) of Tokens: the last stage checks
	// them (see Next).
	Guesses []int
	// Draft lets the last stage draft up to Draft guesses for the steps
	// it feeds, none at a position past DraftUntil (Config.Draft).
	Draft, DraftUntil int
}

// Chain lets ring Session's last stage feed the tokens it samples for
// positions up to Until to the first stage itself (the shortcut): the
// session will take the token before them.
type Chain struct {
	Session string
	Until   int
}

// Wait says the session now waits for the token at Position of ring
// Session; after Timeout without it, answer with Timeout.
type Wait struct {
	Session  string
	Position int
	Timeout  time.Duration
}

// Probe asks the stages of the ring whether they answer; answer with Probed.
type Probe struct{ Stages []Stage }

// Free releases ring Session's KV caches on its stages. The shell may
// wait for the stages to confirm, so the next ring finds the memory free.
type Free struct {
	Session string
	Stages  []Stage
}

// Retain ends ring Session keeping its KV caches on its stages, which hold
// Tokens, for a later session to resume (prompt caching).
type Retain struct {
	Session string
	Stages  []Stage
	Tokens  []int
}

// DropCache says the retained session the ring tried to resume is spent
// (a stage lost it or failed): free it on the stages that may still hold
// it. The session goes on without a cache.
type DropCache struct{}

// Emit hands the next generated token to the caller, who answers with
// Next (feed it back) or Stop. Step says it answers a single decode step
// (its round trip is a step time); the first token of a ring does not.
type Emit struct {
	Token   int
	Compute time.Duration
	Step    bool
}

// Log is a line for the operator about a recovery.
type Log struct{ Text string }

// Done ends the session: Err is nil after Stop.
type Done struct{ Err error }

func (Plan) action()      {}
func (AwaitView) action() {}
func (Load) action()      {}
func (Ring) action()      {}
func (Forward) action()   {}
func (Chain) action()     {}
func (Wait) action()      {}
func (Probe) action()     {}
func (Free) action()      {}
func (Retain) action()    {}
func (DropCache) action() {}
func (Emit) action()      {}
func (Log) action()       {}
func (Done) action()      {}

// phase is what the session waits for.
type phase int

const (
	idle     phase = iota // before Start
	planning              // a Planned
	settling              // a ViewBack
	loading               // a Loaded
	running               // a Token for pos
	probing               // a Probed
	emitted               // the caller's Next or Stop
	done
)

var phaseNames = [...]string{"idle", "planning", "settling", "loading", "running", "probing", "emitted", "done"}

func (p phase) String() string { return phaseNames[p] }

// Session is one generation's state. It is not safe for concurrent use:
// one shell goroutine steps it.
type Session struct {
	cfg   Config
	seq   []int // every token the ring must have seen: the prompt, then each token fed back
	phase phase
	id    string  // the current ring's session ID
	ring  []Stage // the current ring (nil between rings)
	pos   int     // the position whose token the session waits for
	// chained is the highest position whose token the current ring's last
	// stage feeds to its first stage itself (0: none); with Config.Draft,
	// the highest position of a token whose step's last draw it feeds.
	// tokPos is the position of the last Token taken.
	chained  int
	tokPos   int
	step     bool // the awaited token answers a single decode step
	excluded map[string]time.Time
	// refused are the nodes that said they cannot hold their shard: out
	// of every later plan of this session (being heard from does not bring
	// them back), refusedErr their words for a plan that fails without
	// them.
	refused    map[string]bool
	refusedErr error
	recoveries int
	refusal    error // the plan refusal a settle may lift
	lostLater  *StageLost
	err        error
	// Prompt caching: the ring resumed a retained session and has not
	// answered yet; resuming failed once (never again this session).
	resumed, noCache bool
	// Speculative decoding: the guesses of the awaited step, and the
	// checked tokens not yet emitted (the ring's caches hold them, all
	// but the last). drafted and accepted count the last stage's own
	// guesses (Config.Draft) and those it kept.
	guessed, ahead    []int
	drafted, accepted int
}

// New returns a session that has not started.
func New(cfg Config) (*Session, error) {
	switch {
	case len(cfg.Prompt) == 0:
		return nil, errors.New("session: empty prompt")
	case cfg.MaxBatch < 1:
		return nil, fmt.Errorf("session: MaxBatch %d; at least 1", cfg.MaxBatch)
	case cfg.Vocab < 1:
		return nil, fmt.Errorf("session: vocabulary of %d tokens", cfg.Vocab)
	}
	if cfg.MaxRecoveries <= 0 {
		cfg.MaxRecoveries = DefaultMaxRecoveries
	}
	return &Session{cfg: cfg, seq: slices.Clone(cfg.Prompt), excluded: map[string]time.Time{}, refused: map[string]bool{}}, nil
}

// Recoveries is how many times the session rebuilt its ring.
func (s *Session) Recoveries() int { return s.recoveries }

// Ring returns the current ring's session ID and stages (nil between rings).
func (s *Session) Ring() (string, []Stage) { return s.id, s.ring }

// Fed is every token the ring has been given: the prompt, then the fed-back tokens.
func (s *Session) Fed() []int { return s.seq }

// Ahead is how many checked tokens wait to be emitted (each Next emits
// the next of them without a step).
func (s *Session) Ahead() int { return len(s.ahead) }

// StageGuesses counts the guesses the last stage drafted itself
// (Config.Draft) and those of them it kept, less the kept ones a new
// ring drew again.
func (s *Session) StageGuesses() (drafted, accepted int) { return s.drafted, s.accepted }

// CanGuess reports whether the next Next may carry guesses: no checked
// tokens wait, and the shortcut has not fed the token it feeds already.
func (s *Session) CanGuess() bool { return len(s.ahead) == 0 && len(s.seq) > s.chained }

// Excluded lists the nodes left out of the next plan, sorted.
func (s *Session) Excluded() []string {
	out := slices.Collect(maps.Keys(s.excluded))
	for n := range s.refused {
		if _, ok := s.excluded[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Err is the error the session finished with (nil while running or after Stop).
func (s *Session) Err() error { return s.err }

// Finished reports whether the session has sent Done.
func (s *Session) Finished() bool { return s.phase == done }

// Step takes one event and returns the actions it calls for, in order.
// Events that do not fit the session's phase (a stale token, a second
// answer) return none.
func (s *Session) Step(ev Event) []Action {
	if s.phase == done {
		return nil
	}
	switch ev := ev.(type) {
	case Start:
		if s.phase == idle {
			return s.attempt()
		}
	case Cancel:
		return s.finish(ev.Err)
	case Planned:
		if s.phase == planning {
			return s.planned(ev)
		}
	case ViewBack:
		if s.phase == settling {
			return s.viewBack(ev)
		}
	case Loaded:
		if s.phase == loading {
			return s.loaded(ev)
		}
	case Token:
		if s.phase == running && ev.Session == s.id && ev.Position == s.pos {
			return s.token(ev)
		}
	case ForwardFailed:
		if ev.Group && ev.Session == s.id {
			// Every member may report it: the first probes, the others
			// find the session probing (or already on a new ring).
			if s.phase == running {
				s.phase = probing
				return []Action{Log{Text: fmt.Sprintf("session %s: stage %s: %s; probing the ring", s.id, ev.Stage, ev.Err)}, Probe{Stages: s.ring}}
			}
			return nil
		}
		if s.ring != nil && ev.Session == s.id {
			if ev.Gap && s.phase == running {
				return s.recover("", fmt.Sprintf("stage %s missed an activation: %s", ev.Stage, ev.Err), time.Time{})
			}
			if ev.Busy {
				return s.failed(&BusyError{Stage: ev.Stage, Err: ev.Err})
			}
			return s.failed(fmt.Errorf("stage %s: %s", ev.Stage, ev.Err))
		}
	case StageLost:
		return s.stageLost(ev)
	case Timeout:
		if s.phase == running && ev.Position == s.pos {
			s.phase = probing
			return []Action{Probe{Stages: s.ring}}
		}
	case Probed:
		if s.phase == probing {
			return s.probed(ev)
		}
	case Next:
		if s.phase == emitted {
			return s.next(ev.Token, ev.Guesses, ev.ChainBelow)
		}
	case Stop:
		if s.phase == emitted {
			if s.cfg.PromptCache && s.ring != nil {
				// A clean end: the stages keep the KV caches, which hold
				// every token fed, for the conversation's next turn.
				r := Retain{Session: s.id, Stages: s.ring, Tokens: s.seq}
				s.ring = nil
				return append([]Action{r}, s.finish(nil)...)
			}
			return s.finish(nil)
		}
	}
	return nil
}

// attempt plans a new ring: after freeing the old one, unless the
// session has lost too many.
func (s *Session) attempt() []Action {
	// Checked tokens not yet emitted are the old ring's: the new one
	// samples them again.
	if s.cfg.Draft > 0 {
		s.accepted -= len(s.ahead) // the last stage's own guesses
	}
	s.guessed, s.ahead = nil, nil
	if s.recoveries > s.cfg.MaxRecoveries {
		return s.finish(fmt.Errorf("session lost its ring %d times; giving up", s.recoveries))
	}
	acts := s.free()
	s.phase = planning
	return append(acts, Plan{Exclude: s.Excluded()})
}

func (s *Session) planned(ev Planned) []Action {
	if ev.Err != nil {
		// The model may not fit without the nodes this session lost; a
		// lost link is not always a lost node, so the view gets a while
		// to show them again.
		var refusal *plan.RefusalError
		if errors.As(ev.Err, &refusal) && s.refusedErr != nil {
			// Say why the nodes left out are: their words, not only "too
			// little memory".
			ev.Err = fmt.Errorf("%w (left out: %v)", ev.Err, s.refusedErr)
		}
		if errors.As(ev.Err, &refusal) && len(s.excluded) > 0 {
			s.phase, s.refusal = settling, ev.Err
			return []Action{AwaitView{Lost: maps.Clone(s.excluded)}}
		}
		return s.finish(ev.Err)
	}
	s.phase = loading
	return []Action{Load{Plan: ev.Plan, Resume: s.cfg.PromptCache && !s.noCache && s.recoveries == 0}}
}

func (s *Session) viewBack(ev ViewBack) []Action {
	var back []string
	for _, n := range ev.Nodes {
		if _, ok := s.excluded[n]; ok {
			delete(s.excluded, n)
			back = append(back, n)
		}
	}
	if len(back) == 0 {
		return s.finish(s.refusal)
	}
	slices.Sort(back)
	s.recoveries++
	return append([]Action{Log{Text: fmt.Sprintf("session: nodes %v are heard from again; trying them again", back)}}, s.attempt()...)
}

func (s *Session) loaded(ev Loaded) []Action {
	if len(ev.Unreachable) > 0 || len(ev.Refused) > 0 {
		var acts []Action
		for _, n := range ev.Unreachable {
			s.excluded[n] = ev.At
		}
		if len(ev.Unreachable) > 0 {
			acts = append(acts, Log{Text: fmt.Sprintf("session: nodes %v did not answer LoadShard; re-planning without them", ev.Unreachable)})
		}
		for _, n := range ev.Refused {
			s.refused[n] = true
		}
		if len(ev.Refused) > 0 {
			s.refusedErr = errors.Join(s.refusedErr, ev.RefusedErr)
			acts = append(acts, Log{Text: fmt.Sprintf("session: nodes %v cannot hold their shards (%v); re-planning without them", ev.Refused, ev.RefusedErr)})
		}
		s.recoveries++
		return append(acts, s.attempt()...)
	}
	if ev.Err != nil {
		return s.finish(ev.Err)
	}
	s.id, s.ring = ev.ID, ev.Ring
	acts := []Action{Ring{ID: s.id, Stages: s.ring}}

	// The prompt goes in chunks of MaxBatch, and on a replay each fed-back
	// token goes alone, all without waiting: the same batches as the
	// uninterrupted run, so the KV caches come out bit for bit the same
	// (batched and one-token kernels may round differently) and greedy
	// output does not change. Only the last message samples.
	//
	// A ring that resumes a retained session starts its batches after the
	// positions it reuses (it may round differently from a run without
	// the cache).
	promptLen, seq := len(s.cfg.Prompt), s.seq
	skip := 0
	if ev.Resume != "" && ev.Cached > 0 && ev.Cached < promptLen && len(seq) == promptLen {
		skip, s.resumed = ev.Cached, true
	}
	for i := skip; i < promptLen; i += s.cfg.MaxBatch {
		end := min(i+s.cfg.MaxBatch, promptLen)
		f := Forward{Session: s.id, Position: i, Tokens: seq[i:end], Sample: end == len(seq)}
		if i == skip {
			f.Open, f.Accept = true, seq
			if s.resumed {
				f.Resume = ev.Resume
			}
		}
		acts = append(acts, f)
	}
	for i := promptLen; i < len(seq); i++ {
		acts = append(acts, Forward{Session: s.id, Position: i, Tokens: seq[i : i+1], Sample: i+1 == len(seq)})
	}
	// The shortcut starts with the ring's first token: it may be fed on
	// before the caller has seen it.
	s.chained = 0
	if f := acts[len(acts)-1].(Forward); len(seq) < s.cfg.ChainBelow {
		f.ChainUntil, s.chained = len(seq), len(seq)
		acts[len(acts)-1] = f
	}
	for i, a := range acts {
		if f, ok := a.(Forward); ok {
			acts[i] = s.drafting(f)
		}
	}
	s.phase, s.pos, s.step = running, len(seq), false
	return append(acts, Wait{Session: s.id, Position: s.pos, Timeout: s.waitTimeout()})
}

func (s *Session) token(ev Token) []Action {
	if ev.ID < 0 || ev.ID >= s.cfg.Vocab {
		return s.failed(fmt.Errorf("the last stage sent token id %d, outside the vocabulary", ev.ID))
	}
	// After a step with guesses, More holds the draws that followed: each
	// draw but the last equal to its guess, no more than one per guess.
	// The last stage's own guesses (Config.Draft) the session does not
	// know: only their number is bounded.
	guessed := len(s.guessed)
	own := guessed == 0 && s.stageDrafts()
	if own {
		guessed = min(ev.Guessed, s.cfg.Draft)
	}
	if len(ev.More) > guessed {
		return s.failed(fmt.Errorf("the last stage sent %d tokens after %d guesses", len(ev.More)+1, guessed))
	}
	prev := ev.ID
	for i, t := range ev.More {
		if t < 0 || t >= s.cfg.Vocab {
			return s.failed(fmt.Errorf("the last stage sent token id %d, outside the vocabulary", t))
		}
		if !own && prev != s.guessed[i] {
			return s.failed(fmt.Errorf("the last stage went on after token %d, which differs from the guess %d", prev, s.guessed[i]))
		}
		prev = t
	}
	if own {
		s.drafted += guessed
		s.accepted += len(ev.More)
	}
	s.ahead, s.guessed = append(s.ahead[:0], ev.More...), nil
	s.tokPos = ev.Position
	s.resumed = false // the stages adopted the retained session
	s.phase = emitted
	return []Action{Emit{Token: ev.ID, Compute: ev.Compute, Step: s.step}}
}

func (s *Session) next(tok int, guesses []int, chainBelow int) []Action {
	s.seq = append(s.seq, tok)
	if lost := s.lostLater; lost != nil {
		// A stage went while the caller held the token: rebuild now,
		// replaying the token just fed back too.
		s.lostLater = nil
		return s.recover(lost.Node, lost.Cause, lost.At)
	}
	if len(s.ahead) > 0 {
		// The ring checked the next token with tok's step already: it
		// holds tok, and the next token is known.
		id := s.ahead[0]
		s.ahead = s.ahead[1:]
		s.pos = len(s.seq)
		return []Action{Emit{Token: id}}
	}
	pos := len(s.seq) - 1
	s.cfg.ChainBelow = max(s.cfg.ChainBelow, chainBelow)
	if len(guesses) > 0 && pos > s.chained && len(guesses) < s.cfg.MaxBatch {
		s.phase, s.pos, s.step = running, len(s.seq), true
		s.guessed = slices.Clone(guesses)
		tokens := append(slices.Clone(s.seq[pos:]), guesses...)
		return []Action{Forward{Session: s.id, Position: pos, Tokens: tokens, Sample: true, Guesses: s.guessed},
			Wait{Session: s.id, Position: s.pos, Timeout: s.cfg.StepTimeout}}
	}
	s.phase, s.pos, s.step = running, len(s.seq), true
	// The token after this one may be fed on by the last stage too, one
	// token ahead of the caller (with Config.Draft, one step: the step
	// after the one that samples the token at s.pos).
	until := 0
	if s.pos < s.cfg.ChainBelow {
		until = s.pos
	}
	var acts []Action
	if s.tokPos <= s.chained {
		// The last stage has fed tok to the first stage already.
		if until > 0 {
			acts = append(acts, Chain{Session: s.id, Until: until})
		}
	} else {
		acts = append(acts, s.drafting(Forward{Session: s.id, Position: pos, Tokens: s.seq[pos:], Sample: true, ChainUntil: until}))
	}
	s.chained = max(s.chained, until)
	return append(acts, Wait{Session: s.id, Position: s.pos, Timeout: s.cfg.StepTimeout})
}

func (s *Session) stageLost(ev StageLost) []Action {
	if !slices.ContainsFunc(s.ring, func(st Stage) bool { return slices.Contains(st.Nodes(), ev.Node) }) {
		return nil // not (or no longer) a stage of this ring
	}
	switch s.phase {
	case running:
		return s.recover(ev.Node, ev.Cause, ev.At)
	case emitted:
		s.lostLater = &ev
	}
	return nil
}

func (s *Session) probed(ev Probed) []Action {
	// A stage that is stuck (its node still heartbeats, so the view keeps
	// it), or a message lost on a cut link: the stages that do not answer
	// the probe either are left out of the next ring.
	cause := fmt.Sprintf("no token for position %d within %v", s.pos, s.waitTimeout())
	node := ""
	if len(ev.Silent) > 0 {
		node, cause = ev.Silent[0], cause+"; it does not answer"
		for _, n := range ev.Silent[1:] {
			s.excluded[n] = ev.At
		}
	}
	return s.recover(node, cause, ev.At)
}

// stageDrafts reports whether the last stage drafts guesses for the
// steps it feeds (Config.Draft, with the shortcut).
func (s *Session) stageDrafts() bool { return s.cfg.Draft > 0 && s.cfg.ChainBelow > 0 }

// drafting gives f the last stage's drafting settings (Config.Draft).
func (s *Session) drafting(f Forward) Forward {
	if s.stageDrafts() {
		f.Draft, f.DraftUntil = s.cfg.Draft, s.cfg.ChainBelow-1
	}
	return f
}

// waitTimeout is the timeout of the current wait.
func (s *Session) waitTimeout() time.Duration {
	if s.step {
		return s.cfg.StepTimeout
	}
	n := (len(s.cfg.Prompt)+s.cfg.MaxBatch-1)/s.cfg.MaxBatch + len(s.seq) - len(s.cfg.Prompt)
	return s.cfg.StepTimeout * time.Duration(1+n/8)
}

// failed ends the session with err, unless the ring's first answer failed
// while it resumed a retained session: then the cache is dropped and the
// whole prompt runs on a fresh ring.
func (s *Session) failed(err error) []Action {
	if !s.resumed {
		return s.finish(err)
	}
	acts := s.dropCache()
	acts = append(acts, Log{Text: fmt.Sprintf("session %s: the prompt cache could not be used (%v); running the whole prompt", s.id, err)})
	return append(acts, s.attempt()...)
}

// dropCache gives up a resumed retained session, for good.
func (s *Session) dropCache() []Action {
	if !s.resumed {
		return nil
	}
	s.resumed, s.noCache = false, true
	return []Action{DropCache{}}
}

// recover rebuilds the ring without node ("" when none is to blame: a
// message lost on a cut link) and replays what the ring had seen.
func (s *Session) recover(node, cause string, at time.Time) []Action {
	what := "the ring stalled (" + cause + ")"
	if node != "" {
		what = fmt.Sprintf("node %s left the session's ring (%s)", node, cause)
		s.excluded[node] = at
	}
	s.recoveries++
	acts := s.dropCache()
	acts = append(acts, Log{Text: fmt.Sprintf("session %s: %s; re-planning and replaying %d tokens", s.id, what, len(s.seq))})
	return append(acts, s.attempt()...)
}

// free releases the current ring, if any.
func (s *Session) free() []Action {
	if s.ring == nil {
		return nil
	}
	f := Free{Session: s.id, Stages: s.ring}
	s.ring = nil
	return []Action{f}
}

func (s *Session) finish(err error) []Action {
	acts := append(s.dropCache(), s.free()...)
	s.phase, s.err = done, err
	return append(acts, Done{Err: err})
}

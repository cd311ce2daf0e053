package origin

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/plan"
	"strata/messages"
	"strata/runtime/engine"
	"strata/runtime/model"
)

// Options tunes an Origin. Zero values pick the defaults noted.
type Options struct {
	// PlanContext is the KV cache positions placement reserves per session
	// (and the most a session may use); 0 = min(model context, model.DefaultContext). It
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
	// Placer computes placements; nil = plan.Place. It must be a
	// deterministic function of its inputs (every node computes the plans
	// of the sessions it starts), never place more than fits, and return a
	// *plan.RefusalError when the nodes are too small: a session that lost
	// a node then waits for the view to settle.
	Placer Placer
	// Placement is the kind of plan Placer's default computes (see
	// plan.PlaceMode): the zero value, plan.Pipeline, is plan.Place;
	// plan.Auto the cost model's fastest candidate; plan.TensorParallel
	// and plan.Hybrid prefer those shapes. Ignored when Placer is set.
	Placement plan.Mode
	// Experts is how the tensor-parallel groups of those plans hold a
	// mixture-of-experts model's routed experts: the zero value,
	// plan.ExpertsAuto, is the cost model's choice per group. Like
	// Placement, every node should use the same: each computes the plans
	// of the sessions it starts. Ignored when Placer is set.
	Experts plan.ExpertMode
	// Link is the link the cost model assumes between members that have
	// not measured theirs; zero = plan.LinkPresets["tcp"].
	Link plan.Link
	// SenderMiddleware wraps every message the sessions started here send
	// (to first stages, and their probes and frees); nil = none. With
	// HostConfig.SenderMiddleware it shapes or cuts in-process links.
	SenderMiddleware []actor.SenderMiddleware
	// Speculate is the speculation source of requests that name none
	// (engine.Request.Speculate): "" or off, ngram, draft. With ngram
	// and the shortcut, the last stage drafts the guesses itself for the
	// steps it feeds (session.Config.Draft). Otherwise a speculating
	// session sends guesses with its steps, which the last stage checks
	// (see strata/actors/session); it gives up the token shortcut while
	// it guesses, and guesses where that is measured faster than plain
	// steps with the shortcut (engine's pace.go).
	Speculate string
	// GuessEveryStep guesses at every step, also where plain steps are
	// faster: for tests, and for measuring speculation itself. (The
	// last stage's own n-gram guesses are not paced.)
	GuessEveryStep bool
	// Draft is the draft model for the draft source, run on this node
	// (the session's origin); nil = none.
	Draft *engine.Engine
	// Metrics hears the timing of every decode step; nil = none.
	Metrics Metrics
	// Logger receives one line per recovery and one per session (its
	// outcome, tokens, rates and recoveries); nil = silent.
	Logger *slog.Logger
	// PromptCache is how many finished sessions' KV caches this origin
	// keeps on their stages for prompt caching (prefixcache.go); 0 = 16,
	// negative = none. The stages drop entries sooner when they need the
	// memory.
	PromptCache int
	// NoShortcut turns the token shortcut off: every token goes from the
	// last stage to the session and from there to the first stage (one
	// hop more per token), as before the shortcut; for comparisons.
	NoShortcut bool
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

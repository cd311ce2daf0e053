package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"strata/actors/plan"
)

// brief writes an action as one short line, for tables.
func brief(a Action) string {
	switch a := a.(type) {
	case Plan:
		return fmt.Sprintf("plan -%v", a.Exclude)
	case AwaitView:
		var lost []string
		for n := range a.Lost {
			lost = append(lost, n)
		}
		return fmt.Sprintf("await %v", lost)
	case Load:
		if a.Resume {
			return "load " + stagesOf(a.Plan) + " may resume"
		}
		return "load " + stagesOf(a.Plan)
	case Ring:
		var nodes []string
		for _, s := range a.Stages {
			nodes = append(nodes, s.Node)
		}
		return fmt.Sprintf("ring %s %s", a.ID, strings.Join(nodes, ","))
	case Forward:
		s := fmt.Sprintf("fwd %s %d+%d", a.Session, a.Position, len(a.Tokens))
		if a.Open {
			s += fmt.Sprintf(" open(%d)", len(a.Accept))
		}
		if a.Resume != "" {
			s += " resume " + a.Resume
		}
		if a.Sample {
			s += " sample"
		}
		if a.ChainUntil > 0 {
			s += fmt.Sprintf(" chain<=%d", a.ChainUntil)
		}
		if len(a.Guesses) > 0 {
			s += fmt.Sprintf(" guesses%v", a.Guesses)
		}
		if a.Draft > 0 {
			s += fmt.Sprintf(" draft%d<=%d", a.Draft, a.DraftUntil)
		}
		return s
	case Chain:
		return fmt.Sprintf("chain %s <=%d", a.Session, a.Until)
	case Wait:
		return fmt.Sprintf("wait %s %d %v", a.Session, a.Position, a.Timeout)
	case Probe:
		return fmt.Sprintf("probe %d", len(a.Stages))
	case Free:
		return "free " + a.Session
	case Retain:
		return fmt.Sprintf("retain %s %d", a.Session, len(a.Tokens))
	case DropCache:
		return "drop cache"
	case Emit:
		if a.Step {
			return fmt.Sprintf("emit %d step", a.Token)
		}
		return fmt.Sprintf("emit %d", a.Token)
	case Log:
		return "log " + a.Text
	case Done:
		return fmt.Sprintf("done %v", a.Err)
	}
	return fmt.Sprintf("%T", a)
}

func stagesOf(p plan.Plan) string {
	var nodes []string
	for _, s := range p.Stages {
		nodes = append(nodes, s.Node)
	}
	return strings.Join(nodes, ",")
}

// ring3 is a plan of three stages over five layers.
func ringPlan(nodes ...string) plan.Plan {
	var p plan.Plan
	for i, n := range nodes {
		p.Stages = append(p.Stages, plan.Stage{Node: n, First: i, End: i + 1})
	}
	return p
}

func loaded(id string, p plan.Plan) Loaded {
	ev := Loaded{ID: id}
	for _, s := range p.Stages {
		ev.Ring = append(ev.Ring, Stage{Node: s.Node, Address: "addr-" + s.Node, Actor: "shard-" + s.Node, First: s.First, End: s.End})
	}
	return ev
}

var (
	t0      = time.Unix(1000, 0)
	errStop = errors.New("callback failed")
	refusal = &plan.RefusalError{Model: "m", WeightBytes: 10, OfferedBytes: 5, Nodes: 2, Context: 512, Sessions: 1}
)

// step is one line of a script: an event, and the actions it must cause.
type step struct {
	ev   Event
	want []string
}

func prompt(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 1 + i%7
	}
	return p
}

func newSession(t *testing.T, promptLen int, cache bool) *Session {
	t.Helper()
	s, err := New(Config{Prompt: prompt(promptLen), MaxBatch: 4, Vocab: 100, StepTimeout: time.Second, MaxRecoveries: 3, PromptCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start is the script of a session that starts on ring a (n0,n1,n2) with
// a prompt of 10 tokens and gets its first token, 50.
var start = []step{
	{Start{}, []string{"plan -[]"}},
	{Planned{Plan: ringPlan("n0", "n1", "n2")}, []string{"load n0,n1,n2"}},
	{loaded("a", ringPlan("n0", "n1", "n2")), []string{"ring a n0,n1,n2", "fwd a 0+4 open(10)", "fwd a 4+4", "fwd a 8+2 sample", "wait a 10 1s"}},
	{Token{Session: "a", Position: 10, ID: 50}, []string{"emit 50"}},
}

// decode feeds back token and gets next, on ring id at position pos.
func decode(id string, pos, token, next int) []step {
	return []step{
		{Next{Token: token}, []string{fmt.Sprintf("fwd %s %d+1 sample", id, pos), fmt.Sprintf("wait %s %d 1s", id, pos+1)}},
		{Token{Session: id, Position: pos + 1, ID: next}, []string{fmt.Sprintf("emit %d step", next)}},
	}
}

func script(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var errDiskFull = errors.New("disk budget full")

func TestSessionTable(t *testing.T) {
	lostN1 := StageLost{Node: "n1", Cause: "its shard actor stopped", At: t0}
	for _, c := range []struct {
		name       string
		prompt     int
		steps      []step
		recoveries int
		err        error
		cache      bool // prompt caching on
	}{
		{name: "normal run", prompt: 10, steps: script(start, decode("a", 10, 50, 51), decode("a", 11, 51, 52), []step{
			{Stop{}, []string{"free a", "done <nil>"}},
		})},
		{name: "stale answers are ignored", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{Token{Session: "a", Position: 10, ID: 7}, nil},     // an earlier position
			{Token{Session: "old", Position: 11, ID: 7}, nil},   // another ring
			{Timeout{Position: 10}, nil},                        // an earlier wait's timer
			{StageLost{Node: "n9", Cause: "gone", At: t0}, nil}, // not in the ring
			{ForwardFailed{Session: "old", Stage: "x", Err: "e"}, nil},
			{Planned{Plan: ringPlan("n3")}, nil}, // nobody asked
			{Token{Session: "a", Position: 11, ID: 51}, []string{"emit 51 step"}},
			{Token{Session: "a", Position: 11, ID: 52}, nil}, // a second answer
			{Stop{}, []string{"free a", "done <nil>"}},
		})},
		{name: "a tensor-parallel group fails: probe, then re-plan without the silent member", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{ForwardFailed{Session: "a", Stage: "x", Err: "e", Group: true}, []string{"log session a: stage x: e; probing the ring", "probe 3"}},
			{ForwardFailed{Session: "a", Stage: "y", Err: "e", Group: true}, nil}, // another member's report
			{Probed{Silent: []string{"n1"}, At: t0}, []string{
				"log session a: node n1 left the session's ring (no token for position 11 within 1s; it does not answer); re-planning and replaying 11 tokens",
				"free a", "plan -[n1]"}},
			{Planned{Plan: ringPlan("n0", "n2")}, []string{"load n0,n2"}},
		}), recoveries: 1},
		{name: "stage lost during prefill", prompt: 10, steps: script(start[:3], []step{
			{lostN1, []string{
				"log session a: node n1 left the session's ring (its shard actor stopped); re-planning and replaying 10 tokens",
				"free a", "plan -[n1]"}},
			{Planned{Plan: ringPlan("n0", "n3", "n2")}, []string{"load n0,n3,n2"}},
			{loaded("b", ringPlan("n0", "n3", "n2")), []string{"ring b n0,n3,n2", "fwd b 0+4 open(10)", "fwd b 4+4", "fwd b 8+2 sample", "wait b 10 1s"}},
			{Token{Session: "a", Position: 10, ID: 50}, nil}, // the lost ring's late answer
			{Token{Session: "b", Position: 10, ID: 50}, []string{"emit 50"}},
			{Stop{}, []string{"free b", "done <nil>"}},
		}), recoveries: 1},
		{name: "stage lost during decode replays with the prompt's batches", prompt: 10, steps: script(start, decode("a", 10, 50, 51), []step{
			{Next{Token: 51}, []string{"fwd a 11+1 sample", "wait a 12 1s"}},
			{lostN1, []string{
				"log session a: node n1 left the session's ring (its shard actor stopped); re-planning and replaying 12 tokens",
				"free a", "plan -[n1]"}},
			{Planned{Plan: ringPlan("n0", "n3", "n2")}, []string{"load n0,n3,n2"}},
			// The prompt in its batches of 4, then each fed-back token alone.
			{loaded("b", ringPlan("n0", "n3", "n2")), []string{"ring b n0,n3,n2", "fwd b 0+4 open(12)", "fwd b 4+4", "fwd b 8+2", "fwd b 10+1", "fwd b 11+1 sample", "wait b 12 1s"}},
			{Token{Session: "b", Position: 12, ID: 52}, []string{"emit 52"}},
		}, decode("b", 12, 52, 53), []step{
			{Stop{}, []string{"free b", "done <nil>"}},
		}), recoveries: 1},
		{name: "stage lost while the caller holds a token", prompt: 10, steps: script(start, []step{
			{lostN1, nil},
			{Next{Token: 50}, []string{
				"log session a: node n1 left the session's ring (its shard actor stopped); re-planning and replaying 11 tokens",
				"free a", "plan -[n1]"}},
			{Planned{Plan: ringPlan("n0", "n2")}, []string{"load n0,n2"}},
			{loaded("b", ringPlan("n0", "n2")), []string{"ring b n0,n2", "fwd b 0+4 open(11)", "fwd b 4+4", "fwd b 8+2", "fwd b 10+1 sample", "wait b 11 1s"}},
		}), recoveries: 1},
		{name: "stage lost during replay", prompt: 10, steps: script(start, decode("a", 10, 50, 51), []step{
			{Next{Token: 51}, []string{"fwd a 11+1 sample", "wait a 12 1s"}},
			{lostN1, []string{"log session a: node n1 left the session's ring (its shard actor stopped); re-planning and replaying 12 tokens", "free a", "plan -[n1]"}},
			{Planned{Plan: ringPlan("n0", "n3", "n2")}, []string{"load n0,n3,n2"}},
			{loaded("b", ringPlan("n0", "n3", "n2")), []string{"ring b n0,n3,n2", "fwd b 0+4 open(12)", "fwd b 4+4", "fwd b 8+2", "fwd b 10+1", "fwd b 11+1 sample", "wait b 12 1s"}},
			{StageLost{Node: "n3", Cause: "its peer disconnected", At: t0}, []string{
				"log session b: node n3 left the session's ring (its peer disconnected); re-planning and replaying 12 tokens",
				"free b", "plan -[n1 n3]"}},
			{Planned{Plan: ringPlan("n0", "n2")}, []string{"load n0,n2"}},
			{loaded("c", ringPlan("n0", "n2")), []string{"ring c n0,n2", "fwd c 0+4 open(12)", "fwd c 4+4", "fwd c 8+2", "fwd c 10+1", "fwd c 11+1 sample", "wait c 12 1s"}},
			{Token{Session: "c", Position: 12, ID: 52}, []string{"emit 52"}},
		}), recoveries: 2},
		{name: "two losses in a row, then too many", prompt: 3, steps: []step{
			{Start{}, []string{"plan -[]"}},
			{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1"}},
			{loaded("a", ringPlan("n0", "n1")), []string{"ring a n0,n1", "fwd a 0+3 open(3) sample", "wait a 3 1s"}},
			{StageLost{Node: "n0", Cause: "x", At: t0}, []string{"log session a: node n0 left the session's ring (x); re-planning and replaying 3 tokens", "free a", "plan -[n0]"}},
			{Planned{Plan: ringPlan("n1", "n2")}, []string{"load n1,n2"}},
			{loaded("b", ringPlan("n1", "n2")), []string{"ring b n1,n2", "fwd b 0+3 open(3) sample", "wait b 3 1s"}},
			{StageLost{Node: "n1", Cause: "x", At: t0}, []string{"log session b: node n1 left the session's ring (x); re-planning and replaying 3 tokens", "free b", "plan -[n0 n1]"}},
			{Planned{Plan: ringPlan("n2", "n3")}, []string{"load n2,n3"}},
			// Unreachable at load: left out, a third recovery.
			{Loaded{Unreachable: []string{"n3"}, At: t0, Err: errors.New("n3 did not load")}, []string{"log session: nodes [n3] did not answer LoadShard; re-planning without them", "plan -[n0 n1 n3]"}},
			{Planned{Plan: ringPlan("n2", "n4")}, []string{"load n2,n4"}},
			{loaded("d", ringPlan("n2", "n4")), []string{"ring d n2,n4", "fwd d 0+3 open(3) sample", "wait d 3 1s"}},
			// The fourth loss is more than MaxRecoveries (3).
			{StageLost{Node: "n4", Cause: "x", At: t0}, []string{"log session d: node n4 left the session's ring (x); re-planning and replaying 3 tokens", "free d", "done session lost its ring 4 times; giving up"}},
		}, recoveries: 4, err: errors.New("session lost its ring 4 times; giving up")},
		{name: "cancel during recovery", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{lostN1, []string{"log session a: node n1 left the session's ring (its shard actor stopped); re-planning and replaying 11 tokens", "free a", "plan -[n1]"}},
			{Planned{Plan: ringPlan("n0", "n2")}, []string{"load n0,n2"}},
			// The ring is freed already: nothing more to free.
			{Cancel{Err: context.Canceled}, []string{"done context canceled"}},
			{loaded("b", ringPlan("n0", "n2")), nil},
			{Token{Session: "b", Position: 11, ID: 1}, nil},
		}), recoveries: 1, err: context.Canceled},
		{name: "cancel while running frees the ring", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{Cancel{Err: errStop}, []string{"free a", "done callback failed"}},
			{Stop{}, nil},
		}), err: errStop},
		{name: "survivors too small", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{lostN1, []string{"log session a: node n1 left the session's ring (its shard actor stopped); re-planning and replaying 11 tokens", "free a", "plan -[n1]"}},
			{Planned{Err: refusal}, []string{"await [n1]"}},
			{ViewBack{}, []string{"done " + refusal.Error()}},
		}), recoveries: 1, err: refusal},
		{name: "a lost node heard from again is tried again", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{lostN1, []string{"log session a: node n1 left the session's ring (its shard actor stopped); re-planning and replaying 11 tokens", "free a", "plan -[n1]"}},
			{Planned{Err: refusal}, []string{"await [n1]"}},
			{ViewBack{Nodes: []string{"n1"}}, []string{"log session: nodes [n1] are heard from again; trying them again", "plan -[]"}},
			{Planned{Plan: ringPlan("n0", "n1", "n2")}, []string{"load n0,n1,n2"}},
		}), recoveries: 2},
		{name: "a node that cannot fetch its layers is left out for good", prompt: 10, steps: []step{
			{Start{}, []string{"plan -[]"}},
			{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1"}},
			{Loaded{Refused: []string{"n1"}, RefusedErr: errDiskFull, At: t0, Err: errDiskFull}, []string{"log session: nodes [n1] cannot hold their shards (disk budget full); re-planning without them", "plan -[n1]"}},
			// Heard from all along, it is not waited for: the refusal
			// says why in the node's words.
			{Planned{Err: refusal}, []string{"done " + refusal.Error() + " (left out: disk budget full)"}},
		}, recoveries: 1, err: fmt.Errorf("%w (left out: disk budget full)", refusal)},
		{name: "left out for good, and one lost: the lost one is waited for", prompt: 10, steps: []step{
			{Start{}, []string{"plan -[]"}},
			{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1"}},
			{Loaded{Unreachable: []string{"n0"}, Refused: []string{"n1"}, RefusedErr: errDiskFull, At: t0, Err: errDiskFull}, []string{
				"log session: nodes [n0] did not answer LoadShard; re-planning without them",
				"log session: nodes [n1] cannot hold their shards (disk budget full); re-planning without them", "plan -[n0 n1]"}},
			{Planned{Err: refusal}, []string{"await [n0]"}},
			{ViewBack{Nodes: []string{"n0", "n1"}}, []string{"log session: nodes [n0] are heard from again; trying them again", "plan -[n1]"}},
		}, recoveries: 2},
		{name: "a too small cluster is refused at once", prompt: 10, steps: []step{
			{Start{}, []string{"plan -[]"}},
			{Planned{Err: refusal}, []string{"done " + refusal.Error()}},
		}, err: refusal},
		{name: "a stuck stage is probed and left out", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{Timeout{Position: 11}, []string{"probe 3"}},
			{Token{Session: "a", Position: 11, ID: 51}, nil}, // too late: the probe decides
			{Probed{Silent: []string{"n2", "n0"}, At: t0}, []string{
				"log session a: node n2 left the session's ring (no token for position 11 within 1s; it does not answer); re-planning and replaying 11 tokens",
				"free a", "plan -[n0 n2]"}},
		}), recoveries: 1},
		{name: "a message lost on a cut link rebuilds the same ring", prompt: 10, steps: script(start[:3], []step{
			{Timeout{Position: 10}, []string{"probe 3"}},
			{Probed{At: t0}, []string{
				"log session a: the ring stalled (no token for position 10 within 1s); re-planning and replaying 10 tokens",
				"free a", "plan -[]"}},
		}), recoveries: 1},
		{name: "a stage's error ends the session", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{ForwardFailed{Session: "a", Stage: "shard-n2", Err: "out of memory"}, []string{"free a", "done stage shard-n2: out of memory"}},
		}), err: errors.New("stage shard-n2: out of memory")},
		{name: "a stage that missed an activation rebuilds the ring and replays", prompt: 10, steps: script(start, []step{
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{ForwardFailed{Session: "a", Stage: "shard-n2", Err: "step at position 10, but the cache holds 8 positions", Gap: true}, []string{
				"log session a: the ring stalled (stage shard-n2 missed an activation: step at position 10, but the cache holds 8 positions); re-planning and replaying 11 tokens",
				"free a", "plan -[]"}},
			{Planned{Plan: ringPlan("n0", "n1", "n2")}, []string{"load n0,n1,n2"}},
			{loaded("b", ringPlan("n0", "n1", "n2")), []string{"ring b n0,n1,n2", "fwd b 0+4 open(11)", "fwd b 4+4", "fwd b 8+2", "fwd b 10+1 sample", "wait b 11 1s"}},
			{Token{Session: "b", Position: 11, ID: 51}, []string{"emit 51"}},
		}), recoveries: 1},
		{name: "a token outside the vocabulary ends the session", prompt: 10, steps: script(start[:3], []step{
			{Token{Session: "a", Position: 10, ID: 100}, []string{"free a", "done the last stage sent token id 100, outside the vocabulary"}},
		}), err: errors.New("the last stage sent token id 100, outside the vocabulary")},
		{name: "prompt caching: resume a prefix, retain at the end", prompt: 10, cache: true, steps: []step{
			{Start{}, []string{"plan -[]"}},
			{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1 may resume"}},
			// 6 positions cached: the batches start after them.
			{Loaded{ID: "a", Ring: loaded("a", ringPlan("n0", "n1")).Ring, Resume: "old", Cached: 6}, []string{"ring a n0,n1", "fwd a 6+4 open(10) resume old sample", "wait a 10 1s"}},
			{Token{Session: "a", Position: 10, ID: 50}, []string{"emit 50"}},
			{Next{Token: 50}, []string{"fwd a 10+1 sample", "wait a 11 1s"}},
			{Token{Session: "a", Position: 11, ID: 51}, []string{"emit 51 step"}},
			{Stop{}, []string{"retain a 11", "done <nil>"}},
		}},
		{name: "prompt caching: a stage without the cache runs the whole prompt", prompt: 10, cache: true, steps: []step{
			{Start{}, []string{"plan -[]"}},
			{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1 may resume"}},
			{Loaded{ID: "a", Ring: loaded("a", ringPlan("n0", "n1")).Ring, Resume: "old", Cached: 6}, []string{"ring a n0,n1", "fwd a 6+4 open(10) resume old sample", "wait a 10 1s"}},
			{ForwardFailed{Session: "a", Stage: "shard-n0", Err: "no retained session old"}, []string{
				"drop cache", "log session a: the prompt cache could not be used (stage shard-n0: no retained session old); running the whole prompt",
				"free a", "plan -[]"}},
			// Never again this session, and not a recovery.
			{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1"}},
			{loaded("b", ringPlan("n0", "n1")), []string{"ring b n0,n1", "fwd b 0+4 open(10)", "fwd b 4+4", "fwd b 8+2 sample", "wait b 10 1s"}},
			{Cancel{Err: errStop}, []string{"free b", "done callback failed"}},
		}, err: errStop},
		{name: "prompt caching: a stage lost while resuming drops the cache and recovers", prompt: 10, cache: true, steps: []step{
			{Start{}, []string{"plan -[]"}},
			{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1 may resume"}},
			{Loaded{ID: "a", Ring: loaded("a", ringPlan("n0", "n1")).Ring, Resume: "old", Cached: 6}, []string{"ring a n0,n1", "fwd a 6+4 open(10) resume old sample", "wait a 10 1s"}},
			{lostN1, []string{"drop cache", "log session a: node n1 left the session's ring (its shard actor stopped); re-planning and replaying 10 tokens", "free a", "plan -[n1]"}},
			{Planned{Plan: ringPlan("n0", "n2")}, []string{"load n0,n2"}},
		}, recoveries: 1},
		{name: "a load error ends the session", prompt: 10, steps: []step{
			{Start{}, []string{"plan -[]"}},
			{Planned{Plan: ringPlan("n0")}, []string{"load n0"}},
			{Loaded{Err: errors.New("no such layers")}, []string{"done no such layers"}},
		}, err: errors.New("no such layers")},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSession(t, c.prompt, c.cache)
			for i, st := range c.steps {
				var got []string
				for _, a := range s.Step(st.ev) {
					got = append(got, brief(a))
				}
				if strings.Join(got, "\n") != strings.Join(st.want, "\n") {
					t.Fatalf("step %d (%T %+v):\n got %q\nwant %q", i, st.ev, st.ev, got, st.want)
				}
			}
			if s.Recoveries() != c.recoveries {
				t.Errorf("%d recoveries, want %d", s.Recoveries(), c.recoveries)
			}
			if fmt.Sprint(s.Err()) != fmt.Sprint(c.err) {
				t.Errorf("err %v, want %v", s.Err(), c.err)
			}
		})
	}
}

// A long replay waits longer: one step timeout per eight messages.
func TestReplayTimeoutGrows(t *testing.T) {
	s, err := New(Config{Prompt: prompt(130), MaxBatch: 64, Vocab: 100, StepTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Step(Start{})
	s.Step(Planned{Plan: ringPlan("n0")})
	acts := s.Step(loaded("a", ringPlan("n0")))
	// 3 prompt chunks: 64, 64, 2.
	if w := acts[len(acts)-1].(Wait); w.Timeout != time.Second || w.Position != 130 {
		t.Fatalf("%+v", w)
	}
	for i := range 20 {
		s.Step(Token{Session: s.id, Position: s.pos, ID: 1})
		s.Step(Next{Token: 1 + i})
	}
	s.Step(StageLost{Node: "n0", At: t0})
	s.Step(Planned{Plan: ringPlan("n1")})
	acts = s.Step(loaded("b", ringPlan("n1")))
	// 3 chunks and 20 single tokens: 23 messages, 1+23/8 = 3 timeouts.
	if w := acts[len(acts)-1].(Wait); w.Timeout != 3*time.Second || w.Position != 150 {
		t.Fatalf("%+v", w)
	}
	var got []int
	for _, a := range acts {
		if f, ok := a.(Forward); ok {
			got = append(got, f.Tokens...)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(s.Fed()) {
		t.Errorf("replayed %v, want %v", got, s.Fed())
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{
		{MaxBatch: 4, Vocab: 10},
		{Prompt: []int{1}, Vocab: 10},
		{Prompt: []int{1}, MaxBatch: 4},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// Losing a member of a tensor-parallel stage (not its leader) loses the
// stage: the session re-plans without that member's node.
func TestTPMemberLost(t *testing.T) {
	s := newSession(t, 3, false)
	s.Step(Start{})
	s.Step(Planned{Plan: ringPlan("n0")})
	ev := loaded("a", ringPlan("n0"))
	ev.Ring[0].TP = []Stage{{Node: "m1", Address: "addr-m1", Actor: "shard-m1"}}
	s.Step(ev)
	var got []string
	for _, a := range s.Step(StageLost{Node: "m1", Cause: "gone", At: t0}) {
		got = append(got, brief(a))
	}
	if fmt.Sprint(got) != fmt.Sprint([]string{"log session a: node m1 left the session's ring (gone); re-planning and replaying 3 tokens", "free a", "plan -[m1]"}) {
		t.Errorf("actions %q", got)
	}
}

// The token shortcut: the last stage feeds each token on itself, one
// token ahead of the caller, up to where the caller stops feeding; a
// token fed past the allowance goes from the session; a new ring starts
// the shortcut over.
func TestShortcut(t *testing.T) {
	s, err := New(Config{Prompt: prompt(10), MaxBatch: 4, Vocab: 100, StepTimeout: time.Second, MaxRecoveries: 3, ChainBelow: 13})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range []step{
		{Start{}, []string{"plan -[]"}},
		{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1"}},
		// The first token may be fed on before anyone has seen it.
		{loaded("a", ringPlan("n0", "n1")), []string{"ring a n0,n1", "fwd a 0+4 open(10)", "fwd a 4+4", "fwd a 8+2 sample chain<=10", "wait a 10 1s"}},
		{Token{Session: "a", Position: 10, ID: 50}, []string{"emit 50"}},
		// 50 was fed at 10 by the last stage: no Forward, leave for 11.
		{Next{Token: 50}, []string{"chain a <=11", "wait a 11 1s"}},
		{Token{Session: "a", Position: 11, ID: 51}, []string{"emit 51 step"}},
		{Next{Token: 51}, []string{"chain a <=12", "wait a 12 1s"}},
		{Token{Session: "a", Position: 12, ID: 52}, []string{"emit 52 step"}},
		// 13 is never fed: no leave for it.
		{Next{Token: 52}, []string{"wait a 13 1s"}},
		{Token{Session: "a", Position: 13, ID: 53}, []string{"emit 53 step"}},
		// Past the allowance (a caller that feeds on anyway): from the session.
		{Next{Token: 53}, []string{"fwd a 13+1 sample", "wait a 14 1s"}},
		// A lost stage: the new ring replays and starts the shortcut over.
		{StageLost{Node: "n1", Cause: "gone", At: t0}, []string{
			"log session a: node n1 left the session's ring (gone); re-planning and replaying 14 tokens", "free a", "plan -[n1]"}},
		{Planned{Plan: ringPlan("n0")}, []string{"load n0"}},
		{loaded("b", ringPlan("n0")), []string{"ring b n0", "fwd b 0+4 open(14)", "fwd b 4+4", "fwd b 8+2", "fwd b 10+1", "fwd b 11+1", "fwd b 12+1", "fwd b 13+1 sample", "wait b 14 1s"}},
	} {
		var got []string
		for _, a := range s.Step(st.ev) {
			got = append(got, brief(a))
		}
		if strings.Join(got, "\n") != strings.Join(st.want, "\n") {
			t.Fatalf("step %d (%T %+v):\n got %q\nwant %q", i, st.ev, st.ev, got, st.want)
		}
	}

	// A new ring within the allowance feeds its first token on again.
	s, err = New(Config{Prompt: prompt(3), MaxBatch: 4, Vocab: 100, StepTimeout: time.Second, ChainBelow: 100})
	if err != nil {
		t.Fatal(err)
	}
	s.Step(Start{})
	s.Step(Planned{Plan: ringPlan("n0")})
	s.Step(loaded("a", ringPlan("n0")))
	s.Step(Token{Session: "a", Position: 3, ID: 9})
	s.Step(Next{Token: 9})
	s.Step(StageLost{Node: "n0", Cause: "gone", At: t0})
	s.Step(Planned{Plan: ringPlan("n1")})
	var got []string
	for _, a := range s.Step(loaded("b", ringPlan("n1"))) {
		got = append(got, brief(a))
	}
	if want := []string{"ring b n1", "fwd b 0+3 open(4)", "fwd b 3+1 sample chain<=4", "wait b 4 1s"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("new ring:\n got %q\nwant %q", got, want)
	}
}

// Speculative decoding in the core: a Next with guesses sends them with
// its token as one sampled step; the answer's extra draws are emitted one
// per Next without a step; the step after them starts where the ring
// agreed (the stages rewind). Draws that do not follow the guesses, or
// more of them than guesses, fail the session; a lost stage drops the
// draws not yet emitted and replays only what was fed.
func TestGuesses(t *testing.T) {
	s := newSession(t, 10, false)
	for i, st := range script(start, []step{
		// 50 at 10, guesses 60 61 62 for 11..13: one step of 4 positions.
		{Next{Token: 50, Guesses: []int{60, 61, 62}}, []string{"fwd a 10+4 sample guesses[60 61 62]", "wait a 11 1s"}},
		// The last stage agreed with 60 and 61, drew 70 for 13.
		{Token{Session: "a", Position: 11, ID: 60, More: []int{61, 70}}, []string{"emit 60 step"}},
		{Next{Token: 60, Guesses: []int{99}}, []string{"emit 61"}},
		{Next{Token: 61}, []string{"emit 70"}},
		// 70 goes at 13, where the stages hold the rejected guess 62.
		{Next{Token: 70, Guesses: []int{80}}, []string{"fwd a 13+2 sample guesses[80]", "wait a 14 1s"}},
		{Token{Session: "a", Position: 14, ID: 81}, []string{"emit 81 step"}},
		{Next{Token: 81, Guesses: []int{90, 91}}, []string{"fwd a 14+3 sample guesses[90 91]", "wait a 15 1s"}},
		{Token{Session: "a", Position: 15, ID: 90, More: []int{91, 92}}, []string{"emit 90 step"}},
		{Next{Token: 90}, []string{"emit 91"}},
		// A stage lost while 92 waits: the new ring replays what was fed
		// (the prompt, 50 60 61 70 81 90 91) and samples 92's position again.
		{StageLost{Node: "n2", Cause: "gone", At: t0}, nil},
		{Next{Token: 91}, []string{"log session a: node n2 left the session's ring (gone); re-planning and replaying 17 tokens", "free a", "plan -[n2]"}},
		{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1"}},
		{loaded("b", ringPlan("n0", "n1")), []string{"ring b n0,n1", "fwd b 0+4 open(17)", "fwd b 4+4", "fwd b 8+2",
			"fwd b 10+1", "fwd b 11+1", "fwd b 12+1", "fwd b 13+1", "fwd b 14+1", "fwd b 15+1", "fwd b 16+1 sample", "wait b 17 2s"}},
		{Token{Session: "b", Position: 17, ID: 92}, []string{"emit 92"}},
	}) {
		var got []string
		for _, a := range s.Step(st.ev) {
			got = append(got, brief(a))
		}
		if strings.Join(got, "\n") != strings.Join(st.want, "\n") {
			t.Fatalf("step %d (%T %+v):\n got %q\nwant %q", i, st.ev, st.ev, got, st.want)
		}
	}
	if s.Ahead() != 0 {
		t.Errorf("%d draws ahead after the replay", s.Ahead())
	}

}

// TestGuessesThenShortcut: a speculating caller whose guesses do not pay
// takes the shortcut for a while (Next.ChainBelow), and guesses again
// after it: no guess rides on a token the last stage fed already.
func TestGuessesThenShortcut(t *testing.T) {
	s := newSession(t, 10, false)
	for i, st := range script(start, []step{
		{Next{Token: 50, Guesses: []int{60}}, []string{"fwd a 10+2 sample guesses[60]", "wait a 11 1s"}},
		{Token{Session: "a", Position: 11, ID: 61}, []string{"emit 61 step"}},
		// Plain for the tokens at 11 and 12: the shortcut feeds 12's.
		{Next{Token: 61, ChainBelow: 13}, []string{"fwd a 11+1 sample chain<=12", "wait a 12 1s"}},
		{Token{Session: "a", Position: 12, ID: 62}, []string{"emit 62 step"}},
		{Next{Token: 62, Guesses: []int{70}}, []string{"wait a 13 1s"}},
		{Token{Session: "a", Position: 13, ID: 63}, []string{"emit 63 step"}},
		// The window is over: 63 goes with a guess again.
		{Next{Token: 63, Guesses: []int{70}}, []string{"fwd a 13+2 sample guesses[70]", "wait a 14 1s"}},
		{Token{Session: "a", Position: 14, ID: 70, More: []int{71}}, []string{"emit 70 step"}},
	}) {
		var got []string
		for _, a := range s.Step(st.ev) {
			got = append(got, brief(a))
		}
		if strings.Join(got, "\n") != strings.Join(st.want, "\n") {
			t.Fatalf("step %d (%T %+v):\n got %q\nwant %q", i, st.ev, st.ev, got, st.want)
		}
	}
	if s.CanGuess() {
		t.Error("CanGuess with a checked token waiting")
	}
}

func TestBadGuessDraws(t *testing.T) {
	// A last stage that does not follow the guesses fails the session.
	for name, tok := range map[string]Token{
		"went on after a wrong guess": {Session: "a", Position: 11, ID: 61, More: []int{61}},
		"more draws than guesses":     {Session: "a", Position: 11, ID: 60, More: []int{61, 62}},
		"draw outside the vocabulary": {Session: "a", Position: 11, ID: 60, More: []int{100}},
	} {
		s := newSession(t, 10, false)
		for _, st := range start {
			s.Step(st.ev)
		}
		s.Step(Next{Token: 50, Guesses: []int{60}})
		acts := s.Step(tok)
		if last := brief(acts[len(acts)-1]); !strings.HasPrefix(last, "done the last stage") {
			t.Errorf("%s: %q", name, last)
		}
	}
}

// Guesses the last stage drafts itself (Config.Draft): every Forward
// carries the drafting settings; a Token's More needs no guesses of the
// caller's, only as many checked guesses as it claims (and no more than
// Draft); the shortcut is allowed one step ahead of the caller (the
// Chain after a step's last draw is fed); the guesses are counted, and
// the kept ones a new ring samples again are not.
func TestStageDraft(t *testing.T) {
	newDrafting := func() *Session {
		s, err := New(Config{Prompt: prompt(10), MaxBatch: 4, Vocab: 100, StepTimeout: time.Second, MaxRecoveries: 3, ChainBelow: 20, Draft: 4})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := newDrafting()
	for i, st := range []step{
		{Start{}, []string{"plan -[]"}},
		{Planned{Plan: ringPlan("n0", "n1")}, []string{"load n0,n1"}},
		{loaded("a", ringPlan("n0", "n1")), []string{"ring a n0,n1", "fwd a 0+4 open(10) draft4<=19", "fwd a 4+4 draft4<=19",
			"fwd a 8+2 sample chain<=10 draft4<=19", "wait a 10 1s"}},
		// The last stage fed 50 at 10 with three guesses, kept two (51 52).
		{Token{Session: "a", Position: 10, ID: 50}, []string{"emit 50"}},
		{Next{Token: 50}, []string{"chain a <=11", "wait a 11 1s"}},
		{Token{Session: "a", Position: 11, ID: 51, More: []int{52, 53}, Guessed: 3}, []string{"emit 51 step"}},
		{Next{Token: 51}, []string{"emit 52"}},
		{Next{Token: 52}, []string{"emit 53"}},
		// 53's step (at 13) is the last stage's: leave for the step after it.
		{Next{Token: 53}, []string{"chain a <=14", "wait a 14 1s"}},
		{Token{Session: "a", Position: 14, ID: 54, More: []int{55}, Guessed: 2}, []string{"emit 54 step"}},
		// A stage lost while 55 waits: it is sampled again, not counted.
		{StageLost{Node: "n1", Cause: "gone", At: t0}, nil},
		{Next{Token: 54}, []string{"log session a: node n1 left the session's ring (gone); re-planning and replaying 15 tokens", "free a", "plan -[n1]"}},
	} {
		var got []string
		for _, a := range s.Step(st.ev) {
			got = append(got, brief(a))
		}
		if strings.Join(got, "\n") != strings.Join(st.want, "\n") {
			t.Fatalf("step %d (%T %+v):\n got %q\nwant %q", i, st.ev, st.ev, got, st.want)
		}
	}
	if d, a := s.StageGuesses(); d != 5 || a != 2 {
		t.Errorf("StageGuesses %d, %d; want 5 drafted, 2 kept (the third kept one was lost with the ring)", d, a)
	}

	for name, tok := range map[string]Token{
		"more draws than it checked":  {Session: "a", Position: 11, ID: 51, More: []int{52, 53}, Guessed: 1},
		"more than Draft":             {Session: "a", Position: 11, ID: 51, More: []int{1, 2, 3, 4, 5}, Guessed: 8},
		"draw outside the vocabulary": {Session: "a", Position: 11, ID: 51, More: []int{100}, Guessed: 1},
	} {
		s := newDrafting()
		s.Step(Start{})
		s.Step(Planned{Plan: ringPlan("n0")})
		s.Step(loaded("a", ringPlan("n0")))
		s.Step(Token{Session: "a", Position: 10, ID: 50})
		s.Step(Next{Token: 50})
		acts := s.Step(tok)
		if last := brief(acts[len(acts)-1]); !strings.HasPrefix(last, "done the last stage") {
			t.Errorf("%s: %q", name, last)
		}
	}
}

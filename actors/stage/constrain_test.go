package stage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/oracle"
	"strata/actors/internal/wire"
	"strata/actors/origin"
	"strata/messages"
	"strata/runtime/engine"
	"strata/runtime/grammar"
)

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"]}`

// validWeather checks a document against weatherSchema.
func validWeather(doc string) error {
	var v map[string]any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return err
	}
	city, ok1 := v["city"].(string)
	days, ok2 := v["days"].(float64)
	if !ok1 || !ok2 || days != float64(int(days)) || days < 1 || days > 7 || len(v) != 2 {
		return fmt.Errorf("does not match the schema: city %q, days %v, %d keys", city, v["days"], len(v))
	}
	return nil
}

// Structured output on a 3-stage ring: the schema travels to the last
// stage, whose sampler masks with it. stories260K has never seen JSON,
// yet the answer parses and validates, and equals the one-node engine's
// constrained answer (greedy and seeded).
func TestStructuredOutputOnCluster(t *testing.T) {
	store := oracle.Stories(t)
	sc, err := grammar.Compile([]byte(weatherSchema))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(store["stories260K"], engine.Options{Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	vocab := grammar.VocabOf(e.Tokenizer)
	lc := newLocalCluster(t, 3, 800e3, store)
	cl := lc.cluster(origin.Options{PlanContext: 512})
	defer cl.Close()
	for _, c := range []struct {
		name   string
		schema *grammar.Schema
		temp   float32
		check  func(string) error
	}{
		{"weather-greedy", sc, 0, validWeather},
		{"weather-seeded", sc, 0.9, validWeather},
		{"any-json", grammar.AnyJSON(), 0, func(doc string) error {
			var v any
			return json.Unmarshal([]byte(doc), &v)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := engine.Request{Model: "stories260K", Prompt: "Lily and Tom went to the park.", MaxTokens: 80, Schema: c.schema}
			req.Sampling.Temperature, req.Sampling.Seed = c.temp, 7
			want, err := e.Generate(context.Background(), engine.Request{Prompt: req.Prompt, MaxTokens: 80, Sampling: req.Sampling,
				Constraint: grammar.NewMatcher(c.schema, vocab, 80)}, func(engine.Token) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			got := generate(t, cl, req)
			t.Logf("3 stages: %s", got.Text)
			if err := c.check(got.Text); err != nil {
				t.Errorf("%q: %v", got.Text, err)
			}
			if got.Text != want.Text || fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
				t.Errorf("cluster answer %q differs from one node's %q", got.Text, want.Text)
			}
			// Without the schema the model writes a story, not JSON: the
			// constraint did the work.
			free := generate(t, cl, engine.Request{Model: "stories260K", Prompt: req.Prompt, MaxTokens: 20, Sampling: req.Sampling})
			if strings.HasPrefix(strings.TrimSpace(free.Text), "{") {
				t.Errorf("unconstrained answer %q looks like JSON already", free.Text)
			}
		})
	}
}

// A peer's schema is untrusted input: too large or invalid is refused
// with an error, not a panic or a stalled session.
func TestStageRefusesBadSchema(t *testing.T) {
	lc, pid, self, in := oneStage(t)
	for i, schema := range []string{
		`{"type":`, `{"type":"object","properties":` + strings.Repeat(" ", maxSchemaBytes) + `{}}`, `false`,
		strings.Repeat(`{"type":"array","items":`, 40) + `{}` + strings.Repeat(`}`, 40),
	} {
		lc.system.Root.Send(pid, &messages.Forward{Session: fmt.Sprint("s", i), Count: 1, Tokens: []int32{1}, Context: 64, ReplyTo: wire.FromPID(self), Sample: true,
			Sampling: &messages.Sampling{Constrained: true, JsonSchema: schema}})
		select {
		case m := <-in.ch:
			if fe, ok := m.(*messages.ForwardError); !ok || fe.Error == "" {
				t.Errorf("schema %d: got %v, want an error", i, m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("schema %d: no answer", i)
		}
	}
	if st := lc.hosts[0].Stats().Shards[0]; st.Sessions != 0 || st.KvBytes != 0 {
		t.Errorf("refused sessions left state: %v", st)
	}
}

// A ring rebuilt mid-document (the last stage's node died) replays the
// document so far into the new last stage's grammar: the answer is the
// one of an uninterrupted run.
func TestStructuredOutputSurvivesLostStage(t *testing.T) {
	store := oracle.Stories(t)
	sc, err := grammar.Compile([]byte(weatherSchema))
	if err != nil {
		t.Fatal(err)
	}
	req := engine.Request{Model: "stories260K", Prompt: "Lily and Tom went to the park.", MaxTokens: 80, Schema: sc}
	lc := newLocalCluster(t, 4, 800e3, store)
	dir := &dynDirectory{members: append([]origin.Member(nil), lc.dir...)}
	cl := origin.New(lc.system, dir, lc.hosts[0], origin.Options{PlanContext: 512, PromptCache: -1})
	defer cl.Close()
	want := generate(t, cl, req)
	p, _, err := cl.Plan("stories260K")
	if err != nil || len(p.Stages) != 3 {
		t.Fatalf("%v %v", p, err)
	}
	idx := int(p.Stages[2].Node[1] - '0')
	n := 0
	got, err := cl.Generate(context.Background(), req, func(engine.Token) error {
		if n++; n == 8 {
			lc.kill(t, dir, idx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := validWeather(got.Text); err != nil || got.Text != want.Text {
		t.Errorf("after losing the last stage: %q (%v), want %q", got.Text, err, want.Text)
	}
}

// A step's accept list is bounded by the positions so far and the
// node's context (attack 2 of the second hardening round: a peer sent a
// 19.5 MiB accept list of '[' to a shard shared by every session of the
// model, which took its node to 4 GB and other users' completions from
// 0.01 to 32 s), and another session is served at once after it.
func TestStageRefusesLongAcceptList(t *testing.T) {
	lc, pid, self, in := oneStage(t)
	accept := make([]int32, 1<<20)
	for i := range accept {
		accept[i] = 91 // any token: the list is refused by its length
	}
	for i, pos := range []uint32{0, 1 << 21} { // the list is longer than the context, wherever it starts
		start := time.Now()
		lc.system.Root.Send(pid, &messages.Forward{Session: fmt.Sprint("long", i), Position: pos, Count: 1, Tokens: []int32{1}, Context: 64, ReplyTo: wire.FromPID(self), Sample: true,
			Accept: accept, Sampling: &messages.Sampling{Constrained: true, JsonSchema: `{}`}})
		select {
		case m := <-in.ch:
			if fe, ok := m.(*messages.ForwardError); !ok || !strings.Contains(fe.Error, "accepts") {
				t.Errorf("position %d: got %v, want a refusal of the accept list", pos, m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("position %d: no answer", pos)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("position %d: refused after %v", pos, d)
		}
	}
	lc.system.Root.Send(pid, &messages.Forward{Session: "ok", Count: 1, Tokens: []int32{1}, Context: 64, ReplyTo: wire.FromPID(self), Sample: true})
	select {
	case m := <-in.ch:
		if _, ok := m.(*messages.Token); !ok {
			t.Errorf("the next session got %v, want a token", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the next session got no answer")
	}
}

// oneStage loads stories260K whole on one node and returns the cluster,
// the stage's PID, and an inbox (and its PID) for the stage's answers.
func oneStage(t *testing.T) (lc *localCluster, stage, self *actor.PID, in *answers) {
	lc = newLocalCluster(t, 1, 4<<20, oracle.Stories(t))
	loaded := loadShard(t, lc, 0, 5)
	if loaded.Error != "" {
		t.Fatal(loaded.Error)
	}
	in = &answers{ch: make(chan any, 8)}
	self = lc.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }))
	return lc, &actor.PID{Address: lc.dir[0].Host.Address, Id: loaded.ActorId}, self, in
}

package stage

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/messages"
	"strata/runtime/engine"
)

// The token shortcut on a 3-stage ring: the last stage feeds every token
// but the limit's to the first stage itself (a Forward that a shard sends
// with token ids), the answer is one node's with and without it, and a
// stop by the caller (a token limit, or a callback's error) leaves no
// session behind, though the ring has computed a step ahead.
func TestShortcutFeedsTheFirstStage(t *testing.T) {
	store := oracle.Stories(t)
	var chained atomic.Int64
	count := func(next actor.SenderFunc) actor.SenderFunc {
		return func(ctx actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			if f, ok := env.Message.(*messages.Forward); ok && len(f.Tokens) > 0 {
				chained.Add(1)
			}
			next(ctx, target, env)
		}
	}
	lc := newLocalCluster(t, 3, 800e3, store, count)
	const n = 40
	req := engine.Request{Prompt: "Lily had a red ball.", MaxTokens: n}
	want := oracle.OneNode(t, store["stories260K"], req)
	for _, off := range []bool{false, true} {
		chained.Store(0)
		cl := lc.cluster(origin.Options{PlanContext: 512, NoShortcut: off, PromptCache: -1})
		if p, _, err := cl.Plan("stories260K"); err != nil || len(p.Stages) != 3 {
			t.Fatalf("plan %v, %v; want 3 stages", p, err)
		}
		res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: req.Prompt, MaxTokens: n}, func(engine.Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != want.Text {
			t.Fatalf("shortcut off %v: %q\nwant %q", off, res.Text, want.Text)
		}
		// n tokens: the first after the prompt, n-1 steps; the n-th is
		// never fed, and its step is not started.
		if got, wantChained := chained.Load(), int64(n-1); off && got != 0 || !off && got != wantChained {
			t.Errorf("shortcut off %v: the last stage fed the first %d steps, want %d", off, got, map[bool]int64{false: wantChained, true: 0}[off])
		}
		lc.waitFree(t)

		// A caller that stops mid-answer: the step the last stage fed on
		// is computed in vain, and freed.
		stop := fmt.Errorf("enough")
		seen := 0
		_, err = cl.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: req.Prompt, MaxTokens: n}, func(engine.Token) error {
			if seen++; seen == 5 {
				return stop
			}
			return nil
		})
		if err != stop {
			t.Fatalf("stopped generation: %v", err)
		}
		lc.waitFree(t)
		cl.Close()
	}
}

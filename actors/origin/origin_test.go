package origin

import (
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/session"
)

// A running session is listed by a label, never by the ID that steps and
// frees it on its stages (anyone who reads the status could).
func TestSessionsListedByLabel(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	c := New(system, StaticDirectory{}, nil, Options{})
	in := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &inbox{ch: make(chan any, 1)} }))
	r := &ring{c: c, info: &SessionInfo{Model: "m"}, self: in}
	for _, id := range []string{"first-ring-id", "rebuilt-ring-id"} {
		r.use(id, []session.Stage{{Node: "n0", Address: "local", Actor: "shards/m@0-5", First: 0, End: 5}})
		got := c.Sessions()
		if len(got) != 1 {
			t.Fatalf("after ring %s: %d sessions listed, want 1", id, len(got))
		}
		if got[0].ID == id || got[0].ID != sessionLabel(id) {
			t.Errorf("session %s listed as %q, want its label %q", id, got[0].ID, sessionLabel(id))
		}
	}
}

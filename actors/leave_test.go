package actors

import (
	"context"
	"slices"
	"testing"
	"time"

	"strata/actors/internal/oracle"
	"strata/actors/plan"
	"strata/actors/stage"
	"strata/internal/testdata"
	"strata/messages"
	"strata/runtime/engine"
)

// TestPeerLeavesMidAnswer: a node that holds the middle stage leaves
// gracefully mid-answer. The session re-plans on the others at once (the
// step timeout, a minute here, never runs out) and the answer is one
// node's; later plans leave the node out while it still runs, and its
// host refuses loads with the leaving flag.
func TestPeerLeavesMidAnswer(t *testing.T) {
	const stepTimeout = time.Minute
	nodes := startNodes(t, 4, 800e3, 1, stepTimeout)
	path := testdata.Path(t, "gguf/stories260K.gguf")
	want := oracle.OneNode(t, path, engine.Request{MaxTokens: 200})
	p, _, err := nodes[0].Origin.Plan("stories260K")
	if err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v %v", p, err)
	}
	var leaver, origin *Node
	for _, nd := range nodes {
		if nd.Peers.ID().String() == p.Stages[1].Node {
			leaver = nd
		} else if origin == nil {
			origin = nd
		}
	}
	var leftAt, resumedAt time.Time
	left := make(chan error, 1)
	n := 0
	res, err := origin.Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 200}, func(tok engine.Token) error {
		n++
		if n == 80 {
			leftAt = time.Now()
			go func() { left <- leaver.Leave(context.Background()) }()
		}
		if n == 81 {
			resumedAt = time.Now()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-left; err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if res.Text != want.Text {
		t.Fatalf("after the leave:\n got %q\nwant %q", res.Text, want.Text)
	}
	pause := resumedAt.Sub(leftAt)
	t.Logf("pause from leave to next token: %v", pause)
	if pause >= stepTimeout/2 {
		t.Errorf("the session waited %v: it ran into the step timeout instead of moving at once", pause)
	}
	if res.Stats.Recoveries == 0 {
		t.Errorf("the session did not move (no recovery) although its middle stage left")
	}

	// The leaver still runs but is out of every plan, and refuses loads.
	leaverID := leaver.Peers.ID().String()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, _, err := origin.Origin.Plan("stories260K")
		if err == nil && !slices.ContainsFunc(p.Stages, func(s plan.Stage) bool { return s.Node == leaverID }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plans still use the leaving node: %v %v", p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res2, err := origin.Peers.ActorSystem().Root.RequestFuture(origin.Peers.PID(leaver.Peers.ID(), stage.HostName),
		&messages.LoadShard{Shard: &messages.ShardSpec{Model: "stories260K", First: 0, End: 1, Layers: 5}}, 5*time.Second).Result()
	if loaded, ok := res2.(*messages.ShardLoaded); err != nil || !ok || !loaded.Leaving || loaded.Error == "" {
		t.Errorf("LoadShard on the leaving node: %v, %v", res2, err)
	}
	if st := leaver.Host.Stats(); len(st.Shards) != 0 {
		t.Errorf("the leaving node still holds %d shards", len(st.Shards))
	}
}

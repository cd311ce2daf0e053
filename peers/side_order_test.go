package peers_test

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/peer"

	"strata/messages"
	"strata/peers"
	"strata/peers/peerstest"
	"strata/peers/verbs"
)

// TestSideChannelOrderAcrossSwitch sends bursts of activations while the
// link changes path under them: the first burst starts while the link
// still negotiates (slowed down), and the fault backend stalls a frame so
// that the link falls back to the stream and, after its backoff, returns
// to shared memory; then the verbs streams are cut mid-burst, and the
// link negotiates again. No activation may overtake another (each path
// is ordered on its own; a switch must not reorder them), and none may
// come twice. Activations in flight when the streams were cut may be
// lost (the session replays them), nothing else.
func TestSideChannelOrderAcrossSwitch(t *testing.T) {
	old := peers.SetNegotiateDelay(50 * time.Millisecond)
	defer peers.SetNegotiateDelay(old)
	c := peerstest.New(t, 2, sinkActor, peerstest.WithConfig(func(cfg *peers.Config) {
		cfg.Verbs.Stall = 200 * time.Millisecond
		cfg.Verbs.Retry = 100 * time.Millisecond
		cfg.Verbs.Faults = func(peer.ID) func(int) verbs.Fault {
			return func(n int) verbs.Fault {
				if n == 30 {
					return verbs.Stall
				}
				return verbs.Deliver
			}
		}
	}))
	a, b := c.Nodes[0], c.Nodes[1]
	s := &sink{}
	if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(s.receive), "sink"); err != nil {
		t.Fatal(err)
	}
	pid := a.PID(b.ID(), "sink")
	send := func(from, to int) {
		for i := from; i < to; i++ {
			a.ActorSystem().Root.Send(pid, &messages.Forward{Session: "s", Position: uint32(i), Count: 1, Hidden: hidden(i)})
			time.Sleep(time.Millisecond)
		}
	}
	// The link goes up, falls back, comes back: nothing may be lost.
	const first = 400
	send(0, first)
	got := s.wait(t, first, 20*time.Second)
	checkOrder(t, got, first, true)
	if a.LinkReturns() == 0 {
		t.Fatalf("the link did not return to shared memory after its fallback; links %+v", a.Links())
	}
	// The link goes down and up again.
	const second = 600
	go func() {
		time.Sleep(30 * time.Millisecond)
		peers.EndLinks(a)
	}()
	send(first, second)
	time.Sleep(2 * time.Second)
	got = s.wait(t, second, 5*time.Second)
	checkOrder(t, got, second, false)
	t.Logf("%d of %d activations arrived after the cut", len(got)-first, second-first)
}

// checkOrder checks that positions only increase and, with all, that
// none of n is missing.
func checkOrder(t *testing.T, got []*messages.Forward, n int, all bool) {
	t.Helper()
	var pos []uint32
	for _, m := range got {
		pos = append(pos, m.Position)
	}
	for i := 1; i < len(pos); i++ {
		if pos[i] <= pos[i-1] {
			t.Fatalf("activation %d arrived after %d (order %v)", pos[i], pos[i-1], pos)
		}
	}
	if all && len(pos) != n {
		t.Fatalf("%d of %d activations arrived", len(pos), n)
	}
	if len(pos) > n {
		t.Fatalf("%d activations for %d sent", len(pos), n)
	}
}

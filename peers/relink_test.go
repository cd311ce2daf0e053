package peers_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/peer"

	"strata/messages"
	"strata/peers"
	"strata/peers/peerstest"
	"strata/peers/verbs"
)

// A link negotiated again (its verbs stream cut, the peer still there)
// numbers its messages from 1 again, and a fault on its new side channel
// resends from what the peer acknowledged in this session. Acknowledgements
// kept from the previous session made the link drop messages it had never
// delivered: they were lost, and the next one closed the link (in a
// cluster, a replayed ring's first activations were among them, and the
// stage after answered "session … is not open here").
func TestSideChannelFaultAfterRelink(t *testing.T) {
	c := peerstest.New(t, 2, sinkActor, peerstest.WithConfig(func(cfg *peers.Config) {
		cfg.Verbs.Stall = 300 * time.Millisecond
		// Every session of the link stalls its tenth frame (Faulty counts
		// each new side channel's frames from 0).
		cfg.Verbs.Faults = func(peer.ID) func(int) verbs.Fault {
			return func(n int) verbs.Fault {
				if n == 9 {
					return verbs.Stall
				}
				return verbs.Deliver
			}
		}
	}))
	a, b := c.Nodes[0], c.Nodes[1]
	waitLink(t, a, b.ID(), peers.TransportShm)
	s := &sink{}
	if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(s.receive), "sink"); err != nil {
		t.Fatal(err)
	}
	pid := a.PID(b.ID(), "sink")
	send := func(from, to int) {
		for i := from; i < to; i++ {
			a.ActorSystem().Root.Send(pid, &messages.Forward{Session: "s", Position: uint32(i), Count: 1, Hidden: hidden(i)})
		}
	}
	check := func(n int) {
		t.Helper()
		got := s.wait(t, n, 20*time.Second)
		if len(got) != n {
			t.Fatalf("%d of %d activations arrived", len(got), n)
		}
		for i, m := range got {
			if int(m.Position) != i || !bytes.Equal(m.Hidden, hidden(i)) {
				t.Fatalf("activation %d: position %d, %d bytes (equal: %v)", i, m.Position, len(m.Hidden), bytes.Equal(m.Hidden, hidden(i)))
			}
		}
	}

	// First session: message 10 stalls with nothing after it on the side
	// channel, so a alone notices (no acknowledgement) and falls back;
	// the stream carries the rest, and b acknowledges all 40.
	send(0, 10)
	check(10)
	send(10, 40)
	check(40)
	time.Sleep(100 * time.Millisecond) // b's last acknowledgements reach a

	if peers.ResetVerbsStreams(a, b.ID()) == 0 {
		t.Fatal("no verbs stream to reset")
	}
	waitLink(t, a, b.ID(), peers.TransportShm) // the second session

	// Second session: message 10 stalls again and the ones after it show
	// b the gap; a must resend from message 10 of this session.
	send(40, 80)
	check(80)
	if f := a.LinkFallbacks(); f < 2 {
		t.Fatalf("%d fallbacks on a, want one per session", f)
	}
}

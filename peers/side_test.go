package peers_test

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/peer"

	"strata/messages"
	"strata/peers"
	"strata/peers/peerstest"
	"strata/peers/verbs"
)

// sink collects the Forward messages an actor gets.
type sink struct {
	mu  sync.Mutex
	got []*messages.Forward
}

func (s *sink) receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.Forward); ok {
		s.mu.Lock()
		s.got = append(s.got, m)
		s.mu.Unlock()
	}
}

func (s *sink) wait(t *testing.T, n int, within time.Duration) []*messages.Forward {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s.mu.Lock()
		got := append([]*messages.Forward(nil), s.got...)
		s.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hidden is activation i: sizes from one frame to several, random bytes.
func hidden(i int) []byte {
	r := mrand.New(mrand.NewPCG(uint64(i), 99))
	sizes := []int{16, 4000, 4096, 9000, 64 << 10, 300 << 10}
	b := make([]byte, sizes[i%len(sizes)])
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// waitLink waits until a's link to b uses transport.
func waitLink(t *testing.T, a *peers.Node, b peer.ID, transport string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range a.Links() {
			if l.Peer == b && l.Transport == transport {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s link from %s to %s; links: %+v", transport, a.ID(), b, a.Links())
}

// sinkActor lets peers send activations to the "sink" actor.
var sinkActor = peerstest.WithConfig(func(cfg *peers.Config) {
	cfg.Inbound = []peers.Inbound{{Actor: "sink", Types: []string{"strata.Forward"}}}
})

// sendAll sends n activations from a to a sink on b and checks that all
// arrive once, in order, bit for bit.
func sendAll(t *testing.T, c *peerstest.Cluster, n int) {
	t.Helper()
	a, b := c.Nodes[0], c.Nodes[1]
	s := &sink{}
	local, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(s.receive), "sink")
	if err != nil {
		t.Fatal(err)
	}
	// The next sendAll spawns its own sink.
	defer func() { b.ActorSystem().Root.StopFuture(local).Wait() }()
	pid := a.PID(b.ID(), "sink")
	for i := 0; i < n; i++ {
		a.ActorSystem().Root.Send(pid, &messages.Forward{Session: "s", Position: uint32(i), Count: 1, Hidden: hidden(i)})
		if i%7 == 0 {
			time.Sleep(time.Millisecond) // let faults of the stall kind show
		}
	}
	got := s.wait(t, n, 20*time.Second)
	if len(got) != n {
		t.Fatalf("%d of %d activations arrived", len(got), n)
	}
	for i, m := range got {
		if int(m.Position) != i || !bytes.Equal(m.Hidden, hidden(i)) {
			t.Fatalf("activation %d: position %d, %d bytes (equal: %v)", i, m.Position, len(m.Hidden), bytes.Equal(m.Hidden, hidden(i)))
		}
	}
	time.Sleep(100 * time.Millisecond)
	if extra := s.wait(t, n+1, 0); len(extra) != n {
		t.Fatalf("%d activations arrived for %d sent", len(extra), n)
	}
}

func TestSideChannelDelivers(t *testing.T) {
	for _, tc := range []struct {
		name, transport, want string
		apple                 bool
	}{
		{"auto", peers.TransportAuto, peers.TransportShm, false},
		{"apple", peers.TransportShm, peers.TransportShm, true},
		{"tcp", peers.TransportTCP, peers.TransportTCP, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := peerstest.New(t, 2, sinkActor, peerstest.WithConfig(func(cfg *peers.Config) {
				cfg.Transport = tc.transport
				cfg.Verbs.Apple = tc.apple
			}))
			waitLink(t, c.Nodes[0], c.Nodes[1].ID(), tc.want)
			sendAll(t, c, 60)
			deadline := time.Now().Add(5 * time.Second)
			for ls := c.Nodes[0].Links(); len(ls) != 1 || ls[0].RTT <= 0; ls = c.Nodes[0].Links() {
				if time.Now().After(deadline) {
					t.Fatalf("links %+v: want one, with an RTT", ls)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if f := c.Nodes[0].LinkFallbacks() + c.Nodes[1].LinkFallbacks(); f != 0 {
				t.Fatalf("%d fallbacks on a clean link", f)
			}
			// Node 0's heartbeats tell node 1 about the link.
			a, b := c.Nodes[0], c.Nodes[1]
			for {
				var gossiped []*messages.LinkInfo
				for _, m := range b.Membership().View().Members {
					if m.ID == a.ID() {
						gossiped = m.Info.Links
					}
				}
				if len(gossiped) == 1 && gossiped[0].PeerId == b.ID().String() && gossiped[0].Transport == tc.want {
					break
				}
				if time.Now().After(deadline.Add(10 * time.Second)) {
					t.Fatalf("node 1 sees node 0's links as %v", gossiped)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestSideChannelFaults injects each fault into the frames node 0 sends:
// every activation still arrives once, in order and intact (resent over
// the stream), and the fault is counted.
func TestSideChannelFaults(t *testing.T) {
	for _, apple := range []bool{false, true} {
		for _, f := range []verbs.Fault{verbs.Drop, verbs.Truncate, verbs.Corrupt, verbs.Reorder, verbs.Stall} {
			t.Run(fmt.Sprintf("apple=%v/%v", apple, f), func(t *testing.T) {
				c := peerstest.New(t, 2, sinkActor, peerstest.WithConfig(func(cfg *peers.Config) {
					cfg.Verbs.Apple = apple
					cfg.Verbs.Stall = 300 * time.Millisecond
					cfg.Verbs.Faults = func(peer.ID) func(int) verbs.Fault {
						return func(n int) verbs.Fault {
							if n == 9 {
								return f
							}
							return verbs.Deliver
						}
					}
				}))
				waitLink(t, c.Nodes[0], c.Nodes[1].ID(), peers.TransportShm)
				sendAll(t, c, 40)
				if got := c.Nodes[0].LinkFallbacks() + c.Nodes[1].LinkFallbacks(); got == 0 {
					t.Fatalf("a %v fault went unnoticed", f)
				}
				waitLink(t, c.Nodes[0], c.Nodes[1].ID(), peers.TransportTCP)
			})
		}
	}
}

// TestSideChannelReturns: a link whose side channel stalled falls back to
// the stream, and once the backoff has passed and everything is
// acknowledged it negotiates shared memory again, losing, duplicating and
// reordering nothing on the way.
func TestSideChannelReturns(t *testing.T) {
	var (
		mu       sync.Mutex
		sessions = map[peer.ID]int{}
	)
	c := peerstest.New(t, 2, sinkActor, peerstest.WithConfig(func(cfg *peers.Config) {
		cfg.Verbs.Stall = 300 * time.Millisecond
		cfg.Verbs.Retry = 200 * time.Millisecond
		cfg.Verbs.Faults = func(p peer.ID) func(int) verbs.Fault {
			mu.Lock()
			defer mu.Unlock()
			if sessions[p]++; sessions[p] > 1 {
				return nil // healthy again
			}
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
	sendAll(t, c, 40)
	if got := a.LinkFallbacks() + b.LinkFallbacks(); got == 0 {
		t.Fatal("the stall went unnoticed")
	}
	deadline := time.Now().Add(20 * time.Second)
	for a.LinkReturns() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the side channel did not come back; links %+v", a.Links())
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitLink(t, a, b.ID(), peers.TransportShm)
	fallbacks := a.LinkFallbacks() + b.LinkFallbacks()
	sendAll(t, c, 40)
	if got := a.LinkFallbacks() + b.LinkFallbacks(); got != fallbacks {
		t.Fatalf("%d more fallbacks on the healthy side channel", got-fallbacks)
	}
	for _, l := range a.Links() {
		if l.Peer == b.ID() && (l.Transport != peers.TransportShm || l.Returns < 1) {
			t.Fatalf("link %+v: want shm, returned at least once", l)
		}
	}
}

// TestSideChannelRDMA: two nodes with an RDMA device (a fake one: there is
// none here) exchange their queue pairs' endpoints over the verbs stream,
// connect them (the fake device refuses any endpoint but the one its
// queue pair reported), prove the link with its token and carry
// activations over it; its faults fall back to the stream as shared
// memory's do; a node without a device, or one that allows only shared
// memory, keeps the link on the stream.
func TestSideChannelRDMA(t *testing.T) {
	dev := verbs.NewFakeRDMA()
	for _, tc := range []struct {
		name      string
		transport [2]string
		device    [2]bool
		apple     bool
		fault     verbs.Fault
		want      string
	}{
		{"rdma", [2]string{peers.TransportRDMA, peers.TransportRDMA}, [2]bool{true, true}, false, verbs.Deliver, peers.TransportRDMA},
		{"apple", [2]string{peers.TransportRDMA, peers.TransportRDMA}, [2]bool{true, true}, true, verbs.Deliver, peers.TransportRDMA},
		{"corrupt", [2]string{peers.TransportRDMA, peers.TransportRDMA}, [2]bool{true, true}, false, verbs.Corrupt, peers.TransportTCP},
		{"no-device", [2]string{peers.TransportRDMA, peers.TransportAuto}, [2]bool{true, false}, false, verbs.Deliver, peers.TransportTCP},
		{"shm-only", [2]string{peers.TransportRDMA, peers.TransportShm}, [2]bool{true, true}, false, verbs.Deliver, peers.TransportTCP},
		// A queue pair whose first message is not the link's token: nothing
		// it carries is delivered, and the link falls back.
		{"wrong-token", [2]string{peers.TransportRDMA, peers.TransportRDMA}, [2]bool{true, true}, false, verbs.Fault(255), peers.TransportTCP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault == verbs.Fault(255) {
				tc.fault = verbs.Deliver
				peers.MangleProof(func(b []byte) []byte {
					w := bytes.Clone(b)
					w[0] ^= 1
					return w
				})
				defer peers.MangleProof(nil)
			}
			c := peerstest.New(t, 2, sinkActor, peerstest.ForNode(func(k int, cfg *peers.Config) {
				cfg.Transport = tc.transport[k]
				cfg.Verbs.Apple = tc.apple
				cfg.Verbs.Stall = 300 * time.Millisecond
				if tc.device[k] {
					cfg.Verbs.RDMA = dev.Open
				}
				cfg.Verbs.Faults = func(peer.ID) func(int) verbs.Fault {
					return func(n int) verbs.Fault {
						if n == 9 {
							return tc.fault
						}
						return verbs.Deliver
					}
				}
			}))
			a, b := c.Nodes[0], c.Nodes[1]
			faulty := tc.fault != verbs.Deliver || tc.name == "wrong-token"
			switch {
			case tc.name == "wrong-token":
				waitLink(t, a, b.ID(), peers.TransportTCP) // it falls back at once
			case faulty:
				waitLink(t, a, b.ID(), peers.TransportRDMA)
			default:
				waitLink(t, a, b.ID(), tc.want)
			}
			sendAll(t, c, 40)
			if fallbacks := a.LinkFallbacks() + b.LinkFallbacks(); faulty != (fallbacks > 0) {
				t.Fatalf("%d fallbacks (a fault: %v)", fallbacks, faulty)
			}
			waitLink(t, a, b.ID(), tc.want)
		})
	}
}

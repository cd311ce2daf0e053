package peers_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/peer"

	"strata/messages"
	"strata/peers"
	"strata/peers/peerstest"
	"strata/peers/side"
	"strata/peers/verbs"
)

// borrower is an actor that takes activations in place (Inbound.Borrow):
// it checks each against what was sent while the slot is lent to it,
// then releases the slot, or, with keep set, holds on to the first keep
// of them (a shard too busy to read its input).
type borrower struct {
	mu       sync.Mutex
	got      []uint32 // positions, in arrival order
	bad      []string
	borrowed int
	keep     int
	kept     []*side.Borrowed
}

func (s *borrower) receive(ctx actor.Context) {
	var (
		fw *messages.Forward
		bw *side.Borrowed
	)
	switch m := ctx.Message().(type) {
	case *side.Borrowed:
		bw, fw = m, m.Message.(*messages.Forward)
	case *messages.Forward:
		fw = m
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, fw.Position)
	if !bytes.Equal(fw.Hidden, hidden(int(fw.Position))) {
		s.bad = append(s.bad, fmt.Sprintf("activation %d: %d bytes differ", fw.Position, len(fw.Hidden)))
	}
	if bw == nil {
		return
	}
	s.borrowed++
	if len(s.kept) < s.keep {
		s.kept = append(s.kept, bw)
		return
	}
	bw.Release()
	if fw.Hidden != nil {
		s.bad = append(s.bad, "Release left Hidden pointing into the slot")
	}
}

// check waits for n activations and checks they came in order, intact.
func (s *borrower) check(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.mu.Lock()
		k := len(s.got)
		s.mu.Unlock()
		if k >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) != n {
		t.Fatalf("%d of %d activations arrived", len(s.got), n)
	}
	for i, p := range s.got {
		if int(p) != i {
			t.Fatalf("activation %d arrived as %d: order %v", i, p, s.got)
		}
	}
	if len(s.bad) > 0 {
		t.Fatal(s.bad)
	}
}

// borrowCluster starts two nodes whose "sink" borrows activations.
func borrowCluster(t *testing.T, apple bool, faults func(peer.ID) func(int) verbs.Fault) (*peerstest.Cluster, *borrower) {
	c := peerstest.New(t, 2, peerstest.WithConfig(func(cfg *peers.Config) {
		cfg.Inbound = []peers.Inbound{{Actor: "sink", Types: []string{"strata.Forward"}, Borrow: true}}
		cfg.Verbs.Apple = apple
		cfg.Verbs.Faults = faults
		if faults != nil {
			cfg.Verbs.Stall = 300 * time.Millisecond
		}
	}))
	s := &borrower{}
	if _, err := c.Nodes[1].ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(s.receive), "sink"); err != nil {
		t.Fatal(err)
	}
	waitLink(t, c.Nodes[0], c.Nodes[1].ID(), peers.TransportShm)
	return c, s
}

func sendN(c *peerstest.Cluster, n int) {
	a, b := c.Nodes[0], c.Nodes[1]
	pid := a.PID(b.ID(), "sink")
	for i := 0; i < n; i++ {
		a.ActorSystem().Root.Send(pid, &messages.Forward{Session: "s", Position: uint32(i), Count: 1, Hidden: hidden(i)})
		if i%7 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestSideChannelInPlace: an actor that borrows gets every activation of
// one frame as the receive slot itself (no copy between the slot and the
// actor: the InPlace count), and the slot is not written again while
// the actor reads it (the bytes it checks are those sent).
func TestSideChannelInPlace(t *testing.T) {
	c, s := borrowCluster(t, false, nil)
	const n = 60
	// One at a time, as decode steps come: the actor always has its slot
	// back before the next arrives (a burst may find half the slots lent,
	// and copy: TestSideChannelInPlaceSlowActor).
	a, b := c.Nodes[0], c.Nodes[1]
	for i := 0; i < n; i++ {
		a.ActorSystem().Root.Send(a.PID(b.ID(), "sink"), &messages.Forward{Session: "s", Position: uint32(i), Count: 1, Hidden: hidden(i)})
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Microsecond) {
			s.mu.Lock()
			k := len(s.got)
			s.mu.Unlock()
			if k > i || time.Now().After(deadline) {
				break
			}
		}
	}
	s.check(t, n)
	st := c.Nodes[1].InPlace()
	if st.InPlace != n || st.Copied != 0 || s.borrowed != n {
		t.Fatalf("%+v, %d borrowed: want all %d in place", st, s.borrowed, n)
	}
}

// TestSideChannelInPlaceSlowActor: an actor that holds on to its slots
// gets at most half of them; the link then copies, so it never waits on
// the actor, and the held bytes stay as sent.
func TestSideChannelInPlaceSlowActor(t *testing.T) {
	c, s := borrowCluster(t, false, nil)
	s.mu.Lock()
	s.keep = 1000
	s.mu.Unlock()
	const n = 60
	sendN(c, n)
	s.check(t, n)
	st := c.Nodes[1].InPlace()
	if st.InPlace != 8 || st.InPlace+st.Copied != n {
		t.Fatalf("%+v: want half of the 16 slots lent, the rest copied", st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bw := range s.kept {
		fw := bw.Message.(*messages.Forward)
		if !bytes.Equal(fw.Hidden, hidden(int(fw.Position))) {
			t.Fatalf("held activation %d was overwritten", fw.Position)
		}
		bw.Release()
	}
}

// TestSideChannelInPlaceFaults: with each fault injected, activations
// still arrive in order and intact at an actor that borrows (a faulty
// frame is never lent as data: the bytes it checks are those sent).
func TestSideChannelInPlaceFaults(t *testing.T) {
	for _, apple := range []bool{false, true} {
		for _, f := range []verbs.Fault{verbs.Drop, verbs.Truncate, verbs.Corrupt, verbs.Reorder, verbs.Stall} {
			t.Run(fmt.Sprintf("apple=%v/%v", apple, f), func(t *testing.T) {
				c, s := borrowCluster(t, apple, func(peer.ID) func(int) verbs.Fault {
					return func(n int) verbs.Fault {
						if n == 9 {
							return f
						}
						return verbs.Deliver
					}
				})
				const n = 40
				sendN(c, n)
				s.check(t, n)
				if c.Nodes[1].InPlace().InPlace == 0 {
					t.Fatal("nothing delivered in place before the fault")
				}
				if got := c.Nodes[0].LinkFallbacks() + c.Nodes[1].LinkFallbacks(); got == 0 {
					t.Fatalf("a %v fault went unnoticed", f)
				}
			})
		}
	}
}

package peers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strata/peers/side"
	"strata/peers/verbs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"strata/messages"
	"strata/peers"
	"strata/peers/peerstest"
)

// within is a failure bound for things that happen on their own.
const within = 10 * time.Second

// testActors lets peers send Ping and Pong to, and watch, the actors the
// transport tests spawn: "t-" named, and unnamed ones ("$..." askers).
var testActors = peerstest.WithConfig(func(cfg *peers.Config) {
	cfg.Inbound = []peers.Inbound{
		{Actor: "t-*", Types: []string{"strata.Ping"}, Watch: true},
		{Actor: "$*", Types: []string{"strata.Pong"}},
	}
})

func ctxWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestFiveNodesConverge(t *testing.T) {
	c := peerstest.New(t, 5, peerstest.WithConfig(func(cfg *peers.Config) {
		cfg.Models = func() []*messages.ModelInfo {
			return []*messages.ModelInfo{{Name: "tiny", SizeBytes: 15, Digest: "sha256-fl:00"}}
		}
		cfg.MemoryBytes = 1 << 30
		cfg.Version = "test-1"
	}))
	// Every node sees the same sorted member list, with what each member
	// says about itself.
	want := c.Nodes[0].Membership().View().IDs()
	if len(want) != 5 || !slices.IsSortedFunc(want, func(a, b peer.ID) int { return strings.Compare(a.String(), b.String()) }) {
		t.Fatalf("view %v", want)
	}
	for i, nd := range c.Nodes {
		v := nd.Membership().View()
		if !slices.Equal(v.IDs(), want) || v.Version < 5 {
			t.Fatalf("node %d: view %v (version %d), want %v", i, v.IDs(), v.Version, want)
		}
		for _, m := range v.Members {
			in := m.Info
			if in.PeerId != m.ID.String() || in.Version != "test-1" || in.MemoryTotalBytes != 1<<30 || in.MemoryAvailableBytes > in.MemoryTotalBytes ||
				len(in.Addrs) == 0 || len(in.Models) != 1 || in.Models[0].Name != "tiny" || in.Models[0].SizeBytes != 15 {
				t.Fatalf("node %d sees %s as %v", i, m.ID, in)
			}
		}
	}
	// Shards announced by one node reach the others.
	c.Nodes[2].Membership().SetShards([]string{"tiny:0-3"})
	for i, nd := range c.Nodes {
		_, err := nd.Membership().Wait(ctxWithin(t, within), func(v peers.View) bool {
			m, ok := v.Member(c.Nodes[2].ID())
			return ok && slices.Equal(m.Info.Shards, []string{"tiny:0-3"})
		})
		if err != nil {
			t.Fatalf("node %d never saw the shards: %v", i, err)
		}
	}
}

// dropTime kills (or silences) a node and returns how long until every
// other node's view lost it.
func dropTime(t *testing.T, c *peerstest.Cluster, victim int, stop func()) time.Duration {
	t.Helper()
	gone := c.Nodes[victim].ID()
	var others []*peers.Node
	for i, nd := range c.Nodes {
		if i != victim {
			others = append(others, nd)
		}
	}
	start := time.Now()
	stop()
	for _, nd := range others {
		_, err := nd.Membership().Wait(ctxWithin(t, within), func(v peers.View) bool {
			_, ok := v.Member(gone)
			return !ok
		})
		if err != nil {
			t.Fatalf("node %s still sees %s after %v", nd.ID(), gone, within)
		}
	}
	return time.Since(start)
}

func TestKilledNodeDropped(t *testing.T) {
	c := peerstest.New(t, 5)
	sub := c.Nodes[0].Membership().Subscribe()
	defer sub.Close()
	d := dropTime(t, c, 3, func() { c.Kill(3) })
	// How fast is logged, not asserted (a timed bound failed once on a
	// loaded 2-core machine): that the drop came from the disconnect and
	// not from missed heartbeats is checked below by the Left reason.
	t.Logf("killed node dropped from every view in %v", d)
	if t.Failed() {
		for i := range c.Nodes {
			t.Logf("node %d log:\n%s", i, c.Log(i))
		}
	}
	// The subscription replays the 5 joins, then reports the leave
	// (Updated events come and go as free memory changes).
	var kinds []peers.EventKind
	for len(kinds) < 6 {
		ev, err := sub.Next(ctxWithin(t, within))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == peers.Updated {
			continue
		}
		kinds = append(kinds, ev.Kind)
		if ev.Kind == peers.Left && (ev.Member.ID != c.Nodes[3].ID() || ev.Reason != "disconnected") {
			t.Errorf("left event %+v", ev)
		}
	}
	if !slices.Equal(kinds, []peers.EventKind{peers.Joined, peers.Joined, peers.Joined, peers.Joined, peers.Joined, peers.Left}) {
		t.Errorf("events %v", kinds)
	}
	if err := c.WaitConverged(within); err != nil {
		t.Fatal(err)
	}
}

func TestSilentNodeDropped(t *testing.T) {
	c := peerstest.New(t, 3)
	victim := c.Nodes[1]
	d := dropTime(t, c, 1, func() { peers.PauseHeartbeats(victim, true) })
	t.Logf("silent (still connected) node dropped from every view in %v", d)
	if d > 3*time.Second {
		t.Errorf("silent node dropped after %v, want within 3s", d)
	}
	peers.PauseHeartbeats(victim, false)
	if err := c.WaitConverged(within); err != nil {
		t.Fatalf("silent node did not come back: %v", err)
	}
}

func TestIdentityPersists(t *testing.T) {
	dir := t.TempDir()
	cfg := peers.Config{DataDir: dir, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, Secret: peers.NewSecret(), Logger: slog.New(slog.DiscardHandler)}
	a, err := peers.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := a.ID()
	a.Close()
	b, err := peers.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.ID() != id {
		t.Fatalf("identity changed across restarts: %s then %s", id, b.ID())
	}
}

func TestWrongSecretRefused(t *testing.T) {
	c := peerstest.New(t, 2)
	target := peer.AddrInfo{ID: c.Nodes[0].ID(), Addrs: c.Nodes[0].Host().Addrs()}
	for _, tc := range []struct {
		name   string
		secret []byte
	}{
		{"other secret", peers.NewSecret()},
		{"no secret", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, Secret: tc.secret,
				Join: []string{c.Nodes[0].Addrs()[0].String()}, Logger: slog.New(slog.DiscardHandler)}
			stranger, err := peers.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer stranger.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := stranger.Connect(ctx, target); err == nil {
				t.Fatal("a node without the cluster secret connected")
			}
			// Nor can it reach an actor.
			_, err = stranger.ActorSystem().Root.RequestFuture(stranger.PID(target.ID, peers.PingActor), &messages.Ping{}, 500*time.Millisecond).Result()
			if err == nil {
				t.Fatal("a node without the cluster secret got an answer")
			}
			// It sees itself (from its first heartbeat, which may come after
			// a refusal this quick) and nobody else.
			wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer wcancel()
			stranger.Membership().Wait(wctx, func(v peers.View) bool { return len(v.Members) > 0 })
			if ids := stranger.Membership().View().IDs(); len(ids) != 1 || ids[0] != stranger.ID() {
				t.Errorf("stranger sees %v", ids)
			}
		})
	}
	if err := c.WaitConverged(within); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.Nodes {
		if n := len(nd.Host().Network().Peers()); n != 1 {
			t.Errorf("node %s is connected to %d peers, want 1", nd.ID(), n)
		}
	}
}

// Without a secret the network is open and QUIC is available.
func TestOpenNetworkQUIC(t *testing.T) {
	c := peerstest.New(t, 2, peerstest.WithConfig(func(cfg *peers.Config) {
		cfg.Listen = []string{"/ip4/127.0.0.1/udp/0/quic-v1"}
		cfg.Secret = nil
	}))
	a, b := c.Nodes[0], c.Nodes[1]
	if conns := a.Host().Network().ConnsToPeer(b.ID()); len(conns) == 0 || !strings.Contains(conns[0].RemoteMultiaddr().String(), "quic-v1") {
		t.Fatalf("connections %v", conns)
	}
	if _, err := a.ActorSystem().Root.RequestFuture(a.PID(b.ID(), peers.PingActor), &messages.Ping{}, within).Result(); err != nil {
		t.Fatal(err)
	}
}

// stopSeq asks echo to stop itself.
const stopSeq = 1 << 60

// echo answers every Ping with a Pong, and stops on Ping{Seq: stopSeq}.
func echo(ctx actor.Context) {
	if p, ok := ctx.Message().(*messages.Ping); ok {
		if p.Seq == stopSeq {
			ctx.Stop(ctx.Self())
			return
		}
		ctx.Respond(&messages.Pong{Seq: p.Seq, Payload: p.Payload})
	}
}

func TestRequestResponse(t *testing.T) {
	c := peerstest.New(t, 3, testActors)
	a, b := c.Nodes[0], c.Nodes[2]
	if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(echo), "t-echo"); err != nil {
		t.Fatal(err)
	}
	remote := a.PID(b.ID(), "t-echo")

	t.Run("future", func(t *testing.T) {
		res, err := a.ActorSystem().Root.RequestFuture(remote, &messages.Ping{Seq: 42, Payload: []byte("hi")}, within).Result()
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := res.(*messages.Pong); !ok || p.Seq != 42 || string(p.Payload) != "hi" {
			t.Fatalf("reply %v", res)
		}
	})

	t.Run("actor to actor", func(t *testing.T) {
		// The asker's PID travels as the sender; the reply comes back to it.
		got := make(chan uint64, 1)
		asker := func(ctx actor.Context) {
			switch m := ctx.Message().(type) {
			case *actor.Started:
				ctx.Request(remote, &messages.Ping{Seq: 1})
			case *messages.Pong:
				got <- m.Seq
			}
		}
		pid := a.ActorSystem().Root.Spawn(actor.PropsFromFunc(asker))
		defer a.ActorSystem().Root.Stop(pid)
		if pid.Address != a.ID().String() {
			t.Fatalf("local PID address %q, want the peer ID", pid.Address)
		}
		select {
		case seq := <-got:
			if seq != 1 {
				t.Fatalf("reply %d", seq)
			}
		case <-time.After(within):
			t.Fatal("no reply")
		}
	})

	t.Run("in order", func(t *testing.T) {
		const n = 2000
		seqs := make(chan uint64, n)
		collect := func(ctx actor.Context) {
			if p, ok := ctx.Message().(*messages.Ping); ok {
				seqs <- p.Seq
			}
		}
		if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(collect), "t-collect"); err != nil {
			t.Fatal(err)
		}
		to := a.PID(b.ID(), "t-collect")
		for i := range n {
			a.ActorSystem().Root.Send(to, &messages.Ping{Seq: uint64(i)})
		}
		for i := range n {
			select {
			case s := <-seqs:
				if s != uint64(i) {
					t.Fatalf("message %d arrived as number %d", s, i)
				}
			case <-time.After(within):
				t.Fatalf("only %d of %d messages arrived", i, n)
			}
		}
	})

	t.Run("in order per sender, small and large mixed", func(t *testing.T) {
		const senders, each = 4, 300
		got := make(chan *messages.Ping, senders*each)
		if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
			if p, ok := ctx.Message().(*messages.Ping); ok {
				got <- p
			}
		}), "t-mixed"); err != nil {
			t.Fatal(err)
		}
		to := a.PID(b.ID(), "t-mixed")
		big := make([]byte, 100<<10) // above the size a sender writes itself
		for s := range senders {
			go func() {
				for i := range each {
					p := &messages.Ping{Seq: uint64(s<<32 | i)}
					if i%7 == 0 {
						p.Payload = big
					}
					a.ActorSystem().Root.Send(to, p)
				}
			}()
		}
		next := make([]int, senders)
		for range senders * each {
			select {
			case p := <-got:
				s, i := int(p.Seq>>32), int(p.Seq&(1<<32-1))
				if i != next[s] {
					t.Fatalf("sender %d: message %d arrived when %d was due", s, i, next[s])
				}
				next[s]++
			case <-time.After(within):
				t.Fatalf("messages missing: %v of %d each", next, each)
			}
		}
	})

	t.Run("large", func(t *testing.T) {
		payload := bytes.Repeat([]byte{1, 2, 3, 4}, 4<<20) // 16 MiB
		res, err := a.ActorSystem().Root.RequestFuture(remote, &messages.Ping{Seq: 2, Payload: payload}, within).Result()
		if err != nil {
			t.Fatal(err)
		}
		if p := res.(*messages.Pong); !bytes.Equal(p.Payload, payload) {
			t.Fatal("payload changed on the way")
		}
	})

	t.Run("no such actor", func(t *testing.T) {
		_, err := a.ActorSystem().Root.RequestFuture(a.PID(b.ID(), "t-nobody"), &messages.Ping{}, within).Result()
		if !errors.Is(err, actor.ErrDeadLetter) {
			t.Fatalf("err %v, want dead letter", err)
		}
	})

	t.Run("own node", func(t *testing.T) {
		res, err := b.ActorSystem().Root.RequestFuture(b.PID(b.ID(), "t-echo"), &messages.Ping{Seq: 5}, within).Result()
		if err != nil || res.(*messages.Pong).Seq != 5 {
			t.Fatal(res, err)
		}
	})
}

func TestIdleStreamClosed(t *testing.T) {
	defer peers.SetWriterIdle(peers.SetWriterIdle(50 * time.Millisecond))
	c := peerstest.New(t, 2)
	a, b := c.Nodes[0], c.Nodes[1]
	pid := a.PID(b.ID(), peers.PingActor)
	actorStreams := func() int {
		n := 0
		for _, conn := range a.Host().Network().ConnsToPeer(b.ID()) {
			for _, s := range conn.GetStreams() {
				if s.Protocol() == peers.ActorProtocol {
					n++
				}
			}
		}
		return n
	}
	for round := range 2 { // the stream closes when idle, and reopens on demand
		if _, err := a.ActorSystem().Root.RequestFuture(pid, &messages.Ping{}, within).Result(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		deadline := time.Now().Add(within)
		for actorStreams() > 0 { // no event to wait on: poll, bounded
			if time.Now().After(deadline) {
				t.Fatalf("round %d: idle actor stream still open", round)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestMessageCap(t *testing.T) {
	c := peerstest.New(t, 2, peerstest.WithConfig(func(cfg *peers.Config) { cfg.MaxMessageBytes = 64 << 10 }))
	a, b := c.Nodes[0], c.Nodes[1]
	pid := a.PID(b.ID(), peers.PingActor)
	// Over the cap: dropped at the sender with a log line; the future
	// times out (a short bound: nothing will come).
	_, err := a.ActorSystem().Root.RequestFuture(pid, &messages.Ping{Payload: make([]byte, 100<<10)}, 300*time.Millisecond).Result()
	if !errors.Is(err, actor.ErrTimeout) {
		t.Fatalf("oversized message: %v", err)
	}
	if !strings.Contains(c.Log(0), "exceeds the size cap") {
		t.Errorf("no log line for the oversized message:\n%s", c.Log(0))
	}
	if _, err := a.ActorSystem().Root.RequestFuture(pid, &messages.Ping{Payload: make([]byte, 60<<10)}, within).Result(); err != nil {
		t.Fatal(err)
	}
}

// terminations spawns, on n, an actor that watches target and reports the
// Terminated messages it gets.
func terminations(t *testing.T, n *peers.Node, target *actor.PID) (<-chan *actor.Terminated, *actor.PID) {
	ch := make(chan *actor.Terminated, 4)
	watching := make(chan struct{})
	pid := n.ActorSystem().Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(target)
			close(watching)
		case *actor.Terminated:
			ch <- m
		}
	}))
	<-watching
	t.Cleanup(func() { n.ActorSystem().Root.Stop(pid) })
	return ch, pid
}

func waitTerminated(t *testing.T, ch <-chan *actor.Terminated, who *actor.PID, why actor.TerminatedReason) {
	t.Helper()
	select {
	case m := <-ch:
		if m.Who.Id != who.Id || m.Who.Address != who.Address || m.Why != why {
			t.Fatalf("Terminated{%v, %v}, want {%v, %v}", m.Who, m.Why, who, why)
		}
	case <-time.After(within):
		t.Fatalf("no Terminated for %v", who)
	}
}

func TestWatchAcrossPeers(t *testing.T) {
	c := peerstest.New(t, 3, testActors)
	a, b := c.Nodes[0], c.Nodes[1]
	spawn := func(n *peers.Node, name string) *actor.PID {
		pid, err := n.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(echo), name)
		if err != nil {
			t.Fatal(err)
		}
		// A copy: a PID caches the process it resolves to, and the
		// actor's own (ctx.Self) must not learn the other node's route.
		return actor.NewPID(pid.Address, pid.Id)
	}
	ping := func(pid *actor.PID) { // a round trip: the Watch sent before it has arrived
		if _, err := a.ActorSystem().Root.RequestFuture(pid, &messages.Ping{}, within).Result(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("remote actor stops", func(t *testing.T) {
		target := spawn(b, "t-stops")
		ch, _ := terminations(t, a, target)
		ping(target)
		a.ActorSystem().Root.Send(target, &messages.Ping{Seq: stopSeq}) // it stops itself
		waitTerminated(t, ch, target, actor.TerminatedReason_Stopped)
	})

	t.Run("no such remote actor", func(t *testing.T) {
		target := a.PID(b.ID(), "t-never-spawned")
		ch, _ := terminations(t, a, target)
		waitTerminated(t, ch, target, actor.TerminatedReason_NotFound)
	})

	t.Run("remote node dies", func(t *testing.T) {
		victim := c.Nodes[2]
		target := spawn(victim, "t-dies")
		ch, _ := terminations(t, a, target)
		ping(target)
		c.Kill(2)
		waitTerminated(t, ch, target, actor.TerminatedReason_AddressTerminated)
	})

	t.Run("remote watcher", func(t *testing.T) {
		// An actor on b watches one on a: the Terminated travels back.
		target := spawn(a, "t-watched-from-b")
		ch, _ := terminations(t, b, target)
		if _, err := b.ActorSystem().Root.RequestFuture(target, &messages.Ping{}, within).Result(); err != nil {
			t.Fatal(err)
		}
		a.ActorSystem().Root.Stop(a.PID(a.ID(), target.Id)) // a fresh PID: target now routes via b
		waitTerminated(t, ch, target, actor.TerminatedReason_Stopped)
	})

	if n := peers.Watches(a) + peers.Watches(b); n != 0 {
		t.Errorf("%d watches left after every watched actor ended", n)
	}
}

// Peers may not stop, poison or watch local actors outside Config.Inbound,
// nor send them anything else: the actor keeps serving.
func TestLifecycleFromPeerRefused(t *testing.T) {
	c := peerstest.New(t, 2, testActors)
	a, b := c.Nodes[0], c.Nodes[1]
	stopped := make(chan struct{})
	if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Stopping:
			close(stopped)
		case *messages.Ping:
			ctx.Respond(&messages.Pong{})
		}
	}), "t-victim"); err != nil {
		t.Fatal(err)
	}
	victim := a.PID(b.ID(), "t-victim")
	alive := func(t *testing.T) {
		t.Helper()
		if _, err := a.ActorSystem().Root.RequestFuture(victim, &messages.Ping{}, within).Result(); err != nil {
			t.Fatalf("victim no longer answers: %v", err)
		}
		select {
		case <-stopped:
			t.Fatal("a peer stopped a local actor")
		default:
		}
	}
	// Through the API: the sender does not even send them.
	a.ActorSystem().Root.Stop(victim)
	a.ActorSystem().Root.Poison(victim)
	alive(t)

	// A peer that sends them anyway has its stream closed.
	watcher := &actor.PID{Address: a.ID().String(), Id: "w"}
	stop, _ := proto.Marshal(&actor.Stop{})
	pill, _ := proto.Marshal(&actor.PoisonPill{})
	watch, _ := proto.Marshal(&actor.Watch{Watcher: watcher})
	foreignWatch, _ := proto.Marshal(&actor.Watch{Watcher: &actor.PID{Address: b.ID().String(), Id: "w"}})
	ping, _ := proto.Marshal(&messages.Ping{})
	for _, tc := range []struct {
		name string
		send []byte
		want string
	}{
		{"Stop", frame(&messages.Envelope{TargetId: "t-victim", TypeName: "actor.Stop", System: true}, stop), "peers may not stop"},
		{"Stop to the host", frame(&messages.Envelope{TargetId: "ping", TypeName: "actor.Stop", System: true}, stop), "peers may not stop"},
		{"PoisonPill", frame(&messages.Envelope{TargetId: "t-victim", TypeName: "actor.PoisonPill"}, pill), "peers may not stop"},
		{"PoisonPill to a future", frame(&messages.Envelope{TargetId: "future$x", TypeName: "actor.PoisonPill"}, pill), "peers may not stop"},
		{"Watch outside the allowlist", frame(&messages.Envelope{TargetId: "ping", TypeName: "actor.Watch", System: true}, watch), "not allowed from peers"},
		{"Watch for another node's watcher", frame(&messages.Envelope{TargetId: "t-victim", TypeName: "actor.Watch", System: true}, foreignWatch), "watcher not on the sending peer"},
		{"target outside the allowlist", frame(&messages.Envelope{TargetId: "secret-actor", TypeName: "strata.Ping"}, ping), "not allowed from peers"},
		{"type outside the allowlist", frame(&messages.Envelope{TargetId: "ping", TypeName: "strata.Pong"}, ping), "not allowed from peers"},
		{"sender on a third node", frame(&messages.Envelope{TargetId: "ping", TypeName: "strata.Ping", Sender: &messages.PID{Address: b.ID().String(), Id: "x"}}, ping), "sender on another node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sendRefused(t, c, tc.send, tc.want)
			alive(t)
		})
	}
}

// sendRefused sends raw bytes from node 0 to node 1 and checks that node 1
// closed the stream with one log line containing want.
func sendRefused(t *testing.T, c *peerstest.Cluster, send []byte, want string) {
	t.Helper()
	before := strings.Count(c.Log(1), "closing actor stream")
	s := rawStream(t, c.Nodes[0], c.Nodes[1])
	s.Write(send)
	if cw, ok := s.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	if _, err := io.ReadAll(s); err == nil {
		t.Fatal("stream ended cleanly, want a reset")
	}
	log := c.Log(1)
	if n := strings.Count(log, "closing actor stream") - before; n != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", n, log)
	}
	if !strings.Contains(log, want) {
		t.Fatalf("log lacks %q:\n%s", want, log)
	}
}

// A peer may end a watch only with a Terminated about its own actor that a
// local actor watches: a forged one about a local actor (or another node's)
// would make a local actor forget a live one.
func TestForgedTerminatedRefused(t *testing.T) {
	c := peerstest.New(t, 3, testActors)
	a, b, third := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	// On b, an actor watches its local child and an actor on third.
	child := b.PID(b.ID(), "t-watcher/child")
	remote := b.PID(third.ID(), "t-remote")
	if _, err := third.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(echo), "t-remote"); err != nil {
		t.Fatal(err)
	}
	got := make(chan *actor.Terminated, 4)
	ready := make(chan struct{})
	if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			c, _ := ctx.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "child")
			ctx.Watch(c)
			ctx.Watch(remote)
			close(ready)
		case *actor.Terminated:
			got <- m
		}
	}), "t-watcher"); err != nil {
		t.Fatal(err)
	}
	<-ready
	for _, who := range []*actor.PID{child, remote} {
		term, _ := proto.Marshal(&actor.Terminated{Who: who, Why: actor.TerminatedReason_Stopped})
		sendRefused(t, c, frame(&messages.Envelope{TargetId: "t-watcher", TypeName: "actor.Terminated", System: true}, term), "not an actor of the sending peer")
	}
	// About a's own actor that nobody on b watches: dropped quietly.
	before := strings.Count(c.Log(1), "closing actor stream")
	term, _ := proto.Marshal(&actor.Terminated{Who: a.PID(a.ID(), "t-x"), Why: actor.TerminatedReason_Stopped})
	s := rawStream(t, a, b)
	s.Write(frame(&messages.Envelope{TargetId: "t-watcher", TypeName: "actor.Terminated", System: true}, term))
	s.(interface{ CloseWrite() error }).CloseWrite()
	if _, err := io.ReadAll(s); err != nil {
		t.Fatalf("unwatched Terminated: %v", err)
	}
	if n := strings.Count(c.Log(1), "closing actor stream") - before; n != 0 {
		t.Errorf("unwatched Terminated logged %d lines", n)
	}
	select {
	case m := <-got:
		t.Fatalf("the watcher heard a forged %v", m)
	case <-time.After(200 * time.Millisecond):
	}
	// The real end still arrives.
	b.ActorSystem().Root.Send(remote, &messages.Ping{Seq: stopSeq})
	select {
	case m := <-got:
		if m.Who.Id != "t-remote" {
			t.Fatalf("Terminated %v", m)
		}
	case <-time.After(within):
		t.Fatal("no Terminated for the remote actor")
	}
}

// rawStream opens an actor stream from one node to another, bypassing the
// bridge, to send what a broken or hostile peer might.
func rawStream(t *testing.T, from, to *peers.Node) io.ReadWriteCloser {
	s, err := from.Host().NewStream(ctxWithin(t, within), to.ID(), peers.ActorProtocol)
	if err != nil {
		t.Fatal(err)
	}
	s.SetDeadline(time.Now().Add(within))
	return s
}

func frame(env *messages.Envelope, payload []byte) []byte {
	h, _ := proto.Marshal(env)
	body := protowire.AppendVarint(nil, uint64(len(h)))
	body = append(append(body, h...), payload...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestGarbageFromPeer(t *testing.T) {
	c := peerstest.New(t, 2)
	a, b := c.Nodes[0], c.Nodes[1]
	ping, _ := proto.Marshal(&messages.Ping{Seq: 1})
	term, _ := proto.Marshal(&actor.Terminated{Who: actor.NewPID(a.ID().String(), "x")})
	for _, tc := range []struct {
		name string
		send []byte
		want string
	}{
		{"oversized", binary.BigEndian.AppendUint32(nil, 1<<30), "exceeds the"},
		{"truncated", append(binary.BigEndian.AppendUint32(nil, 1000), "only this"...), "truncated frame"},
		{"truncated length", []byte{0, 0}, "truncated frame length"},
		{"garbage envelope", append(binary.BigEndian.AppendUint32(nil, 8), 5, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2), "malformed frame"},
		{"unknown type", frame(&messages.Envelope{TargetId: "ping", TypeName: "evil.Payload"}, ping), "unknown message type"},
		{"forged Terminated", frame(&messages.Envelope{TargetId: "ping", TypeName: "actor.Terminated"}, term), "sent as a user message"},
		{"user message as system", frame(&messages.Envelope{TargetId: "ping", TypeName: "strata.Ping", System: true}, ping), "not a system message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sendRefused(t, c, tc.send, tc.want)
			// b is still fine.
			if _, err := a.ActorSystem().Root.RequestFuture(a.PID(b.ID(), peers.PingActor), &messages.Ping{}, within).Result(); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A clean stream with a valid frame, then EOF, logs nothing.
	before := strings.Count(c.Log(1), "closing actor stream")
	s := rawStream(t, a, b)
	s.Write(frame(&messages.Envelope{TargetId: "ping", TypeName: "strata.Ping"}, ping))
	s.(interface{ CloseWrite() error }).CloseWrite()
	if _, err := io.ReadAll(s); err != nil {
		t.Fatalf("clean stream: %v", err)
	}
	if n := strings.Count(c.Log(1), "closing actor stream") - before; n != 0 {
		t.Errorf("clean stream logged %d lines", n)
	}
}

func TestPortInUse(t *testing.T) {
	// A node already on the port: libp2p's default SO_REUSEPORT would let a
	// second one share it.
	first, err := peers.New(context.Background(), peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	addr := first.Host().Addrs()[0].String()
	second, err := peers.New(context.Background(), peers.Config{Listen: []string{addr}, NoMDNS: true, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		second.Close()
		t.Fatalf("two nodes listen on %s", addr)
	}
	if !errors.Is(err, peers.ErrAddrInUse) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q", err)
	}
}

func TestConfigErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name string
		cfg  peers.Config
		want string
	}{
		{"malformed listen", peers.Config{Listen: []string{"/ip4/nope/tcp/1"}}, `listen "/ip4/nope/tcp/1": malformed multiaddr`},
		{"malformed join", peers.Config{Join: []string{"127.0.0.1:7341"}}, `join "127.0.0.1:7341": malformed multiaddr`},
		{"join without peer ID", peers.Config{Join: []string{"/ip4/127.0.0.1/tcp/7341"}}, "needs the peer ID"},
		{"port in use", peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/" + strconv.Itoa(port)}}, "address already in use"},
		{"QUIC with a secret", peers.Config{Secret: peers.NewSecret(), Listen: []string{"/ip4/127.0.0.1/udp/0/quic-v1"}}, "QUIC cannot be used"},
		{"short secret", peers.Config{Secret: []byte("hunter2")}, "too short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.NoMDNS = true
			tc.cfg.Logger = slog.New(slog.DiscardHandler)
			n, err := peers.New(context.Background(), tc.cfg)
			if err == nil {
				n.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line with %q", err, tc.want)
			}
		})
	}
}

// A frame's announced length costs nothing until its bytes arrive: eight
// streams announcing 64 MiB each and sending 32 bytes must not take
// hundreds of MiB.
func TestAnnouncedLengthNotAllocated(t *testing.T) {
	c := peerstest.New(t, 2)
	a, b := c.Nodes[0], c.Nodes[1]
	before := heapInUse()
	for range 8 {
		s := rawStream(t, a, b)
		defer s.Close() // open until the test ends
		s.Write(append(binary.BigEndian.AppendUint32(nil, peers.DefaultMaxMessageBytes), make([]byte, 28)...))
	}
	time.Sleep(500 * time.Millisecond) // b reads the headers; nothing to wait on
	after := heapInUse()
	grew := int64(after) - int64(before)
	t.Logf("heap in use %d MiB -> %d MiB", before>>20, after>>20)
	if grew > 32<<20 {
		t.Fatalf("8 announced 64 MiB frames took %d MiB of heap", grew>>20)
	}
	// b still answers.
	if _, err := a.ActorSystem().Root.RequestFuture(a.PID(b.ID(), peers.PingActor), &messages.Ping{}, within).Result(); err != nil {
		t.Fatal(err)
	}
}

// The bytes of frames in flight from one peer, over all its streams, are
// capped (twice MaxMessageBytes).
func TestBufferedPerPeerCapped(t *testing.T) {
	c := peerstest.New(t, 2, peerstest.WithConfig(func(cfg *peers.Config) { cfg.MaxMessageBytes = 1 << 20 }))
	a, b := c.Nodes[0], c.Nodes[1]
	part := append(binary.BigEndian.AppendUint32(nil, 1<<20), make([]byte, 900<<10)...)
	var streams []io.ReadWriteCloser
	for range 3 {
		s := rawStream(t, a, b)
		s.Write(part)
		streams = append(streams, s)
	}
	deadline := time.Now().Add(within)
	for !strings.Contains(c.Log(1), "would hold more than 2097152 bytes") {
		if time.Now().After(deadline) {
			t.Fatalf("three streams of 900 KiB each in flight, no refusal:\n%s", c.Log(1))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Once they are gone, the peer is served again.
	for _, s := range streams {
		s.(interface{ Reset() error }).Reset()
	}
	for peers.Buffered(b) != 0 { // no event to wait on: poll, bounded
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held after the streams closed", peers.Buffered(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := a.ActorSystem().Root.RequestFuture(a.PID(b.ID(), peers.PingActor), &messages.Ping{}, within).Result(); err != nil {
		t.Fatal(err)
	}
}

// A future waiting for a peer's answer fails as soon as the peer leaves
// the view (here: it stops heartbeating but stays connected, like a
// SIGSTOPped process), not at its own timeout.
func TestFutureFailsWhenPeerLeaves(t *testing.T) {
	c := peerstest.New(t, 2, testActors)
	a, b := c.Nodes[0], c.Nodes[1]
	if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "t-silent"); err != nil {
		t.Fatal(err)
	}
	f := a.ActorSystem().Root.RequestFuture(a.PID(b.ID(), "t-silent"), &messages.Ping{}, time.Minute)
	start := time.Now()
	peers.PauseHeartbeats(b, true)
	done := make(chan error, 1)
	go func() { _, err := f.Result(); done <- err }()
	select {
	case err := <-done:
		t.Logf("failed after %v: %v", time.Since(start), err)
		if !errors.Is(err, actor.ErrDeadLetter) {
			t.Fatalf("err %v, want %v", err, actor.ErrDeadLetter)
		}
	case <-time.After(within):
		t.Fatalf("the future still waits %v after its peer stopped heartbeating", within)
	}
	if _, ok := a.Membership().View().Member(b.ID()); ok {
		t.Fatal("the future failed while its peer is still in the view")
	}
}

// The verbs stream's control messages cost nothing until their bytes
// arrive either (attack 4 of the second hardening round: 16 identities
// each announcing a 64 MiB control message and sending 5 bytes took the
// heap from 4 to 1030 MiB), and what arrives counts in the peer's budget.
func TestVerbsStreamAnnouncedLengthNotAllocated(t *testing.T) {
	c := peerstest.New(t, 2)
	a, b := c.Nodes[0], c.Nodes[1]
	waitLink(t, a, b.ID(), "shm") // see TestForeignRingNotMapped
	before := heapInUse()
	for range 8 {
		s, err := a.Host().NewStream(ctxWithin(t, within), b.ID(), side.Protocol)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		s.SetDeadline(time.Now().Add(within))
		hello := []byte(`{"want":"tcp","token":"` + strings.Repeat("ab", 32) + `"}`)
		s.Write(append(binary.BigEndian.AppendUint32([]byte{1}, uint32(len(hello))), hello...)) // ctlHello
		var h [5]byte
		if _, err := io.ReadFull(s, h[:]); err != nil || h[0] != 2 { // ctlReply
			t.Fatalf("no reply to the hello: %v %v", h, err)
		}
		io.ReadFull(s, make([]byte, binary.BigEndian.Uint32(h[1:])))
		// A data message announced at the cap, 5 bytes of it sent.
		s.Write(append(binary.BigEndian.AppendUint32([]byte{3}, peers.DefaultMaxMessageBytes), 0, 0, 0, 0, 0))
	}
	time.Sleep(500 * time.Millisecond) // b reads the headers; nothing to wait on
	after := heapInUse()
	grew := int64(after) - int64(before)
	t.Logf("heap in use %d MiB -> %d MiB", before>>20, after>>20)
	// A peer's new verbs stream ends its previous one, so one identity
	// holds one: 64 MiB of heap before the fix.
	if grew > 16<<20 {
		t.Fatalf("8 announced 64 MiB control messages took %d MiB of heap", grew>>20)
	}
	if held := peers.Buffered(b); held <= 0 || held > 8<<20 {
		t.Fatalf("%d bytes counted in the peer's budget, want the few chunks that arrived", held)
	}
	if _, err := a.ActorSystem().Root.RequestFuture(a.PID(b.ID(), peers.PingActor), &messages.Ping{}, within).Result(); err != nil {
		t.Fatal(err)
	}
}

// A co-located peer that offers a ring file it does not share with this
// node's user alone is not mapped: the link uses the stream and says why
// (attack 1 of the second hardening round: the peer offered its own
// /dev/shm file, then truncated it, and the node died of SIGBUS).
func TestForeignRingNotMapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a file another user's needs root")
	}
	c := peerstest.New(t, 2)
	a, b := c.Nodes[0], c.Nodes[1]
	// a's own link to b first: the stream below then ends it, and a
	// negotiates again only after a backoff (else a's new stream could
	// end this one before b answers).
	waitLink(t, a, b.ID(), "shm")
	token := make([]byte, 32)
	rand.Read(token)
	caps := verbs.Caps{FrameBytes: 4096, Depth: 4}
	ring, err := verbs.CreateShm(caps, token)
	if err != nil {
		t.Fatal(err)
	}
	// Not closed: the attacker's own mapping shrinks below too, and
	// touching it would kill this test. Its names go.
	defer ring.Unlink()
	if err := os.Chown(ring.Path(), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	hello, _ := json.Marshal(map[string]any{"want": "shm", "boot_id": strings.TrimSpace(string(boot)), "token": hex.EncodeToString(token), "shm": true, "caps": caps})
	s, err := a.Host().NewStream(ctxWithin(t, within), b.ID(), side.Protocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	s.SetDeadline(time.Now().Add(within))
	s.Write(append(binary.BigEndian.AppendUint32([]byte{1}, uint32(len(hello))), hello...)) // ctlHello
	var h [5]byte
	if _, err := io.ReadFull(s, h[:]); err != nil || h[0] != 2 { // ctlReply
		t.Fatalf("no reply to the hello: %v %v", h, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(h[1:]))
	io.ReadFull(s, body)
	var rep struct{ Transport, Why string }
	json.Unmarshal(body, &rep)
	if rep.Transport != "tcp" || !strings.Contains(rep.Why, "belongs to user 65534") {
		t.Fatalf("a ring of another user's: reply %s", body)
	}
	t.Log(rep.Why)
	// The ring shrinks under whoever mapped it: nothing here did.
	if err := os.Truncate(ring.Path(), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ActorSystem().Root.RequestFuture(a.PID(b.ID(), peers.PingActor), &messages.Ping{}, within).Result(); err != nil {
		t.Fatal(err)
	}
}

// A message to an actor the peer does not have comes back as the peer's
// DeadLetterResponse; it is dropped quietly, and the stream it came on,
// which carries the peer's other messages, stays open (attack 5 of the
// second hardening round: a leader pointed at a member actor that did not
// exist closed its stream from the member at every step).
func TestDeadLetterResponseDroppedQuietly(t *testing.T) {
	c := peerstest.New(t, 2, testActors)
	a, b := c.Nodes[0], c.Nodes[1]
	if _, err := b.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(echo), "t-echo"); err != nil {
		t.Fatal(err)
	}
	got := make(chan uint64, 16)
	asker := func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Request(a.PID(b.ID(), "t-nobody"), &messages.Ping{Seq: 1}) // b answers: dead letter
			ctx.Request(a.PID(b.ID(), "t-echo"), &messages.Ping{Seq: 2})
		case *messages.Pong:
			got <- m.Seq
		}
	}
	pid := a.ActorSystem().Root.Spawn(actor.PropsFromFunc(asker))
	defer a.ActorSystem().Root.Stop(pid)
	select {
	case seq := <-got:
		if seq != 2 {
			t.Fatalf("pong %d", seq)
		}
	case <-time.After(within):
		t.Fatal("no pong")
	}
	time.Sleep(200 * time.Millisecond) // the dead letter's answer crosses meanwhile; nothing to wait on
	if log := c.Log(0); strings.Contains(log, "closing actor stream") {
		t.Fatalf("a closed b's stream:\n%s", log)
	}
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestAnnouncedMeasures: a node's heartbeat carries its memory bandwidth
// and its links' measured RTTs, and the other members see them.
func TestAnnouncedMeasures(t *testing.T) {
	c := peerstest.New(t, 2, peerstest.WithConfig(func(cfg *peers.Config) { cfg.MemoryBandwidth = 3e11 }))
	a, b := c.Nodes[0], c.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := a.Membership().Wait(ctx, func(v peers.View) bool {
		m, ok := v.Member(b.ID())
		return ok && len(m.Info.GetLinks()) == 1 && m.Info.Links[0].RttUs > 0
	})
	if err != nil {
		t.Fatalf("node a never saw b announce a measured link: %v", err)
	}
	m, _ := v.Member(b.ID())
	l := m.Info.Links[0]
	t.Logf("b announces %g B/s, link to %s: %d µs over %s", m.Info.MemoryBandwidth, l.PeerId, l.RttUs, l.Transport)
	if m.Info.MemoryBandwidth != 3e11 || l.PeerId != a.ID().String() || l.Transport == "" {
		t.Errorf("b's announcement: bandwidth %g, link %v", m.Info.MemoryBandwidth, l)
	}
}

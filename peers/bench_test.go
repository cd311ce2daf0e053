package peers_test

import (
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/messages"
	"strata/peers"
	"strata/peers/peerstest"
)

// reportLatency reports the p50 and p99 of a set of round trips.
func reportLatency(b *testing.B, rtts []time.Duration) {
	slices.Sort(rtts)
	q := func(p float64) float64 { return float64(rtts[int(p*float64(len(rtts)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op") // the percentiles say more than the mean
}

// BenchmarkRoundTrip measures a small actor request and its reply between
// two nodes on loopback: RequestFuture from node A's root context to the
// ping actor on node B (Ping out, Pong back, one at a time). Run it over
// 10,000 messages with
//
//	go test ./peers -run '^$' -bench RoundTrip -benchtime 10000x
func BenchmarkRoundTrip(b *testing.B) {
	c := peerstest.New(b, 2)
	a, pid := c.Nodes[0], c.Nodes[0].PID(c.Nodes[1].ID(), peers.PingActor)
	root := a.ActorSystem().Root
	for range 100 { // open the stream, warm the paths
		if _, err := root.RequestFuture(pid, &messages.Ping{}, 5*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
	rtts := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := root.RequestFuture(pid, &messages.Ping{Seq: uint64(i)}, 5*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, rtts)
}

// BenchmarkRoundTripActors is the same between two actors: one on A sends
// Ping with ctx.Request, the ping actor on B responds, and A's actor sends
// the next on receipt (no futures).
func BenchmarkRoundTripActors(b *testing.B) {
	c := peerstest.New(b, 2)
	a, pid := c.Nodes[0], c.Nodes[0].PID(c.Nodes[1].ID(), peers.PingActor)
	const warm = 100
	rtts := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	var t0 time.Time
	n := 0
	pinger := func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			t0 = time.Now()
			ctx.Request(pid, &messages.Ping{})
		case *messages.Pong:
			if n++; n > warm {
				rtts = append(rtts, time.Since(t0))
			}
			if n == warm {
				b.ResetTimer()
			}
			if len(rtts) == b.N {
				close(done)
				return
			}
			t0 = time.Now()
			ctx.Request(pid, &messages.Ping{Seq: uint64(n)})
		}
	}
	b.ReportAllocs()
	a.ActorSystem().Root.Spawn(actor.PropsFromFunc(pinger))
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("only %d round trips in a minute", len(rtts))
	}
	b.StopTimer()
	reportLatency(b, rtts)
}

// BenchmarkThroughput sends 1 MiB messages one way as fast as they go, the
// size of a prefill chunk's activations.
func BenchmarkThroughput(b *testing.B) {
	c := peerstest.New(b, 2, peerstest.WithConfig(func(cfg *peers.Config) {
		cfg.Inbound = []peers.Inbound{{Actor: "sink", Types: []string{"strata.Ping"}}}
	}))
	a, bn := c.Nodes[0], c.Nodes[1]
	got := make(chan struct{}, 1024)
	if _, err := bn.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.Ping); ok {
			got <- struct{}{}
		}
	}), "sink"); err != nil {
		b.Fatal(err)
	}
	pid := a.PID(bn.ID(), "sink")
	msg := &messages.Ping{Payload: make([]byte, 1<<20)}
	b.SetBytes(int64(len(msg.Payload)))
	b.ReportAllocs()
	b.ResetTimer()
	const window = 16
	for i := range b.N {
		if i >= window {
			<-got
		}
		a.ActorSystem().Root.Send(pid, msg)
	}
	for range min(b.N, window) {
		<-got
	}
}

// BenchmarkForwardRoundTrip bounces an 8 KiB activation (a 2048-wide F32
// hidden state) between an actor on each of two nodes, over each
// transport, the way pipeline stages pass activations: shard actor to
// bridge to link to the peer's actor mailbox. Half a round trip is the
// one-way time including both actor hand-offs.
//
//	go test ./peers -run '^$' -bench ForwardRoundTrip -benchtime 5000x
func BenchmarkForwardRoundTrip(b *testing.B) {
	for _, transport := range []string{peers.TransportShm, peers.TransportTCP} {
		b.Run(transport, func(b *testing.B) {
			c := peerstest.New(b, 2, peerstest.WithConfig(func(cfg *peers.Config) {
				cfg.Transport = transport
				cfg.Inbound = []peers.Inbound{{Actor: "bounce", Types: []string{"strata.Forward"}}}
			}))
			x, y := c.Nodes[0], c.Nodes[1]
			waitLinks(b, x, y, transport)
			const warm = 100
			rtts := make([]time.Duration, 0, b.N)
			done := make(chan struct{})
			var t0 time.Time
			n := 0
			hidden := make([]byte, 8<<10)
			toX, toY := y.PID(x.ID(), "bounce"), x.PID(y.ID(), "bounce")
			if _, err := y.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
				if fw, ok := ctx.Message().(*messages.Forward); ok {
					ctx.Send(toX, fw)
				}
			}), "bounce"); err != nil {
				b.Fatal(err)
			}
			if _, err := x.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
				switch ctx.Message().(type) {
				case *actor.Started:
					t0 = time.Now()
					ctx.Send(toY, &messages.Forward{Session: "s", Count: 1, Hidden: hidden})
				case *messages.Forward:
					if n++; n > warm {
						rtts = append(rtts, time.Since(t0))
					}
					if n == warm {
						b.ResetTimer()
					}
					if len(rtts) == b.N {
						close(done)
						return
					}
					t0 = time.Now()
					ctx.Send(toY, &messages.Forward{Session: "s", Position: uint32(n), Count: 1, Hidden: hidden})
				}
			}), "bounce"); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(hidden)))
			b.ReportAllocs()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				b.Fatalf("only %d round trips in two minutes", len(rtts))
			}
			b.StopTimer()
			reportLatency(b, rtts)
		})
	}
}

// waitLinks waits until both nodes' links to each other use transport.
func waitLinks(b *testing.B, x, y *peers.Node, transport string) {
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range [][2]*peers.Node{{x, y}, {y, x}} {
		for ok := false; !ok; {
			for _, l := range p[0].Links() {
				ok = ok || l.Peer == p[1].ID() && l.Transport == transport
			}
			if time.Now().After(deadline) {
				b.Fatalf("no %s link from %s to %s: %+v", transport, p[0].ID(), p[1].ID(), p[0].Links())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

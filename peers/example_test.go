package peers_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"strata/messages"
	"strata/peers"
)

// Two nodes on loopback share a secret; the second joins the first. Once
// each sees the other in its membership view, an actor on one node asks
// an actor on the other (every node's PingActor) and gets its answer.
// (peers/peerstest starts such clusters for tests, in one line.)
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secret := peers.NewSecret() // a real cluster: peers.LoadOrCreateSecret(dataDir)
	quiet := slog.New(slog.DiscardHandler)
	a, err := peers.New(ctx, peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: secret, NoMDNS: true, Logger: quiet})
	if err != nil {
		fmt.Println(err) // one line, e.g. "listen /ip4/0.0.0.0/tcp/7341: address already in use"
		return
	}
	defer a.Close()
	b, err := peers.New(ctx, peers.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: secret, NoMDNS: true, Logger: quiet,
		Join: []string{fmt.Sprintf("%s/p2p/%s", a.Addrs()[0], a.ID())}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	for _, n := range []*peers.Node{a, b} {
		if _, err := n.Membership().Wait(ctx, func(v peers.View) bool { return len(v.Members) == 2 }); err != nil {
			fmt.Println(err)
			return
		}
	}
	pid := a.PID(b.ID(), peers.PingActor) // an actor on node b, as node a names it
	res, err := a.ActorSystem().Root.RequestFuture(pid, &messages.Ping{}, 5*time.Second).Result()
	_, pong := res.(*messages.Pong)
	fmt.Println("members:", len(a.Membership().View().Members), "pong:", pong, err)
	// Output:
	// members: 2 pong: true <nil>
}

package peers_test

import (
	"net"
	"slices"
	"testing"
	"time"

	manet "github.com/multiformats/go-multiaddr/net"

	"strata/messages"
	"strata/peers"
	"strata/peers/peerstest"
)

// Silent TCP connections that never finish the private-network handshake
// (anyone who can reach the port can open them) must not keep a node
// from its real peers, nor hold resources long.
func TestSilentConnectionsDoNotLockOut(t *testing.T) {
	c := peerstest.New(t, 1)
	a := c.Nodes[0]
	addr, err := manet.ToNetAddr(a.Host().Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	// From another loopback address, as from another machine.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: time.Second}
	var silent []net.Conn
	defer func() {
		for _, s := range silent {
			s.Close()
		}
	}()
	for range 80 {
		s, err := d.Dial("tcp", addr.String())
		if err != nil {
			break // refused: fine
		}
		silent = append(silent, s)
	}
	start := time.Now()
	b := c.Add()
	if err := c.WaitConverged(within); err != nil {
		t.Fatalf("a real peer could not join while %d silent connections were open: %v", len(silent), err)
	}
	t.Logf("joined in %v with %d silent connections open", time.Since(start), len(silent))
	if _, err := b.ActorSystem().Root.RequestFuture(b.PID(a.ID(), peers.PingActor), &messages.Ping{}, within).Result(); err != nil {
		t.Fatal(err)
	}
	// The real peer's connections outlive the handshake deadline.
	var ids []string
	for _, conn := range a.Host().Network().ConnsToPeer(b.ID()) {
		ids = append(ids, conn.ID())
	}
	joined := time.Now()
	// And the node closed every silent connection within the handshake
	// time (3 s), not libp2p's 15 s.
	deadline := start.Add(5 * time.Second)
	for i, s := range silent {
		s.SetReadDeadline(deadline)
		var buf [64]byte
		for {
			_, err := s.Read(buf[:])
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("silent connection %d still open after %v", i, time.Since(start))
			}
			if err != nil {
				break
			}
		}
	}
	t.Logf("all closed after %v", time.Since(start))
	time.Sleep(time.Until(joined.Add(4 * time.Second)))
	for _, conn := range a.Host().Network().ConnsToPeer(b.ID()) {
		ids = slices.DeleteFunc(ids, func(id string) bool { return id == conn.ID() })
	}
	if len(ids) > 0 {
		t.Fatalf("the real peer's connections %v closed after the handshake deadline", ids)
	}
}

package peers

import (
	"strata/peers/side"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// PauseHeartbeats stops (or restarts) n's heartbeats while its connections
// stay up: to the others it looks cut off from gossip.
func PauseHeartbeats(n *Node, paused bool) {
	m := n.member
	m.mu.Lock()
	m.paused = paused
	m.mu.Unlock()
}

// Watches returns how many remote watches n's bridge holds.
func Watches(n *Node) int {
	b := n.bridge
	b.mu.Lock()
	defer b.mu.Unlock()
	k := 0
	for _, ws := range b.watches {
		k += len(ws)
	}
	return k
}

// SetWriterIdle changes how long an unused outbound actor stream stays
// open; it returns the old value.
func SetWriterIdle(d time.Duration) time.Duration {
	old := writerIdle
	writerIdle = d
	return old
}

// Buffered returns the bytes of read buffers n's bridge holds for all peers.
func Buffered(n *Node) int {
	b := n.bridge
	b.mu.Lock()
	defer b.mu.Unlock()
	k := 0
	for _, v := range b.buffered {
		k += v
	}
	return k
}

// ResetVerbsStreams resets n's verbs streams to p (both directions) while
// the connection stays up: the links end and are negotiated again, as
// after a cut link, without the peer leaving the view. It returns how
// many streams it reset.
func ResetVerbsStreams(n *Node, p peer.ID) int {
	k := 0
	for _, c := range n.host.Network().ConnsToPeer(p) {
		for _, s := range c.GetStreams() {
			if s.Protocol() == side.Protocol {
				s.Reset()
				k++
			}
		}
	}
	return k
}

// MangleProof makes RDMA links opened from now on send f(token) as their
// proof (nil: the token).
func MangleProof(f func([]byte) []byte) {
	side.MangleProof(f)
}

// SetNegotiateDelay makes every verbs negotiation wait d first (a slow
// peer); it returns the old delay.
func SetNegotiateDelay(d time.Duration) time.Duration {
	return side.SetNegotiateDelay(d)
}

// EndLinks resets n's verbs streams, as a broken connection would: the
// links negotiate again.
func EndLinks(n *Node) {
	for _, c := range n.host.Network().Conns() {
		for _, st := range c.GetStreams() {
			if st.Protocol() == side.Protocol {
				st.Reset()
			}
		}
	}
}

package peers

import "time"

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

// MangleProof makes RDMA links opened from now on send f(token) as their
// proof (nil: the token).
func MangleProof(f func([]byte) []byte) {
	if f == nil {
		mangleProof.Store(nil)
		return
	}
	mangleProof.Store(&f)
}

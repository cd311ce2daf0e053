package peers

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
)

// Reconnection backoff: from minBackoff, doubling to maxBackoff, with
// ±25% jitter so that nodes restarted together do not dial in lock step.
const (
	minBackoff  = 250 * time.Millisecond
	maxBackoff  = 30 * time.Second
	dialTimeout = 5 * time.Second
)

type backoff struct {
	next  time.Time
	delay time.Duration
}

// failed schedules the next try after a failed dial.
func (b *backoff) failed(now time.Time) {
	b.delay = min(max(2*b.delay, minBackoff), maxBackoff)
	j := time.Duration(rand.Int64N(int64(b.delay/2))) - b.delay/4
	b.next = now.Add(b.delay + j)
}

// keepJoined connects to a static --join peer and reconnects with backoff
// whenever it is not connected, until the node closes.
func (n *Node) keepJoined(ai peer.AddrInfo) {
	defer n.wg.Done()
	n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.PermanentAddrTTL)
	var b backoff
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		if n.host.Network().Connectedness(ai.ID) != network.Connected {
			ctx, cancel := context.WithTimeout(n.ctx, dialTimeout)
			err := n.host.Connect(ctx, ai)
			cancel()
			if n.ctx.Err() != nil {
				return
			}
			if err != nil {
				if b.delay == 0 || b.delay >= maxBackoff {
					n.log.Warn("peers: cannot reach --join peer, retrying", "peer", ai.ID, "err", oneLine(err))
				}
				b.failed(time.Now())
				select {
				case <-time.After(time.Until(b.next)):
				case <-n.ctx.Done():
					return
				}
				continue
			}
			b = backoff{}
		}
		select {
		case <-check.C:
		case <-n.ctx.Done():
			return
		}
	}
}

// dialMember connects to a member heard of through gossip but not
// connected to directly, so the cluster stays a full mesh (and a
// disconnect means what it says). Failed dials back off per peer.
func (n *Node) dialMember(p peer.ID, addrs []string) {
	now := time.Now()
	n.dialMu.Lock()
	b := n.dialing[p]
	if b == nil {
		b = &backoff{}
		n.dialing[p] = b
	}
	if now.Before(b.next) || n.ctx.Err() != nil {
		n.dialMu.Unlock()
		return
	}
	b.next = now.Add(dialTimeout) // one dial at a time
	n.dialMu.Unlock()

	ai := peer.AddrInfo{ID: p}
	for _, s := range addrs {
		if a, err := ma.NewMultiaddr(s); err == nil {
			ai.Addrs = append(ai.Addrs, a)
		}
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(n.ctx, dialTimeout)
		err := n.host.Connect(ctx, ai)
		cancel()
		n.dialMu.Lock()
		if err != nil {
			b.failed(time.Now())
		} else {
			delete(n.dialing, p)
		}
		n.dialMu.Unlock()
	}()
}

// mdnsNotifee connects to peers found on the LAN. The service name carries
// a hash of the secret, and the private network refuses other clusters'
// nodes anyway.
type mdnsNotifee struct{ n *Node }

func (m mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	n := m.n
	if ai.ID == n.host.ID() || n.ctx.Err() != nil || n.host.Network().Connectedness(ai.ID) == network.Connected {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(n.ctx, dialTimeout)
		defer cancel()
		if err := n.host.Connect(ctx, ai); err != nil {
			n.log.Debug("peers: mDNS peer unreachable", "peer", ai.ID, "err", oneLine(err))
		}
	}()
}

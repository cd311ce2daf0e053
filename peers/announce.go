package peers

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"strata/messages"
	"strata/peers/side"
)

// Bounds on the measurements a node announces (placement's cost model
// reads them; a lie beyond these would draw every layer to one node).
const (
	// maxInfoBandwidth (1 PB/s) is far above any machine's memory.
	maxInfoBandwidth = 1e15
	// maxInfoLinks is the most links one NodeInfo may list (it bounds the
	// heartbeat's size).
	maxInfoLinks = 64
	// maxInfoRTT (60 s) is far above any link a plan could use.
	maxInfoRTT = 60_000_000
)

// announcedLinks is this node's measured links as NodeInfo lists them:
// sorted by peer, at most maxInfoLinks.
func (n *Node) announcedLinks() []*messages.LinkInfo {
	if n.side == nil {
		return nil
	}
	ls := n.side.Links()
	slices.SortFunc(ls, func(a, b side.Link) int { return strings.Compare(string(a.Peer), string(b.Peer)) })
	var out []*messages.LinkInfo
	for _, l := range ls[:min(len(ls), maxInfoLinks)] {
		us := min(l.RTT/time.Microsecond, maxInfoRTT)
		out = append(out, &messages.LinkInfo{PeerId: l.Peer.String(), RttUs: uint32(us), Transport: l.Transport})
	}
	return out
}

// validateMeasures checks the measurements in a peer's NodeInfo: memory
// bandwidth finite and bounded, links few, each naming a peer once, with
// a bounded RTT and a short transport name.
func validateMeasures(info *messages.NodeInfo) error {
	if bw := info.MemoryBandwidth; !(bw >= 0 && bw <= maxInfoBandwidth) || math.IsInf(bw, 0) { // NaN too
		return fmt.Errorf("%w: memory bandwidth %v", ErrBadInfo, bw)
	}
	if len(info.Links) > maxInfoLinks {
		return fmt.Errorf("%w: %d links (at most %d)", ErrBadInfo, len(info.Links), maxInfoLinks)
	}
	seen := make(map[string]bool, len(info.Links))
	for _, l := range info.Links {
		if len(l.PeerId) > maxInfoString {
			return fmt.Errorf("%w: link peer ID too long", ErrBadInfo)
		}
		if _, err := peer.Decode(l.PeerId); err != nil {
			return fmt.Errorf("%w: link to %.64q: %v", ErrBadInfo, l.PeerId, err)
		}
		if seen[l.PeerId] || l.PeerId == info.PeerId {
			return fmt.Errorf("%w: link to %s listed twice or to itself", ErrBadInfo, l.PeerId)
		}
		seen[l.PeerId] = true
		if l.RttUs > maxInfoRTT {
			return fmt.Errorf("%w: link RTT %d µs", ErrBadInfo, l.RttUs)
		}
		switch l.Transport {
		case TransportShm, TransportRDMA, TransportTCP:
		default:
			return fmt.Errorf("%w: link transport %.16q", ErrBadInfo, l.Transport)
		}
	}
	return nil
}

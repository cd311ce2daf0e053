package peers

import (
	"fmt"
	"strata/messages"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The cluster protocol versions this build speaks: the messages and
// streams between nodes. A build that changes them incompatibly raises
// Protocol; one that can still talk to older members keeps MinProtocol, so
// a cluster can be upgraded one node at a time. Nodes announce both
// (NodeInfo.protocol, protocol_min); two nodes are members of each other's
// view only when their ranges overlap.
const (
	Protocol    uint32 = 1
	MinProtocol uint32 = 1
)

// ProtocolRange is the oldest and newest protocol version a node speaks.
type ProtocolRange struct{ Min, Max uint32 }

// OurProtocols is this build's range.
var OurProtocols = ProtocolRange{MinProtocol, Protocol}

// announcedRange reads a NodeInfo's range: nodes older than the fields
// announce zeros and spoke version 1 only.
func announcedRange(min, max uint32) ProtocolRange {
	if max == 0 {
		max = 1
	}
	if min == 0 || min > max {
		min = max
	}
	return ProtocolRange{min, max}
}

func (r ProtocolRange) String() string {
	if r.Min == r.Max {
		return fmt.Sprint(r.Max)
	}
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// Compatible says whether nodes speaking a and b can work together: their
// ranges overlap (they then speak the newest version both know).
func Compatible(a, b ProtocolRange) bool {
	return max(a.Min, b.Min) <= min(a.Max, b.Max)
}

// A Refusal is a node that announced itself but is kept out of the view
// because its protocol versions do not overlap this node's.
type Refusal struct {
	ID        peer.ID
	Version   string        // its strata version
	Protocols ProtocolRange // what it speaks
	Reason    string        // one line naming both sides' versions
	At        time.Time     // when last heard
}

// refusalReason is the line a log, strata status and strata doctor show.
func refusalReason(ours ProtocolRange, ourVersion string, theirs ProtocolRange, theirVersion string) string {
	return fmt.Sprintf("incompatible protocol: it runs strata %s (protocol %s), this node runs strata %s (protocol %s); upgrade the older one",
		theirVersion, theirs, ourVersion, ours)
}

// AnnouncedProtocols is the protocol range a member's NodeInfo announces.
func AnnouncedProtocols(info *messages.NodeInfo) ProtocolRange {
	return announcedRange(info.GetProtocolMin(), info.GetProtocol())
}

package plan

import (
	"sort"
	"time"
)

// Announced is what one member of a cluster announces about itself that
// the cost model reads (peers gossip it in NodeInfo; the status API shows
// it): memory, compute, memory bandwidth, and the round trips it measured
// to other members.
type Announced struct {
	ID           string
	MemoryBytes  uint64  // memory the node offers
	Compute      float64 // FLOP/s, 0 = not measured
	MemBandwidth float64 // bytes/s, 0 = not measured
	Links        []AnnouncedLink
}

// AnnouncedLink is one link a member measured.
type AnnouncedLink struct {
	Peer string
	RTT  time.Duration // 0 = not measured
}

// Inputs turns members' announcements into the cost model's nodes and
// network: the nodes in members' order; a link for each pair that either
// end measured, its latency half the smaller measured round trip (load
// only ever adds to a round trip) and its throughput def's (throughput is
// not measured yet); every other pair def.
func Inputs(members []Announced, def Link) ([]Node, Network) {
	nodes := make([]Node, len(members))
	known := make(map[string]bool, len(members))
	for i, m := range members {
		nodes[i] = Node{ID: m.ID, FreeBytes: m.MemoryBytes, Compute: m.Compute, MemBandwidth: m.MemBandwidth}
		known[m.ID] = true
	}
	rtt := map[[2]string]time.Duration{}
	for _, m := range members {
		for _, l := range m.Links {
			if l.RTT <= 0 || !known[l.Peer] || l.Peer == m.ID {
				continue
			}
			k := [2]string{m.ID, l.Peer}
			if k[0] > k[1] {
				k[0], k[1] = k[1], k[0]
			}
			if old, ok := rtt[k]; !ok || l.RTT < old {
				rtt[k] = l.RTT
			}
		}
	}
	net := Network{Default: def}
	if len(rtt) > 0 {
		net.Pairs = make(map[[2]string]Link, len(rtt))
		keys := make([][2]string, 0, len(rtt))
		for k := range rtt {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
		})
		for _, k := range keys {
			net.Pairs[k] = Link{Latency: rtt[k] / 2, Throughput: def.Throughput}
		}
	}
	return nodes, net
}

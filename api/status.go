package api

import (
	"slices"
	"strings"
	"time"

	"strata/actors"
	"strata/actors/stage"
	"strata/peers"
	"strata/peers/side"
)

// ClusterStatusOf is GET /api/cluster for node n: the members it sees,
// the shards each announces, and the sessions it drives.
func ClusterStatusOf(n *actors.Node) ClusterStatus {
	st := PeersStatusOf(n.Peers)
	cs := ClusterStatus{Self: st.Self, Members: []MemberStatus{}, Sessions: []SessionStatus{}}
	for _, m := range st.Members {
		ms := MemberStatus{PeerID: m.PeerID, Addrs: m.Addrs, MemoryBytes: m.MemoryBytes, Device: m.Device, Shards: []ShardStatus{}, Links: m.Links, Fetching: m.Fetching}
		for _, md := range m.Models {
			ms.Models = append(ms.Models, md.Name)
		}
		for _, sh := range m.Shards {
			if model, first, end, ok := stage.ParseShard(sh); ok {
				ss := ShardStatus{Model: model, Layers: [2]int{first, end}}
				if _, tp, ok := strings.Cut(sh, "@tp"); ok {
					ss.TP = tp
				}
				ms.Shards = append(ms.Shards, ss)
			}
		}
		cs.Members = append(cs.Members, ms)
	}
	for _, s := range n.Origin.Sessions() {
		ss := SessionStatus{ID: s.ID, Model: s.Model, Prompt: s.Prompt, Generated: s.Generated, Stages: []StageStatus{}}
		for _, stg := range s.Stages {
			ss.Stages = append(ss.Stages, StageStatus{PeerID: stg.Node, Layers: [2]int{stg.First, stg.End}, TP: stg.TP})
		}
		cs.Sessions = append(cs.Sessions, ss)
	}
	return cs
}

// PeersStatusOf is GET /api/peers for node: its view of the membership.
func PeersStatusOf(node *peers.Node) PeersStatus {
	v := node.Membership().View()
	st := PeersStatus{Self: node.ID().String(), ViewVersion: v.Version, Members: []PeerStatus{}}
	now := time.Now()
	for _, m := range v.Members {
		in := m.Info
		ps := PeerStatus{
			PeerID: m.ID.String(), Addrs: in.Addrs, Version: in.Version,
			MemoryBytes: in.MemoryTotalBytes, MemoryAvailableBytes: in.MemoryAvailableBytes, ComputeFlops: in.ComputeFlops,
			MemoryBandwidth: in.MemoryBandwidth, Device: in.Device,
			Models: []PeerModel{}, Shards: in.Shards, LastSeenMS: now.Sub(m.LastSeen).Milliseconds(),
		}
		if ps.Addrs == nil {
			ps.Addrs = []string{}
		}
		if ps.Shards == nil {
			ps.Shards = []string{}
		}
		for _, md := range in.Models {
			ps.Models = append(ps.Models, PeerModel{Name: md.Name, SizeBytes: md.SizeBytes, Digest: md.Digest})
		}
		for _, f := range in.Fetching {
			ps.Fetching = append(ps.Fetching, FetchStatus{Model: f.Model, DoneBytes: f.DoneBytes, TotalBytes: f.TotalBytes})
		}
		if m.ID == node.ID() {
			ps.Links = linksStatus(node.Links())
		} else {
			for _, l := range in.Links {
				ps.Links = append(ps.Links, LinkStatus{PeerID: l.PeerId, Transport: l.Transport, RTTMicros: int64(l.RttUs)})
			}
		}
		st.Members = append(st.Members, ps)
	}
	return st
}

// linksStatus is a node's links in the status API's form, by peer ID.
func linksStatus(links []side.Link) []LinkStatus {
	out := []LinkStatus{}
	for _, l := range links {
		out = append(out, LinkStatus{PeerID: l.Peer.String(), Transport: l.Transport, RTTMicros: l.RTT.Microseconds()})
	}
	slices.SortFunc(out, func(a, b LinkStatus) int { return strings.Compare(a.PeerID, b.PeerID) })
	return out
}

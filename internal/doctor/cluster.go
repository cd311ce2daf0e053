package doctor

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Member is what the view says about one member.
type Member struct {
	ID        string
	Version   string
	Protocols string // e.g. "1" or "1-2"
	Platform  string // GOOS/GOARCH and OS build
	BootID    string // members sharing one are on one host
	RDMA      bool   // it has a usable RDMA device
	Leaving   bool
	// ClockSkew is its announced clock less this node's clock when the
	// announcement arrived (the gossip delay, milliseconds, included).
	ClockSkew time.Duration
	Links     []Link   // the links it measured to other members
	Findings  []string // its announced findings (Finding)
}

// Link is one member's link to another.
type Link struct {
	Peer      string
	Transport string // shm, rdma or tcp
	RTT       time.Duration
	// StreamRate is the measured throughput of the libp2p stream to the
	// peer (the fallback of every link, and the transport of a TCP one),
	// bytes/s; 0 = not measured (strata doctor measures the answering
	// node's links).
	StreamRate float64
	// ProbeError says why measuring StreamRate failed, when it was tried.
	ProbeError string
}

// Refused is a node kept out of the view (an incompatible protocol).
type Refused struct {
	ID, Reason string
}

// Thresholds of the cluster checks.
const (
	// MaxClockSkew is the most two members' clocks may differ: logs and
	// traces from several nodes are read side by side.
	MaxClockSkew = time.Second
)

// MinStreamRate is the least a libp2p stream between members should
// carry: gigabit Ethernet's rate; a cluster's links are faster still.
const MinStreamRate = 100e6

// expectedRTT is what a small message's round trip should take on each
// transport; above it the link is slow for what it is.
var expectedRTT = map[string]time.Duration{"shm": 500 * time.Microsecond, "rdma": 200 * time.Microsecond, "tcp": 5 * time.Millisecond}

// ClusterChecks checks the view one node has of its cluster.
func ClusterChecks(members []Member, refused []Refused) []Check {
	var cs []Check
	cs = append(cs, Check{Name: "members", Status: OK, Message: fmt.Sprintf("%d members", len(members))})
	byID := map[string]Member{}
	versions := map[string][]string{}
	platforms := map[string][]string{}
	for _, m := range members {
		byID[m.ID] = m
		versions[m.Version+" (protocol "+m.Protocols+")"] = append(versions[m.Version+" (protocol "+m.Protocols+")"], short(m.ID))
		platforms[m.Platform] = append(platforms[m.Platform], short(m.ID))
	}
	if len(versions) > 1 {
		cs = append(cs, Check{Name: "version", Status: Warn, Message: "members run different versions: " + groups(versions),
			Fix: "finish the upgrade: nodes of compatible versions work together, but only for a while is that what you want"})
	} else {
		cs = append(cs, Check{Name: "version", Status: OK, Message: "every member runs strata " + groups(versions)})
	}
	for _, r := range refused {
		cs = append(cs, Check{Name: "protocol", Node: r.ID, Status: Fail, Message: "refused as a member: " + r.Reason,
			Fix: "run one strata version on every node (strata version prints it); see the README on upgrades"})
	}
	var rdma []string
	for _, m := range members {
		if m.RDMA {
			rdma = append(rdma, short(m.ID))
		}
	}
	if len(rdma) > 0 {
		cs = append(cs, Check{Name: "rdma", Status: OK, Message: "members with an RDMA device: " + strings.Join(rdma, ", ")})
	} else {
		cs = append(cs, Check{Name: "rdma", Status: OK, Message: "no member has a usable RDMA device (or an RDMA build): links between hosts are TCP"})
	}
	if len(platforms) > 1 {
		cs = append(cs, Check{Name: "platform", Status: Warn, Message: "members run different systems: " + groups(platforms),
			Fix: "RDMA over Thunderbolt needs the same macOS build on both ends; update the older ones"})
	}
	for _, m := range members {
		if m.Leaving {
			cs = append(cs, Check{Name: "leaving", Node: m.ID, Status: Warn, Message: "is leaving the cluster (shutting down)"})
		}
		if skew := m.ClockSkew; skew > MaxClockSkew || skew < -MaxClockSkew {
			cs = append(cs, Check{Name: "clock", Node: m.ID, Status: Fail,
				Message: fmt.Sprintf("its clock is %v off this node's", skew.Round(time.Millisecond)),
				Fix:     "turn on time synchronisation on both: timedatectl set-ntp true (Linux), sudo sntp -sS time.apple.com (macOS)"})
		}
		for _, f := range m.Findings {
			cs = append(cs, ParseFinding(m.ID, f))
		}
	}
	if !slices.ContainsFunc(cs, func(c Check) bool { return c.Name == "clock" }) && len(members) > 1 {
		cs = append(cs, Check{Name: "clock", Status: OK, Message: fmt.Sprintf("members' clocks agree within %v", MaxClockSkew)})
	}
	cs = append(cs, linkChecks(members, byID)...)
	return cs
}

// linkChecks looks at every pair of members: a link should exist, take
// the fastest transport both ends have, and answer in the time that
// transport should.
func linkChecks(members []Member, byID map[string]Member) []Check {
	var cs []Check
	ids := slices.Sorted(maps.Keys(byID))
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			ma, mb := byID[a], byID[b]
			l, ok := bothEnds(ma, mb)
			pair := short(a) + " ↔ " + short(b)
			if !ok {
				cs = append(cs, Check{Name: "link", Status: Fail, Message: pair + ": no link (the cluster is not a full mesh)",
					Fix: "check that each can reach the other's --listen address (firewall, cables); strata status shows the addresses"})
				continue
			}
			sameHost := ma.BootID != "" && ma.BootID == mb.BootID
			switch {
			case l.Transport == "tcp" && sameHost:
				cs = append(cs, Check{Name: "link", Status: Fail, Message: pair + ": TCP, although both run on one host (shared memory is many times faster)",
					Fix: "start both nodes with --transport auto (the default), not tcp"})
			case l.Transport == "tcp" && ma.RDMA && mb.RDMA:
				cs = append(cs, Check{Name: "link", Status: Fail, Message: pair + ": TCP, although both have RDMA devices",
					Fix: "check rdma_ctl status on both Macs (RDMA over Thunderbolt is enabled from recovery mode: rdma_ctl enable), the Thunderbolt 5 cable between them, and that neither runs with --transport tcp"})
			case l.StreamRate > 0 && l.StreamRate < MinStreamRate:
				cs = append(cs, Check{Name: "link", Status: Warn, Message: fmt.Sprintf("%s: %s, libp2p stream %s (below gigabit Ethernet's %s)", pair, l.Transport, rate(l.StreamRate), rate(MinStreamRate)),
					Fix: "look for a slow or shared network path between them (Wi-Fi, a 100 Mb/s port), or a busy machine"})
			case l.RTT > 0 && l.RTT > expectedRTT[l.Transport] && expectedRTT[l.Transport] > 0:
				msg := fmt.Sprintf("%s: %s, round trip %v (a %s link should answer within %v)", pair, l.Transport, l.RTT, l.Transport, expectedRTT[l.Transport])
				if st := streamOf(l); st != "" {
					msg += "; " + st
				}
				cs = append(cs, Check{Name: "link", Status: Warn, Message: msg,
					Fix: "look for a busy machine or network between them"})
			default:
				rtt := "not measured yet"
				if l.RTT > 0 {
					rtt = "round trip " + l.RTT.String()
				}
				why := ""
				if l.Transport == "tcp" && !sameHost && !(ma.RDMA && mb.RDMA) {
					why = " (different hosts without RDMA on both: TCP is what they have)"
				}
				if st := streamOf(l); st != "" {
					rtt += ", " + st
				}
				cs = append(cs, Check{Name: "link", Status: OK, Message: fmt.Sprintf("%s: %s, %s%s", pair, l.Transport, rtt, why)})
			}
		}
	}
	return cs
}

// streamOf says what was measured of a link's libp2p stream, if anything.
func streamOf(l Link) string {
	switch {
	case l.StreamRate > 0:
		return "libp2p stream " + rate(l.StreamRate)
	case l.ProbeError != "":
		return "libp2p stream not measured (" + l.ProbeError + ")"
	}
	return ""
}

// rate prints bytes/s.
func rate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f GB/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.0f MB/s", bps/1e6)
	}
	return fmt.Sprintf("%.0f kB/s", bps/1e3)
}

// bothEnds is the link between a and b as both ends report it: a's view
// of it, with what only b measured filled in (the answering node times
// its own streams, so the rate may be on either side).
func bothEnds(a, b Member) (Link, bool) {
	la, okA := linkBetween(a, b.ID)
	lb, okB := linkBetween(b, a.ID)
	switch {
	case !okA:
		return lb, okB
	case !okB:
		return la, true
	}
	if la.RTT == 0 {
		la.RTT = lb.RTT
	}
	if la.StreamRate == 0 && (lb.StreamRate > 0 || la.ProbeError == "") {
		la.StreamRate, la.ProbeError = lb.StreamRate, lb.ProbeError
	}
	return la, true
}

func linkBetween(m Member, peer string) (Link, bool) {
	for _, l := range m.Links {
		if l.Peer == peer {
			return l, true
		}
	}
	return Link{}, false
}

// groups prints "key (a, b); key2 (c)" in key order.
func groups(m map[string][]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if len(m) == 1 {
			return k
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", k, strings.Join(m[k], ", ")))
	}
	return strings.Join(parts, "; ")
}

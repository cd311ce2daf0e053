package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"strata/internal/doctor"
	"strata/peers"

	"github.com/libp2p/go-libp2p/core/peer"
)

// DoctorOf is GET /api/doctor for node: its own machine's checks (local)
// and the cluster as its view shows it, with every member's announced
// findings.
//
// With probe, the node also measures the throughput of its libp2p stream
// to every other member (ProbeBytes each, one member at a time).
func DoctorOf(node *peers.Node, local doctor.Local, probe bool) doctor.Report {
	members := doctorMembers(node)
	if probe {
		probeLinks(node, members)
	}
	return doctor.NewReport(doctor.LocalChecks(local), doctor.ClusterChecks(members, doctorRefused(node)))
}

// ProbeBytes is what strata doctor sends to each member to time a link.
const ProbeBytes = 4 << 20

// ProbeBudget bounds the time all of one report's probes take together
// (strata doctor waits ProbeBudget plus a margin for the report); members
// left when it is spent are reported as not measured.
const ProbeBudget = 30 * time.Second

var errProbeBudget = errors.New("not tried: the probes' time budget was spent on other members")

// probeLinks fills in the stream rate of the answering node's links.
func probeLinks(node *peers.Node, members []doctor.Member) {
	i := slices.IndexFunc(members, func(m doctor.Member) bool { return m.ID == node.ID().String() })
	if i < 0 {
		return
	}
	self := &members[i]
	budget := time.Now().Add(ProbeBudget)
	for _, m := range members {
		id, err := peer.Decode(m.ID)
		if m.ID == self.ID || err != nil {
			continue
		}
		// A peer takes one probe at a time and a fresh connection may be
		// busy settling its links: one retry before reporting a failure.
		var r float64
		err = errProbeBudget
		for try := 0; try < 2 && time.Until(budget) > 0; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), min(time.Until(budget), 5*time.Second))
			r, err = node.ProbeThroughput(ctx, id, ProbeBytes)
			cancel()
			if err == nil {
				break
			}
			if try == 0 {
				time.Sleep(200 * time.Millisecond)
			}
		}
		j := slices.IndexFunc(self.Links, func(l doctor.Link) bool { return l.Peer == m.ID })
		if j < 0 {
			self.Links = append(self.Links, doctor.Link{Peer: m.ID, Transport: "tcp"})
			j = len(self.Links) - 1
		}
		if err != nil {
			self.Links[j].ProbeError = err.Error()
			continue
		}
		self.Links[j].StreamRate = r
	}
}

func doctorMembers(node *peers.Node) []doctor.Member {
	var out []doctor.Member
	for _, m := range node.Membership().View().Members {
		in := m.Info
		dm := doctor.Member{ID: m.ID.String(), Version: in.GetVersion(), Platform: in.GetPlatform(), BootID: in.GetBootId(), RDMA: in.GetRdma(),
			Leaving: in.GetLeaving(), Findings: in.GetFindings(),
			Protocols: peers.AnnouncedProtocols(in).String()}
		if m.ID != node.ID() && in.GetClockUnixNano() != 0 {
			dm.ClockSkew = time.Unix(0, in.GetClockUnixNano()).Sub(m.LastSeen)
		}
		if m.ID == node.ID() {
			// Its own links are fresher than its last heartbeat, and its
			// findings are in the local checks already.
			dm.Findings = nil
			for _, l := range node.Links() {
				dm.Links = append(dm.Links, doctor.Link{Peer: l.Peer.String(), Transport: l.Transport, RTT: l.RTT})
			}
		} else {
			for _, l := range in.GetLinks() {
				dm.Links = append(dm.Links, doctor.Link{Peer: l.GetPeerId(), Transport: l.GetTransport(), RTT: time.Duration(l.GetRttUs()) * time.Microsecond})
			}
		}
		out = append(out, dm)
	}
	return out
}

func doctorRefused(node *peers.Node) []doctor.Refused {
	var out []doctor.Refused
	for _, r := range node.Membership().Refused() {
		out = append(out, doctor.Refused{ID: r.ID.String(), Reason: r.Reason})
	}
	return out
}

// DoctorHandler serves GET /api/doctor; ?probe=1 measures the links'
// throughput too (strata doctor asks for it; the dashboard does not).
func DoctorHandler(report func(probe bool) doctor.Report) http.Handler {
	return snapshotHandler(func(r *http.Request) any { return report(r.URL.Query().Get("probe") == "1") })
}

// FetchDoctor reads GET /api/doctor from the node at base (with probe,
// the node times its links' throughput).
func FetchDoctor(ctx context.Context, base, key string, probe bool) (doctor.Report, error) {
	path := "/api/doctor"
	if probe {
		path += "?probe=1"
	}
	var rep doctor.Report
	_, err := fetchJSON(ctx, base, path, key, &rep)
	return rep, err
}

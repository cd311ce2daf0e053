package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
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

// probeLinks fills in the stream rate of the answering node's links.
func probeLinks(node *peers.Node, members []doctor.Member) {
	for i := range members {
		if members[i].ID != node.ID().String() {
			continue
		}
		self := &members[i]
		for _, m := range members {
			if m.ID == self.ID {
				continue
			}
			id, err := peer.Decode(m.ID)
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := node.ProbeThroughput(ctx, id, ProbeBytes)
			cancel()
			if err != nil {
				continue
			}
			j := slices.IndexFunc(self.Links, func(l doctor.Link) bool { return l.Peer == m.ID })
			if j < 0 {
				self.Links = append(self.Links, doctor.Link{Peer: m.ID, Transport: "tcp"})
				j = len(self.Links) - 1
			}
			self.Links[j].StreamRate = r
		}
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		probe := r.URL.Query().Get("probe") == "1"
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(report(probe))
	})
}

// FetchDoctor reads GET /api/doctor from the node at base (with probe,
// the node times its links' throughput).
func FetchDoctor(ctx context.Context, base, key string, probe bool) (doctor.Report, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := strings.TrimRight(base, "/") + "/api/doctor"
	if probe {
		url += "?probe=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return doctor.Report{}, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return doctor.Report{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return doctor.Report{}, fmt.Errorf("%s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return doctor.Report{}, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var rep doctor.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return doctor.Report{}, fmt.Errorf("%s: %w", url, err)
	}
	return rep, nil
}

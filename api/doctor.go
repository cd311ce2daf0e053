package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"strata/internal/doctor"
	"strata/peers"
)

// DoctorOf is GET /api/doctor for node: its own machine's checks (local)
// and the cluster as its view shows it, with every member's announced
// findings.
func DoctorOf(node *peers.Node, local doctor.Local) doctor.Report {
	return doctor.NewReport(doctor.LocalChecks(local), doctor.ClusterChecks(doctorMembers(node), doctorRefused(node)))
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

// DoctorHandler serves GET /api/doctor.
func DoctorHandler(report func() doctor.Report) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(report())
	})
}

// FetchDoctor reads GET /api/doctor from the node at base.
func FetchDoctor(ctx context.Context, base, key string) (doctor.Report, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := strings.TrimRight(base, "/") + "/api/doctor"
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

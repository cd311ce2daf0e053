package doctor

import (
	"strings"
	"testing"
	"time"
)

func find(cs []Check, name, node string) (Check, bool) {
	for _, c := range cs {
		if c.Name == name && c.Node == node {
			return c, true
		}
	}
	return Check{}, false
}

func TestLocalChecks(t *testing.T) {
	healthy := Local{MemoryOffered: 8 << 30, SystemAvailable: 12 << 30, DiskDir: "/d/weights", DiskBudget: 10 << 30, DiskUsed: 1 << 30, DiskFree: 50 << 30,
		OpenFiles: 65536, SecretFile: "/d/secret", GPUWiredLimitMB: -1}
	for _, c := range LocalChecks(healthy) {
		if c.Status != OK {
			t.Errorf("healthy machine: %+v", c)
		}
	}
	for _, tc := range []struct {
		name   string
		edit   func(*Local)
		check  string
		status Status
		says   string
	}{
		{"full disk budget", func(l *Local) { l.DiskBudget, l.DiskUsed = 1024, 0 }, "disk", Fail, "budget for layers fetched from peers is full"},
		{"disk smaller than budget", func(l *Local) { l.DiskFree = 1 << 30 }, "disk", Warn, "the disk has only"},
		{"open files", func(l *Local) { l.OpenFiles = 256 }, "open-files", Fail, "open-file limit is 256"},
		{"loose secret", func(l *Local) { l.SecretLoose = "mode 0644" }, "secret", Fail, "not private"},
		{"memory promised", func(l *Local) { l.SystemAvailable = 2 << 30 }, "memory", Warn, "only 2.1 GB is free"},
	} {
		l := healthy
		tc.edit(&l)
		c, ok := find(LocalChecks(l), tc.check, "")
		if !ok || c.Status != tc.status || !strings.Contains(c.Message, tc.says) || c.Fix == "" {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

// The gpu line lists the Vulkan devices, or says why there are none:
// information, never a failure (the CPU computes without one).
func TestVulkanCheck(t *testing.T) {
	if c := VulkanCheck([]string{"0: llvmpipe (CPU)", "1: Apple M3 Ultra (integrated GPU)"}, ""); c.Status != OK || !strings.Contains(c.Message, "1: Apple M3 Ultra (integrated GPU)") {
		t.Errorf("devices: %+v", c)
	}
	if c := VulkanCheck(nil, "gpu: no Vulkan loader (libvulkan) on this machine"); c.Status != OK || !strings.Contains(c.Message, "no Vulkan loader") {
		t.Errorf("no loader: %+v", c)
	}
}

func TestClusterChecks(t *testing.T) {
	link := func(peer, tr string, rtt time.Duration) []Link { return []Link{{Peer: peer, Transport: tr, RTT: rtt}} }
	healthy := []Member{
		{ID: "A", Version: "v1", Protocols: "1", Platform: "linux/amd64 6.1", BootID: "h1", Links: link("B", "shm", 40*time.Microsecond)},
		{ID: "B", Version: "v1", Protocols: "1", Platform: "linux/amd64 6.1", BootID: "h1", Links: link("A", "shm", 40*time.Microsecond)},
		{ID: "C", Version: "v1", Protocols: "1", Platform: "linux/amd64 6.1", BootID: "h2", Links: []Link{{Peer: "A", Transport: "tcp", RTT: time.Millisecond}, {Peer: "B", Transport: "tcp"}}},
	}
	rep := NewReport(ClusterChecks(healthy, nil))
	if !rep.OK {
		t.Errorf("healthy cluster:\n%s", rep.Text())
	}
	for _, c := range rep.Checks {
		if c.Status != OK {
			t.Errorf("healthy cluster: %+v", c)
		}
	}
	for _, tc := range []struct {
		name   string
		edit   func([]Member)
		ref    []Refused
		check  string
		node   string
		status Status
		says   string
	}{
		{"skewed clock", func(m []Member) { m[2].ClockSkew = -3 * time.Second }, nil, "clock", "C", Fail, "-3s off"},
		{"tcp on one host", func(m []Member) { m[0].Links = link("B", "tcp", 0); m[1].Links = nil }, nil, "link", "", Fail, "both run on one host"},
		{"tcp with rdma", func(m []Member) { m[0].RDMA, m[2].RDMA = true, true }, nil, "link", "", Fail, "although both have RDMA devices"},
		{"missing link", func(m []Member) { m[2].Links = m[2].Links[:1] }, nil, "link", "", Fail, "no link"},
		{"slow link", func(m []Member) { m[2].Links[0].RTT = 80 * time.Millisecond }, nil, "link", "", Warn, "should answer within"},
		{"slow stream", func(m []Member) { m[2].Links[0].StreamRate = 20e6 }, nil, "link", "", Warn, "libp2p stream 20 MB/s (below gigabit"},
		{"measured stream", func(m []Member) { m[2].Links[0].StreamRate = 1.5e9 }, nil, "link", "", OK, "libp2p stream 1.50 GB/s"},
		// The answering node times its own links; its ID may sort after
		// the other end's, whose announced link has no rate.
		{"stream measured by the later end", func(m []Member) { m[1].Links[0].StreamRate = 2e9 }, nil, "link", "", OK, "A ↔ B: shm, round trip 40µs, libp2p stream 2.00 GB/s"},
		{"unmeasured stream by the later end", func(m []Member) { m[1].Links[0].ProbeError = "no answer" }, nil, "link", "", OK, "A ↔ B: shm, round trip 40µs, libp2p stream not measured (no answer)"},
		{"unmeasured stream", func(m []Member) { m[2].Links[0].ProbeError = "no answer to the probe" }, nil, "link", "", OK, "libp2p stream not measured (no answer to the probe)"},
		{"versions", func(m []Member) { m[1].Version = "v2" }, nil, "version", "", Warn, "v2 (protocol 1) (B)"},
		{"platforms", func(m []Member) { m[1].Platform = "darwin/arm64 24C101" }, nil, "platform", "", Warn, "darwin/arm64"},
		{"refused", func([]Member) {}, []Refused{{ID: "D", Reason: "incompatible protocol: it runs strata v9 (protocol 9)"}}, "protocol", "D", Fail, "v9"},
		{"member finding", func(m []Member) {
			m[1].Findings = []string{Finding(Check{Name: "disk", Status: Fail, Message: "the budget is full", Fix: "raise --disk"})}
		}, nil, "disk", "B", Fail, "the budget is full"},
	} {
		m := make([]Member, len(healthy))
		for i := range healthy {
			m[i] = healthy[i]
			m[i].Links = append([]Link(nil), healthy[i].Links...)
		}
		tc.edit(m)
		cs := ClusterChecks(m, tc.ref)
		var got []Check
		for _, c := range cs {
			if c.Name == tc.check && c.Node == tc.node && c.Status == tc.status && strings.Contains(c.Message, tc.says) {
				got = append(got, c)
			}
		}
		if len(got) == 0 {
			t.Errorf("%s: no %s %s check saying %q in\n%s", tc.name, tc.status, tc.check, tc.says, NewReport(cs).Text())
		}
		if tc.status == Fail && NewReport(cs).OK {
			t.Errorf("%s: report OK", tc.name)
		}
	}
}

func TestFindingRoundTrip(t *testing.T) {
	c := Check{Name: "disk", Status: Fail, Message: "a|b", Fix: "raise --disk"}
	got := ParseFinding("N", Finding(c))
	if got.Name != "disk" || got.Node != "N" || got.Status != Fail || got.Message != "a/b" || got.Fix != "raise --disk" {
		t.Errorf("round trip: %+v", got)
	}
	if bad := ParseFinding("N", "ok|x"); bad.Status != Warn || !strings.Contains(bad.Message, "unreadable") {
		t.Errorf("malformed finding: %+v", bad)
	}
}

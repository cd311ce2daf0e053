//go:build e2e

package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"strata/internal/doctor"
	"strata/internal/testdata"
)

// doctorOf runs strata doctor --json against a node until ready(report)
// holds (links and announced findings take a few heartbeats), and returns
// the last report and the command's exit status.
func doctorOf(t *testing.T, bin string, p *proc, ready func(doctor.Report) bool) (doctor.Report, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(bin, "doctor", "--api", p.api, "--json").Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var rep doctor.Report
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("doctor --json: %v\n%s", err, out)
		}
		if ready(rep) || time.Now().After(deadline) {
			return rep, code
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func count(rep doctor.Report, name string, status doctor.Status, node, says string) int {
	n := 0
	for _, c := range rep.Checks {
		if c.Name == name && c.Status == status && (node == "" || c.Node == node) && strings.Contains(c.Message, says) {
			n++
		}
	}
	return n
}

// TestE2EDoctor: on a healthy 3-node local cluster strata doctor reports
// every check and exits 0; then each check is made to fail on purpose (a
// link forced to TCP between nodes on one host, a clock 5 s off, a full
// disk budget on one member, a node speaking another protocol) and the
// report, read through one node, names each finding and exits 1.
func TestE2EDoctor(t *testing.T) {
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	models := map[string]string{"stories260K": stories}

	t.Run("healthy", func(t *testing.T) {
		c := newCluster(t, bin, models, 3, "800kB")
		timed := func(r doctor.Report) int {
			return count(r, "link", doctor.OK, "", "libp2p stream ") + count(r, "link", doctor.Warn, "", "libp2p stream ") -
				count(r, "link", doctor.OK, "", "not measured") - count(r, "link", doctor.Warn, "", "not measured")
		}
		rep, code := doctorOf(t, bin, c.nodes[0], func(r doctor.Report) bool {
			return count(r, "link", doctor.OK, "", "shm")+count(r, "link", doctor.Warn, "", "shm") == 3 && timed(r) == 2
		})
		text, _ := json.MarshalIndent(rep, "", "  ")
		if code != 0 || !rep.OK {
			t.Errorf("exit %d on a healthy cluster:\n%s", code, text)
		}
		for _, want := range []struct{ name, says string }{
			{"members", "3 members"}, {"version", "every member runs"}, {"clock", "agree"}, {"memory", "offers"},
			{"disk", "fetched layers"}, {"open-files", "limit"}, {"secret", "private"},
		} {
			if count(rep, want.name, doctor.OK, "", want.says) == 0 {
				t.Errorf("no ok %s check saying %q:\n%s", want.name, want.says, text)
			}
		}
		if n := count(rep, "link", doctor.OK, "", "shm") + count(rep, "link", doctor.Warn, "", "shm"); n != 3 {
			t.Errorf("%d shared-memory links, want 3:\n%s", n, text)
		}
		// A loaded machine may time loopback below gigabit Ethernet: a
		// warning then, which does not fail doctor.
		if n := timed(rep); n != 2 {
			t.Errorf("%d links timed, want the answering node's 2:\n%s", n, text)
		}
	})

	t.Run("faults", func(t *testing.T) {
		c := newClusterEach(t, bin, models, 3, "800kB", func(i int) []string {
			switch i {
			case 1:
				return []string{"--test-clock-offset", "5s"}
			case 2:
				return []string{"--disk", "1KB"}
			}
			return nil
		}, "--transport", "tcp")
		// A fourth node that speaks only protocol 99.
		stranger := &proc{name: "n3", dataDir: filepath.Join(c.dir, "n3"), listen: "/ip4/127.0.0.1/tcp/0", api: "127.0.0.1:0"}
		stranger.args = []string{"node", "--data-dir", stranger.dataDir, "--secret-file", filepath.Join(c.dir, "n0", "secret"), "--no-mdns",
			"--listen", stranger.listen, "--api", stranger.api, "--models", c.models, "--memory", "800kB", "--join", c.join, "--test-protocol", "99"}
		ids := make([]string, 4)
		for i, p := range append(c.nodes, stranger) {
			ids[i] = peerIDOf(t, bin, p) // the stranger's identity is made here, before it starts
		}
		c.nodes = append(c.nodes, stranger)
		c.start(stranger)
		rep, code := doctorOf(t, bin, c.nodes[0], func(r doctor.Report) bool {
			return count(r, "disk", doctor.Fail, ids[2], "full") > 0 && count(r, "protocol", doctor.Fail, ids[3], "") > 0 &&
				count(r, "link", doctor.Fail, "", "one host") == 3
		})
		text, _ := json.MarshalIndent(rep, "", "  ")
		if code != 1 || rep.OK {
			t.Errorf("exit %d with faults:\n%s", code, text)
		}
		for _, want := range []struct {
			name, node, says string
		}{
			{"link", "", "TCP, although both run on one host"},
			{"clock", ids[1], "off this node's"},
			{"disk", ids[2], "budget for layers fetched from peers is full"},
			{"protocol", ids[3], "protocol 99"},
		} {
			if count(rep, want.name, doctor.Fail, want.node, want.says) == 0 {
				t.Errorf("no failed %s check for %q saying %q:\n%s", want.name, want.node, want.says, text)
			}
		}
		// The text form says the same, with the fixes.
		out, _ := exec.Command(bin, "doctor", "--api", c.nodes[0].api).Output()
		if !strings.Contains(string(out), "fix: start both nodes with --transport auto") || !strings.Contains(string(out), "fix: raise --disk") {
			t.Errorf("doctor's text:\n%s", out)
		}
	})
}

package peers_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"strata/peers"
	"strata/peers/peerstest"
)

func TestCompatible(t *testing.T) {
	for _, tc := range []struct {
		a, b peers.ProtocolRange
		want bool
	}{
		{peers.ProtocolRange{1, 1}, peers.ProtocolRange{1, 1}, true},
		{peers.ProtocolRange{1, 2}, peers.ProtocolRange{1, 1}, true}, // a rolling upgrade: the new build still speaks 1
		{peers.ProtocolRange{2, 3}, peers.ProtocolRange{1, 1}, false},
		{peers.ProtocolRange{1, 1}, peers.ProtocolRange{2, 2}, false},
		{peers.ProtocolRange{2, 4}, peers.ProtocolRange{3, 9}, true},
	} {
		if got := peers.Compatible(tc.a, tc.b); got != tc.want || peers.Compatible(tc.b, tc.a) != tc.want {
			t.Errorf("Compatible(%v, %v) = %v, want %v both ways", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestIncompatibleProtocolRefused starts three nodes: the third speaks only
// a protocol the first two do not, the second a range that overlaps both.
// The first and third refuse each other, with a reason naming both
// versions; the second (a mixed, compatible version) is a member of all.
func TestIncompatibleProtocolRefused(t *testing.T) {
	ranges := []peers.ProtocolRange{{1, 1}, {1, 2}, {2, 2}}
	versions := []string{"v1.0", "v1.1", "v2.0"}
	c := peerstest.Start(t, 3, peerstest.ForNode(func(i int, cfg *peers.Config) {
		cfg.Protocols, cfg.Version = ranges[i], versions[i]
	}))
	deadline := time.Now().Add(10 * time.Second)
	want := [][]int{{0, 1}, {0, 1, 2}, {1, 2}}
	for i, nd := range c.Nodes {
		var ids []string
		for _, j := range want[i] {
			ids = append(ids, c.Nodes[j].ID().String())
		}
		slices.Sort(ids)
		for {
			var got []string
			for _, id := range nd.Membership().View().IDs() {
				got = append(got, id.String())
			}
			if slices.Equal(got, ids) && (i == 1 || len(nd.Membership().Refused()) == 1) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: view %v, refused %v; want view %v and one refusal", i, got, nd.Membership().Refused(), ids)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	r := c.Nodes[0].Membership().Refused()[0]
	if r.ID != c.Nodes[2].ID() || r.Version != "v2.0" || r.Protocols != ranges[2] ||
		!strings.Contains(r.Reason, "strata v2.0 (protocol 2)") || !strings.Contains(r.Reason, "strata v1.0 (protocol 1)") {
		t.Errorf("node 0 refused %+v", r)
	}
	if len(c.Nodes[1].Membership().Refused()) != 0 {
		t.Errorf("the node speaking 1-2 refused %v", c.Nodes[1].Membership().Refused())
	}
	if !strings.Contains(c.Log(0), "member refused") {
		t.Errorf("node 0 did not log the refusal:\n%s", c.Log(0))
	}
}

// TestAnnouncedLeavingClockPlatform: a node's leaving flag, its clock
// (with the test offset) and its platform reach the others.
func TestAnnouncedLeavingClockPlatform(t *testing.T) {
	c := peerstest.New(t, 2, peerstest.ForNode(func(i int, cfg *peers.Config) {
		if i == 1 {
			cfg.ClockOffset = time.Hour
			cfg.Findings = func() []string { return []string{"disk budget full"} }
		}
	}))
	c.Nodes[1].Membership().SetLeaving(true)
	v, err := c.Nodes[0].Membership().Wait(ctxWithin(t, within), func(v peers.View) bool {
		m, ok := v.Member(c.Nodes[1].ID())
		return ok && m.Info.Leaving
	})
	if err != nil {
		t.Fatalf("node 0 never saw node 1 leaving: %v", err)
	}
	m, _ := v.Member(c.Nodes[1].ID())
	skew := time.Unix(0, m.Info.ClockUnixNano).Sub(m.LastSeen)
	if skew < 59*time.Minute || skew > 61*time.Minute {
		t.Errorf("announced clock is %v off the receiver's, want about 1h", skew)
	}
	if !strings.Contains(m.Info.Platform, "/") || !slices.Equal(m.Info.Findings, []string{"disk budget full"}) {
		t.Errorf("platform %q, findings %q", m.Info.Platform, m.Info.Findings)
	}
}

// TestRestartedNodeRejoinsRememberedPeers: a node restarted on its data
// directory, with no --join and mDNS off, dials the members it saw last
// (DATA_DIR/known-peers) and is back in their views: the node the others
// joined is the one restarted in a rolling upgrade too.
func TestRestartedNodeRejoinsRememberedPeers(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	c := peerstest.New(t, 2, peerstest.ForNode(func(i int, cfg *peers.Config) { cfg.DataDir = dirs[i] }))
	first := c.Nodes[0]
	// Node 1 wrote node 0 down when it joined.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dirs[1], peers.KnownPeersFile))
		if strings.Contains(string(b), "/p2p/"+first.ID().String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("known-peers of node 1: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	id := c.Nodes[1].ID()
	c.Kill(1)
	if _, err := first.Membership().Wait(ctxWithin(t, within), func(v peers.View) bool { _, ok := v.Member(id); return !ok }); err != nil {
		t.Fatal(err)
	}
	again, err := peers.New(context.Background(), peers.Config{DataDir: dirs[1], Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true,
		Secret: c.Secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.ID() != id {
		t.Fatalf("restarted with another identity")
	}
	if _, err := first.Membership().Wait(ctxWithin(t, 10*time.Second), func(v peers.View) bool { _, ok := v.Member(id); return ok }); err != nil {
		t.Fatalf("the restarted node (no --join) is not back in the view: %v", err)
	}
}

// TestProbeThroughput: a member times the libp2p stream to another; a
// probe above MaxProbeBytes is refused before anything is sent.
func TestProbeThroughput(t *testing.T) {
	c := peerstest.New(t, 2)
	r, err := c.Nodes[0].ProbeThroughput(ctxWithin(t, 10*time.Second), c.Nodes[1].ID(), 4<<20)
	if err != nil || r <= 0 {
		t.Fatalf("probe: %v, %v", r, err)
	}
	t.Logf("libp2p stream on loopback: %.0f MB/s", r/1e6)
	if _, err := c.Nodes[0].ProbeThroughput(ctxWithin(t, time.Second), c.Nodes[1].ID(), peers.MaxProbeBytes+1); err == nil {
		t.Error("a probe above MaxProbeBytes was sent")
	}
}

package strata_test

import (
	"context"
	"testing"
	"time"

	"strata"
	"strata/internal/testdata"
	"strata/runtime/engine"
)

func storiesPath(t *testing.T) string { return testdata.Path(t, "gguf/stories260K.gguf") }

// oneNode is the oracle: the same request on the one-node engine.
func oneNode(t *testing.T, req strata.Request) strata.Result {
	t.Helper()
	e, err := engine.Open(storiesPath(t), engine.Options{Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Generate(context.Background(), req, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func start(t *testing.T, cfg strata.LocalConfig) *strata.LocalCluster {
	t.Helper()
	cfg.Models = map[string]string{"stories260K": storiesPath(t)}
	if cfg.Context == 0 {
		cfg.Context = 512
	}
	c, err := strata.NewLocalCluster(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func nodes(n int, mem uint64) []strata.NodeSpec {
	out := make([]strata.NodeSpec, n)
	for i := range out {
		out[i].MemoryBytes = mem
	}
	return out
}

// generate runs req from node 0 and calls at(i) after the i-th token.
func generate(t *testing.T, c *strata.LocalCluster, req strata.Request, at func(i int)) strata.Result {
	t.Helper()
	res, err := c.Generate(context.Background(), req, func(tok strata.Token) error {
		if at != nil {
			at(tok.Index)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestExampleMatchesOneNode(t *testing.T) {
	req := strata.Request{Model: "stories260K", Prompt: "Once upon a time", MaxTokens: 40}
	want := oneNode(t, req)
	c := start(t, strata.LocalConfig{Nodes: nodes(3, 4<<20), Placer: spread})
	p, err := c.Plan("stories260K")
	if err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v %v", p, err)
	}
	res := generate(t, c, req, func(i int) {
		if i == 20 {
			c.Kill(c.NodeIndex(p.Stages[1].Node))
		}
	})
	if res.Text != want.Text || res.Stats.Recoveries == 0 || res.Stats.Stages != 2 {
		t.Errorf("after a loss: %q, %+v\nwant %q", res.Text, res.Stats, want.Text)
	}
}

// Every cross-node hop of a step pays the link's latency: a ring
// n0 → n1 → n2 → n0 (the origin is node 0) has three.
func TestLinksAddLatency(t *testing.T) {
	req := strata.Request{Model: "stories260K", Prompt: "Tom", MaxTokens: 12}
	want := oneNode(t, req)
	const lat = 20 * time.Millisecond
	c := start(t, strata.LocalConfig{Nodes: nodes(3, 4<<20), Placer: spread,
		Links: []strata.Link{{A: 0, B: 1, Latency: lat}, {A: 1, B: 2, Latency: lat}, {A: 0, B: 2, Latency: lat, BytesPerSecond: 1e9}}})
	res := generate(t, c, req, nil)
	if res.Text != want.Text {
		t.Errorf("shaped links: %q, want %q", res.Text, want.Text)
	}
	if res.Stats.Round < 3*lat || res.Stats.Steps != 11 {
		t.Errorf("%d steps of %v on average; each pays 3 hops of %v", res.Stats.Steps, res.Stats.Round, lat)
	}
}

// The token shortcut: with the session's origin on the middle stage's
// node, a token without it crosses four links (last stage → origin →
// first stage → middle → last), with it three (last → first → middle →
// last; the origin takes the token meanwhile). Latency is a floor, so
// each bound below holds however slow the machine: a step cannot beat
// its links, and the shortcut's steps, though a little compute rides on
// them, stay well under a fourth link.
func TestShortcutSavesALink(t *testing.T) {
	req := strata.Request{Model: "stories260K", Prompt: "Tom", MaxTokens: 12}
	want := oneNode(t, req)
	const lat = 25 * time.Millisecond
	links := []strata.Link{{A: 0, B: 1, Latency: lat}, {A: 1, B: 2, Latency: lat}, {A: 0, B: 2, Latency: lat}}
	for _, off := range []bool{false, true} {
		c := start(t, strata.LocalConfig{Nodes: nodes(3, 4<<20), Placer: spread, Links: links, NoShortcut: off})
		res, err := c.Cluster(1).Generate(context.Background(), req, func(engine.Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != want.Text || res.Stats.Steps != 11 || res.Stats.Stages != 3 {
			t.Fatalf("shortcut off %v: %q, %+v\nwant %q", off, res.Text, res.Stats, want.Text)
		}
		t.Logf("shortcut off %v: %v per step, links of %v", off, res.Stats.Round, lat)
		if off && res.Stats.Round < 4*lat {
			t.Errorf("without the shortcut a step took %v; it crosses 4 links of %v", res.Stats.Round, lat)
		}
		if !off && (res.Stats.Round < 3*lat || res.Stats.Round >= 4*lat) {
			t.Errorf("with the shortcut a step took %v; it crosses 3 links of %v", res.Stats.Round, lat)
		}
	}
}

// A stuck node (in the view, answering nothing) is found by the probe
// after a step timeout and left out.
func TestStalledNodeLeftOut(t *testing.T) {
	req := strata.Request{Model: "stories260K", MaxTokens: 30}
	want := oneNode(t, req)
	c := start(t, strata.LocalConfig{Nodes: nodes(3, 4<<20), Placer: spread, StepTimeout: time.Second})
	res := generate(t, c, req, func(i int) {
		if i == 10 {
			c.Stall(2)
		}
	})
	if res.Text != want.Text || res.Stats.Recoveries != 1 || res.Stats.Stages != 2 {
		t.Errorf("after a stall: %q, %+v\nwant %q", res.Text, res.Stats, want.Text)
	}
}

// A cut link between two stages stalls the ring; both ends still answer
// the probe, so the same ring is rebuilt, and goes on once the link heals.
func TestCutLinkHeals(t *testing.T) {
	req := strata.Request{Model: "stories260K", MaxTokens: 30}
	want := oneNode(t, req)
	c := start(t, strata.LocalConfig{Nodes: nodes(3, 4<<20), Placer: spread, StepTimeout: time.Second})
	res := generate(t, c, req, func(i int) {
		if i == 10 {
			c.Cut(1, 2)
			time.AfterFunc(500*time.Millisecond, func() { c.Heal(1, 2) })
		}
	})
	if res.Text != want.Text || res.Stats.Recoveries == 0 || res.Stats.Stages != 3 {
		t.Errorf("after a cut: %q, %+v\nwant %q", res.Text, res.Stats, want.Text)
	}
}

// Over real libp2p on loopback, with shaped links: a node killed
// mid-answer.
func TestLibp2pNodeKilled(t *testing.T) {
	req := strata.Request{Model: "stories260K", Prompt: "Lily", MaxTokens: 60}
	want := oneNode(t, req)
	const lat = 5 * time.Millisecond
	c := start(t, strata.LocalConfig{Nodes: nodes(3, 4<<20), Placer: spread, Libp2p: true, Threads: 1,
		Links: []strata.Link{{A: 0, B: 1, Latency: lat}, {A: 1, B: 2, Latency: lat}, {A: 0, B: 2, Latency: lat}}})
	p, err := c.Plan("stories260K")
	if err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v %v", p, err)
	}
	// Any stage but the origin's (the plan orders nodes by peer ID).
	victim := c.NodeIndex(p.Stages[2].Node)
	if victim == 0 {
		victim = c.NodeIndex(p.Stages[1].Node)
	}
	if victim <= 0 {
		t.Fatalf("no stage on a node other than the origin: %v", p)
	}
	res := generate(t, c, req, func(i int) {
		if i == 30 {
			c.Kill(victim)
		}
	})
	if res.Text != want.Text || res.Stats.Recoveries == 0 {
		t.Errorf("libp2p, after a loss: %q, %+v\nwant %q", res.Text, res.Stats, want.Text)
	}
	if res.Stats.Round < 2*lat {
		t.Errorf("steps of %v on average; each pays at least 2 hops of %v", res.Stats.Round, lat)
	}
}

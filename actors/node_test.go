package actors

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/internal/testdata"
	"strata/peers"
	"strata/runtime/catalog"
	"strata/runtime/engine"
)

// startNodes starts n full nodes on loopback that share a secret and a
// models directory holding stories260K, each offering memBytes.
func startNodes(t *testing.T, n int, memBytes uint64, sessions int, step ...time.Duration) []*Node {
	t.Helper()
	return startNodesWith(t, map[string]string{"stories260K": testdata.Path(t, "gguf/stories260K.gguf")}, 512, n, memBytes, sessions, step...)
}

// startNodesWith starts nodes over the given models (name → path) with a
// plan context of ctxLen positions.
func startNodesWith(t *testing.T, files map[string]string, ctxLen, n int, memBytes uint64, sessions int, step ...time.Duration) []*Node {
	t.Helper()
	models := t.TempDir()
	for name, path := range files {
		if err := os.Symlink(path, filepath.Join(models, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	return startNodesIn(t, models, ctxLen, n, memBytes, sessions, step...)
}

// startNodesIn starts nodes that find their models in the directory models.
func startNodesIn(t *testing.T, models string, ctxLen, n int, memBytes uint64, sessions int, step ...time.Duration) []*Node {
	t.Helper()
	return startNodesFn(t, models, ctxLen, n, memBytes, sessions, nil, step...)
}

// startNodesFn is startNodesIn with a last word on each node's config.
func startNodesFn(t *testing.T, models string, ctxLen, n int, memBytes uint64, sessions int, edit func(i int, cfg *NodeConfig), step ...time.Duration) []*Node {
	t.Helper()
	secret := []byte("a test secret that is long enough for strata")
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var nodes []*Node
	stepTimeout := 20 * time.Second
	if len(step) > 0 {
		stepTimeout = step[0]
	}
	for i := 0; i < n; i++ {
		cfg := NodeConfig{
			Peers: peers.Config{
				Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: secret, NoMDNS: true,
				MemoryBytes: memBytes, Logger: logger,
				HeartbeatInterval: 200 * time.Millisecond, MemberTimeout: time.Second,
				Transport: testTransport, Verbs: testVerbs,
			},
			Models:  catalog.Catalog{Dirs: []string{models}},
			Origin:  origin.Options{PlanContext: ctxLen, PlanSessions: sessions, StepTimeout: stepTimeout},
			Threads: 1,
		}
		if i > 0 {
			first := nodes[0].Peers
			cfg.Peers.Join = []string{fmt.Sprintf("%s/p2p/%s", first.Addrs()[0], first.ID())}
		}
		if edit != nil {
			edit(i, &cfg)
		}
		nd, err := StartNode(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
		t.Cleanup(func() { nd.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, nd := range nodes {
		if _, err := nd.Peers.Membership().Wait(ctx, func(v peers.View) bool {
			withModels := 0
			for _, m := range v.Members {
				if len(m.Info.GetModels()) > 0 {
					withModels++
				}
			}
			return withModels == n
		}); err != nil {
			t.Fatalf("views did not converge on %d members: %v", n, err)
		}
	}
	return nodes
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Three real peers over loopback: a prompt sent to the third node runs
// across all three and matches one node token for token.
func TestNodesOverLibp2p(t *testing.T) {
	nodes := startNodes(t, 3, 900e3, 2)
	path := testdata.Path(t, "gguf/stories260K.gguf")
	want := oracle.OneNode(t, path, engine.Request{Prompt: "Lily wanted a cat.", MaxTokens: 100})
	p, _, err := nodes[2].Origin.Plan("stories260K")
	if err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v %v", p, err)
	}
	res, err := nodes[2].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: "Lily wanted a cat.", MaxTokens: 100}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text {
		t.Fatalf("3 peers:\n got %q\nwant %q", res.Text, want.Text)
	}
	st := res.Stats
	t.Logf("3 peers over loopback: %d steps, mean round trip %v, compute %v, transport per hop %v", st.Steps, st.Round, st.Compute, st.HopOverhead())
	if st.Steps != 99 || st.Stages != 3 || st.Round <= 0 {
		t.Errorf("step stats %+v", st)
	}
	// The conversation's next turn resumes the KV caches the stages
	// retained, across peers: everything the first turn saw is cached.
	lm, err := nodes[2].Host.Info("stories260K")
	if err != nil {
		t.Fatal(err)
	}
	seen := append(lm.Tokenizer.Encode("Lily wanted a cat.", true, false), res.Tokens[:len(res.Tokens)-1]...)
	next := append(append([]int(nil), seen...), lm.Tokenizer.Encode(" Then", false, false)...)
	wantNext := oracle.OneNode(t, path, engine.Request{Tokens: next, MaxTokens: 20})
	res2, err := nodes[2].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", Tokens: next, MaxTokens: 20}, func(engine.Token) error { return nil })
	if err != nil || res2.CachedTokens != len(seen) || res2.Text != wantNext.Text {
		t.Errorf("next turn over 3 peers: %v, %d tokens cached (want %d), %q (want %q)", err, res2.CachedTokens, len(seen), res2.Text, wantNext.Text)
	}

	// Every node announces the shard it holds.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := nodes[0].Peers.Membership().Wait(ctx, func(v peers.View) bool {
		held := 0
		for _, m := range v.Members {
			held += len(m.Info.GetShards())
		}
		return held == 3
	}); err != nil {
		t.Errorf("shards not announced: %v", err)
	}

	// Two sessions from two origins at once share the shards.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	texts := make([]string, 2)
	for i, origin := range []*Node{nodes[0], nodes[1]} {
		wg.Go(func() {
			r, err := origin.Origin.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: "Lily wanted a cat.", MaxTokens: 100}, func(engine.Token) error { return nil })
			errs[i], texts[i] = err, r.Text
		})
	}
	wg.Wait()
	for i := range errs {
		if errs[i] != nil || texts[i] != want.Text {
			t.Errorf("origin %d: %v %q", i, errs[i], texts[i])
		}
	}
	shards := 0
	for _, nd := range nodes {
		shards += len(nd.Host.Stats().Shards)
	}
	if shards != 3 {
		t.Errorf("%d shards on the cluster, want 3 shared ones", shards)
	}
	waitNoKV(t, nodes)
}

func waitNoKV(t *testing.T, nodes []*Node) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := ""
		for i, nd := range nodes {
			for _, s := range nd.Host.Stats().Shards {
				if s.Sessions != 0 || s.KvBytes != s.CachedKvBytes { // retained prompt caches are kept on purpose
					left = fmt.Sprintf("node %d %s: %d sessions, %d bytes", i, s.ActorId, s.Sessions, s.KvBytes)
				}
			}
		}
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("KV memory left behind: %s", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A node killed mid-answer costs a pause, not the answer.
func TestPeerKilledMidAnswer(t *testing.T) { peerKilledMidAnswer(t) }

func peerKilledMidAnswer(t *testing.T) {
	nodes := startNodes(t, 4, 800e3, 1)
	path := testdata.Path(t, "gguf/stories260K.gguf")
	want := oracle.OneNode(t, path, engine.Request{MaxTokens: 200})
	p, _, err := nodes[0].Origin.Plan("stories260K")
	if err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v %v", p, err)
	}
	// Kill the node running the middle stage; the prompt goes to another.
	var victim, origin *Node
	for _, nd := range nodes {
		if nd.Peers.ID().String() == p.Stages[1].Node {
			victim = nd
		} else if origin == nil {
			origin = nd
		}
	}
	var killedAt, resumedAt time.Time
	n := 0
	res, err := origin.Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 200}, func(tok engine.Token) error {
		n++
		if n == 80 {
			killedAt = time.Now()
			victim.Close()
		}
		if n == 81 {
			resumedAt = time.Now()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text {
		t.Fatalf("after the kill:\n got %q\nwant %q", res.Text, want.Text)
	}
	t.Logf("pause from kill to next token: %v", resumedAt.Sub(killedAt))
	var live []*Node
	for _, nd := range nodes {
		if nd != victim {
			live = append(live, nd)
		}
	}
	waitNoKV(t, live)
}

// Cutting the link between two stages (neither dies) costs a pause, not the answer.
func TestLinkCutMidAnswer(t *testing.T) { linkCutMidAnswer(t) }

func linkCutMidAnswer(t *testing.T) {
	nodes := startNodes(t, 3, 800e3, 1, 2*time.Second)
	path := testdata.Path(t, "gguf/stories260K.gguf")
	want := oracle.OneNode(t, path, engine.Request{MaxTokens: 150})
	p, _, err := nodes[0].Origin.Plan("stories260K")
	if err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v %v", p, err)
	}
	byID := map[string]*Node{}
	for _, nd := range nodes {
		byID[nd.Peers.ID().String()] = nd
	}
	a, b := byID[p.Stages[0].Node], byID[p.Stages[1].Node]
	n := 0
	var cutAt, resumedAt time.Time
	res, err := nodes[2].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 150}, func(tok engine.Token) error {
		n++
		if n == 50 {
			cutAt = time.Now()
			a.Peers.Host().Network().ClosePeer(b.Peers.ID())
			b.Peers.Host().Network().ClosePeer(a.Peers.ID())
		}
		if n == 51 {
			resumedAt = time.Now()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text {
		t.Fatalf("after the cut:\n got %q\nwant %q", res.Text, want.Text)
	}
	t.Logf("pause from cut to next token: %v", resumedAt.Sub(cutAt))
	waitNoKV(t, nodes)
}

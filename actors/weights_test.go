package actors

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/actors/stage"
	"strata/internal/hfhub"
	"strata/internal/testdata"
	"strata/messages"
	"strata/peers"
	"strata/runtime/catalog"
	"strata/runtime/engine"
)

// fetchNode is one node of a fetching test: its own models directory
// (empty unless it holds files) and its own data directory (the store).
type fetchNode struct {
	*Node
	name string
}

func startFetchNode(t *testing.T, name string, files map[string]string, memBytes uint64, join *Node) *fetchNode {
	t.Helper()
	return startFetchNodeWith(t, name, files, memBytes, join, func(*NodeConfig) {})
}

func startFetchNodeWith(t *testing.T, name string, files map[string]string, memBytes uint64, join *Node, adjust func(*NodeConfig)) *fetchNode {
	t.Helper()
	cfg := fetchNodeConfig(t, files, memBytes, join)
	adjust(&cfg)
	nd, err := StartNode(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })
	return &fetchNode{Node: nd, name: name}
}

// fetchNodeConfig is the configuration startFetchNodeWith starts a node
// with, before adjust.
func fetchNodeConfig(t *testing.T, files map[string]string, memBytes uint64, join *Node) NodeConfig {
	t.Helper()
	models := t.TempDir()
	for n, path := range files {
		if err := os.Symlink(path, filepath.Join(models, n+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := NodeConfig{
		Peers: peers.Config{
			DataDir: t.TempDir(), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte("a test secret that is long enough for strata"),
			NoMDNS: true, MemoryBytes: memBytes, Logger: logger, HeartbeatInterval: 200 * time.Millisecond, MemberTimeout: time.Second,
			// One rate for all: measured on a shared machine, rates differ
			// by more than placement's slack, and these tests are about
			// which node holds what.
			ComputeFlops: 1e9,
		},
		Models:  catalog.Catalog{Dirs: []string{models}},
		Origin:  origin.Options{PlanContext: 512, PlanSessions: 1, StepTimeout: 20 * time.Second, Logger: logger},
		Threads: 1,
	}
	if join != nil {
		cfg.Peers.Join = []string{fmt.Sprintf("%s/p2p/%s", join.Peers.Addrs()[0], join.Peers.ID())}
	}
	return cfg
}

// waitView waits until every node sees exactly the given live nodes.
func waitView(t *testing.T, nodes ...*fetchNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// The view must hold exactly these nodes: a count alone is met by a
	// view that still lists a node that just left and lacks one joining.
	exactly := func(v peers.View) bool {
		if len(v.Members) != len(nodes) {
			return false
		}
		for _, nd := range nodes {
			found := false
			for _, m := range v.Members {
				found = found || m.ID == nd.Peers.ID()
			}
			if !found {
				return false
			}
		}
		return true
	}
	for _, nd := range nodes {
		if _, err := nd.Peers.Membership().Wait(ctx, exactly); err != nil {
			t.Fatalf("%s: view did not settle on %d members: %v", nd.name, len(nodes), err)
		}
	}
}

// stageOf returns the layers the last session gave each node.
func stagesOf(t *testing.T, origin *fetchNode, nodes ...*fetchNode) map[string][2]int {
	t.Helper()
	p, _, err := origin.Origin.Plan("stories260K")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int{}
	for _, s := range p.Stages {
		for _, n := range nodes {
			if n.Peers.ID().String() == s.Node {
				out[n.name] = [2]int{s.First, s.End}
			}
		}
	}
	return out
}

// Only node a has the model; it offers too little memory to hold a
// stage, so b and c run the model on layers they fetch from a: each
// fetches about its own layers' bytes, and the text is one node's. When
// c leaves, d takes its layers and fetches only those (b keeps its
// stage and fetches nothing); with a gone too, b and d still generate
// from what they hold; a node that would need layers nobody holds any
// more is told so.
func TestLayersFetchedFromPeers(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	fi, _ := os.Stat(path)
	size := fi.Size()
	req := engine.Request{Prompt: "Lily wanted a cat.", MaxTokens: 60}
	want := oracle.OneNode(t, path, req)
	gen := func(origin *fetchNode) (string, error) {
		res, err := origin.Origin.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: req.Prompt, MaxTokens: req.MaxTokens}, func(engine.Token) error { return nil })
		return res.Text, err
	}

	a := startFetchNode(t, "a", map[string]string{"stories260K": path}, 1000, nil)
	b := startFetchNode(t, "b", nil, 1100e3, a.Node)
	c := startFetchNode(t, "c", nil, 1100e3, a.Node)
	waitView(t, a, b, c)
	// b reports its fetches' progress (what its terminal bar and its
	// heartbeat's fetching field show).
	var progMu sync.Mutex
	var progress [][3]int64 // done, total, and 1 when it was the last of its fetch
	b.Weights.progress = func(model string, done, total int64) {
		progMu.Lock()
		progress = append(progress, [3]int64{done, total})
		progMu.Unlock()
	}

	got, err := gen(b)
	if err != nil {
		t.Fatal(err)
	}
	progMu.Lock()
	var totals int64
	for i, p := range progress {
		if p[0] > p[1] || i > 0 && p[0] != 0 && p[0] < progress[i-1][0] {
			t.Errorf("progress %v", progress)
			break
		}
		if p[0] == p[1] {
			totals += p[1]
		}
	}
	if len(progress) == 0 || totals != b.Peers.Weights().Fetched() || progress[len(progress)-1][0] != progress[len(progress)-1][1] {
		t.Errorf("b's progress %v: finished fetches total %d, fetched %d", progress, totals, b.Peers.Weights().Fetched())
	}
	progMu.Unlock()
	if f := b.Weights.Fetching(); len(f) != 0 {
		t.Errorf("fetches still listed after they ended: %v", f)
	}
	if got != want.Text {
		t.Fatalf("b and c on fetched layers:\n got %q\nwant %q", got, want.Text)
	}
	stages := stagesOf(t, b, a, b, c)
	if _, ok := stages["a"]; ok || len(stages) != 2 {
		t.Fatalf("stages %v: want b and c only", stages)
	}
	for _, n := range []*fetchNode{b, c} {
		f := n.Peers.Weights().Fetched()
		h, ok := n.Weights.Store().Holding("stories260K")
		t.Logf("%s holds %s: fetched %d bytes of a %d-byte file (%.0f%%)", n.name, h, f, size, 100*float64(f)/float64(size))
		s := stages[n.name]
		if !ok || catalog.FormatLayers(h.Held) != fmt.Sprintf("%d-%d", s[0], s[1]-1) {
			t.Errorf("%s holds %+v, its stage is %v", n.name, h, s)
		}
		if f == 0 || f >= size*3/4 || f != h.Bytes {
			t.Errorf("%s fetched %d bytes (holds %d) of %d", n.name, f, h.Bytes, size)
		}
	}
	// a served every layer; a header may come from b or c, which hold it too.
	fetched := b.Peers.Weights().Fetched() + c.Peers.Weights().Fetched()
	served := a.Peers.Weights().Served() + b.Peers.Weights().Served() + c.Peers.Weights().Served()
	if served != fetched || a.Peers.Weights().Served() < size {
		t.Errorf("a, b, c served %d, %d, %d bytes; b and c fetched %d", a.Peers.Weights().Served(), b.Peers.Weights().Served(), c.Peers.Weights().Served(), fetched)
	}
	// b and c announce what they hold; the catalogue lists it.
	ms, _ := c.Weights.cat.List()
	if len(ms) != 1 || ms[0].Holding == nil || ms[0].Complete {
		t.Errorf("c's catalogue: %+v", ms)
	}

	// c leaves; d joins and takes c's layers: it fetches only those.
	cStage := stages["c"]
	cHeld := c.Peers.Weights().Fetched()
	c.Close()
	d := startFetchNode(t, "d", nil, 1100e3, a.Node)
	waitView(t, a, b, d)
	bBefore := b.Peers.Weights().Fetched()
	if got, err := gen(b); err != nil || got != want.Text {
		t.Fatalf("after c left: %v\n got %q\nwant %q", err, got, want.Text)
	}
	stages = stagesOf(t, b, a, b, d)
	if stages["d"] != cStage {
		t.Errorf("d got layers %v, c had %v", stages["d"], cStage)
	}
	if b.Peers.Weights().Fetched() != bBefore {
		t.Errorf("b fetched %d more bytes; its stage did not move", b.Peers.Weights().Fetched()-bBefore)
	}
	t.Logf("d fetched %d bytes for c's layers %v (c had fetched %d)", d.Peers.Weights().Fetched(), cStage, cHeld)
	if d.Peers.Weights().Fetched() != cHeld {
		t.Errorf("d fetched %d bytes, c's layers are %d", d.Peers.Weights().Fetched(), cHeld)
	}

	// a, the only node with the file, goes: b and d hold every layer.
	a.Close()
	waitView(t, b, d)
	if got, err := gen(d); err != nil || got != want.Text {
		t.Fatalf("after a left: %v\n got %q\nwant %q", err, got, want.Text)
	}

	// b goes too, and e joins: e would need b's layers, which nobody
	// has now; the session says so.
	e := startFetchNode(t, "e", nil, 1100e3, d.Node)
	waitView(t, b, d, e)
	b.Close()
	waitView(t, d, e)
	_, err = gen(d)
	if err == nil || !strings.Contains(err.Error(), "no peer holds") {
		t.Fatalf("with b's layers held by nobody: %v", err)
	}
	t.Logf("as expected: %v", err)
}

// A model pulled from the hub (it sits in a's Hugging Face cache): when
// the nodes that held some of its layers are gone, a node that needs
// them reads exactly those ranges from the hub by HTTP Range (the
// manifest it got from a peer names repository, revision and file), and
// the text is still one node's.
func TestLayersFromHubWhenNoPeerHolds(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const repo, rev, file = "org/stories", "0123456789abcdef0123456789abcdef01234567", "stories260K.gguf"
	cache := t.TempDir()
	snap := filepath.Join(cache, "models--org--stories", "snapshots", rev)
	os.MkdirAll(snap, 0o755)
	if err := os.Symlink(path, filepath.Join(snap, file)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var cdnBytes int64
	var cdnToken bool
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cdnToken = cdnToken || r.Header.Get("Authorization") != ""
		mu.Unlock()
		if r.Header.Get("Range") == "" {
			http.Error(w, "this test's CDN serves ranges only", http.StatusBadRequest)
			return
		}
		cw := &countingWriter{ResponseWriter: w}
		http.ServeContent(cw, r, file, time.Time{}, bytes.NewReader(data))
		mu.Lock()
		cdnBytes += cw.n
		mu.Unlock()
	}))
	defer cdn.Close()
	// A public repository: the nodes that read it never pulled it, so they
	// send no token (hfhub.Client.ReadRange), and the hub must not see one.
	var hubToken bool
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hubToken = hubToken || r.Header.Get("Authorization") != ""
		mu.Unlock()
		if r.URL.Path != "/"+repo+"/resolve/"+rev+"/"+file {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, cdn.URL+"/blob", http.StatusFound)
	}))
	defer hub.Close()
	client := &hfhub.Client{Endpoint: hub.URL, Token: "hub-token", Cache: t.TempDir(), Retries: 1}
	withHub := func(cfg *NodeConfig) { cfg.Hub = client }
	hfCache := func(cfg *NodeConfig) { cfg.Models.HFCache = cache }

	req := engine.Request{Prompt: "Lily wanted a cat.", MaxTokens: 40}
	want := oracle.OneNode(t, path, req)
	gen := func(origin *fetchNode) (string, error) {
		res, err := origin.Origin.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: req.Prompt, MaxTokens: req.MaxTokens}, func(engine.Token) error { return nil })
		return res.Text, err
	}
	a := startFetchNodeWith(t, "a", nil, 1000, nil, hfCache)
	b := startFetchNodeWith(t, "b", nil, 1100e3, a.Node, withHub)
	c := startFetchNodeWith(t, "c", nil, 1100e3, a.Node, withHub)
	waitView(t, a, b, c)
	if got, err := gen(b); err != nil || got != want.Text {
		t.Fatalf("from a's HF cache: %v\n got %q\nwant %q", err, got, want.Text)
	}
	if cdnBytes != 0 {
		t.Fatalf("the hub served %d bytes while a peer held them", cdnBytes)
	}
	cStage := stagesOf(t, b, a, b, c)["c"]
	cHeld, _ := c.Weights.Store().Holding("stories260K")
	a.Close()
	c.Close()
	d := startFetchNodeWith(t, "d", nil, 1100e3, b.Node, withHub)
	waitView(t, b, d)
	if got, err := gen(b); err != nil || got != want.Text {
		t.Fatalf("with c's layers from the hub: %v\n got %q\nwant %q", err, got, want.Text)
	}
	if s := stagesOf(t, b, b, d)["d"]; s != cStage {
		t.Errorf("d runs layers %v, c ran %v", s, cStage)
	}
	t.Logf("d read %d bytes from the hub for layers %v (c held %d; header from b)", d.Weights.HubFetched(), cStage, cHeld.Bytes)
	mu.Lock()
	defer mu.Unlock()
	if hubToken {
		t.Error("the hub got the token for a repository the reading node never pulled")
	}
	if d.Weights.HubFetched() != cdnBytes || cdnBytes == 0 || cdnBytes >= int64(len(data))*3/4 {
		t.Errorf("d read %d bytes from the hub, the CDN sent %d, of a %d-byte file", d.Weights.HubFetched(), cdnBytes, len(data))
	}
	if cdnToken {
		t.Error("the hub token reached the CDN")
	}
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// LoadShard's model names keep nothing on the node once answered (attack
// 3 of the second hardening round: 40 names of 8 MiB left the heap at
// 324 MiB, every name kept a fetch lock forever, and each LoadShard
// started a goroutine without limit): an invalid name is refused before
// anything is kept, and an unknown valid one leaves no lock behind.
func TestLoadShardNamesKeepNothing(t *testing.T) {
	// Under -race an 8 MiB frame takes a second to cross: more than the
	// 1-second member timeout the other tests use, which would then see
	// b leave, not the answer (failure detection is not what is tested).
	slow := func(cfg *NodeConfig) { cfg.Peers.MemberTimeout = 10 * time.Second }
	a := startFetchNodeWith(t, "a", nil, 1000, nil, slow)
	b := startFetchNodeWith(t, "b", nil, 1000, a.Node, slow)
	waitView(t, a, b)
	host := a.Peers.PID(b.Peers.ID(), stage.HostName)
	ask := func(name string) string {
		res, err := a.Peers.ActorSystem().Root.RequestFuture(host, &messages.LoadShard{Shard: &messages.ShardSpec{Model: name, First: 0, End: 1, Layers: 1}}, 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*messages.ShardLoaded).Error
	}
	huge := strings.Repeat("x", 8<<20)
	for i := range 4 {
		// The refusal quotes a little of the name, not all of it (quoted
		// whole it took seconds under -race and came back as 8 MiB: the
		// nodes missed heartbeats and the ask failed as a dead letter).
		if e := ask(huge + fmt.Sprint(i)); !strings.Contains(e, "invalid model name") || len(e) > 1024 {
			t.Fatalf("an 8 MiB name: %.200q (%d bytes)", e, len(e))
		}
	}
	for i := range 50 {
		if e := ask(fmt.Sprintf("no-such-model-%d", i)); e == "" {
			t.Fatal("an unknown model loaded")
		}
	}
	b.Weights.mu.Lock()
	locks := len(b.Weights.locks)
	b.Weights.mu.Unlock()
	if locks != 0 {
		t.Errorf("%d fetch locks kept for names that came and went", locks)
	}
	if n := b.Host.Fetching(); n != 0 {
		t.Errorf("%d fetches still counted", n)
	}
}

// A peer cannot list a node's loaded shards (their specs and actor IDs:
// what attack 5 of the second hardening round started from); a stage's
// own ShardStats, which a ring's origin probes, still answers.
func TestHostStatsNotForPeers(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	a := startFetchNode(t, "a", map[string]string{"stories260K": path}, 100e6, nil)
	b := startFetchNode(t, "b", nil, 1000, a.Node)
	waitView(t, a, b)
	res, err := b.Peers.ActorSystem().Root.RequestFuture(b.Peers.PID(a.Peers.ID(), stage.HostName), &messages.LoadShard{Shard: &messages.ShardSpec{Model: "stories260K", First: 0, End: 5, Layers: 5}}, 10*time.Second).Result()
	if err != nil || res.(*messages.ShardLoaded).Error != "" {
		t.Fatalf("load: %v %v", res, err)
	}
	loaded := res.(*messages.ShardLoaded)
	st, err := b.Peers.ActorSystem().Root.RequestFuture(b.Peers.PID(a.Peers.ID(), stage.HostName), &messages.ShardStats{}, 5*time.Second).Result()
	if err != nil || len(st.(*messages.ShardStatsReply).Shards) != 0 {
		t.Fatalf("a peer asked the host for its shards: %v %v", st, err)
	}
	if local := a.Host.Stats(); len(local.Shards) != 1 {
		t.Fatalf("the node's own view lists %d shards", len(local.Shards))
	}
	shard := b.Peers.PID(a.Peers.ID(), loaded.ActorId)
	if _, err := b.Peers.ActorSystem().Root.RequestFuture(shard, &messages.ShardStats{}, 5*time.Second).Result(); err != nil {
		t.Fatalf("a stage's own stats: %v", err)
	}
}

// A node whose disk budget cannot take the layers a plan gives it
// answers the load with fetch_failed; the session plans again without it
// and the answer is one node's (the soak's disk faults lost requests to
// a 500 "disk budget" before).
func TestNodeThatCannotFetchIsLeftOut(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	req := engine.Request{Prompt: "Lily wanted a cat.", MaxTokens: 40}
	want := oracle.OneNode(t, path, req)
	// b, c and d could each hold the whole model; d offers the most
	// memory, so plans want it, but it may keep 1000 bytes of fetched
	// layers.
	a := startFetchNode(t, "a", map[string]string{"stories260K": path}, 1000, nil)
	b := startFetchNode(t, "b", nil, 2e6, a.Node)
	c := startFetchNode(t, "c", nil, 2e6, a.Node)
	d := startFetchNodeWith(t, "d", nil, 3e6, a.Node, func(cfg *NodeConfig) { cfg.DiskBytes = 1000 })
	waitView(t, a, b, c, d)
	if stages := stagesOf(t, b, a, b, c, d); stages["d"] == [2]int{} {
		t.Fatalf("plan %v: want d's", stages)
	}
	res, err := b.Origin.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: req.Prompt, MaxTokens: req.MaxTokens}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text {
		t.Fatalf("without d:\n got %q\nwant %q", res.Text, want.Text)
	}
	if res.Stats.Recoveries == 0 {
		t.Errorf("no re-plan: d's refusal was not seen")
	}
	if f := d.Peers.Weights().Fetched(); f != 0 {
		t.Errorf("d fetched %d bytes past its 1000-byte budget", f)
	}
}

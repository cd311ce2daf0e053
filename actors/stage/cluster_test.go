package stage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/oracle"
	"strata/actors/internal/wire"
	"strata/actors/origin"
	"strata/messages"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/grammar"
	"strata/runtime/sample"
	"strata/runtime/tensor"
)

// localCluster starts n hosts in one actor system, each offering memBytes
// (their actors sending through mw, when given).
type localCluster struct {
	system *actor.ActorSystem
	hosts  []*Host
	dir    origin.StaticDirectory
	store  catalog.Files
	// What the hosts' OnBatch heard: forward passes, the steps and the
	// rows they carried.
	batchRuns, batchSteps, batchRows atomic.Int64
}

// answers is an actor that passes the stage's answers it receives to ch,
// as a session's inbox does.
type answers struct{ ch chan any }

func (a *answers) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Token, *messages.ForwardError, *actor.Terminated:
		select {
		case a.ch <- m:
		default:
		}
	}
}

// sessionOrigin is the origin (inbox) of a session open on lc's stages.
func (lc *localCluster) sessionOrigin() *actor.PID {
	for _, h := range lc.hosts {
		h.mu.Lock()
		for _, s := range h.shards {
			s.mu.Lock()
			for _, ss := range s.sessions {
				s.mu.Unlock()
				h.mu.Unlock()
				return ss.origin
			}
			s.mu.Unlock()
		}
		h.mu.Unlock()
	}
	return nil
}

// quietSystem is an actor system that logs nothing.
func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

func newLocalCluster(t testing.TB, n int, memBytes uint64, store catalog.Files, mw ...actor.SenderMiddleware) *localCluster {
	t.Helper()
	return newLocalClusterWith(t, n, memBytes, store, nil, mw...)
}

// newLocalClusterWith is newLocalCluster with configure editing host i's
// configuration before it starts (nil: none).
func newLocalClusterWith(t testing.TB, n int, memBytes uint64, store catalog.Files, configure func(i int, c *HostConfig), mw ...actor.SenderMiddleware) *localCluster {
	t.Helper()
	lc := &localCluster{system: quietSystem(), store: store}
	pool := tensor.NewPool(2)
	var names []string
	for name := range store {
		names = append(names, name)
	}
	for i := 0; i < n; i++ {
		cfg := HostConfig{Models: store, Pool: pool, MemoryBytes: memBytes, Name: fmt.Sprintf("n%d", i), SenderMiddleware: mw,
			OnBatch: func(steps, rows int) {
				lc.batchRuns.Add(1)
				lc.batchSteps.Add(int64(steps))
				lc.batchRows.Add(int64(rows))
			}}
		if configure != nil {
			configure(i, &cfg)
		}
		h := NewHost(cfg)
		pid, err := lc.system.Root.SpawnNamed(h.Props(), fmt.Sprintf("%s-%d", HostName, i))
		if err != nil {
			t.Fatal(err)
		}
		lc.hosts = append(lc.hosts, h)
		lc.dir = append(lc.dir, origin.Member{ID: fmt.Sprintf("n%d", i), Host: pid, MemoryBytes: memBytes, Models: names, Arch: runtime.GOARCH})
	}
	t.Cleanup(func() {
		lc.system.Shutdown()
		pool.Close()
	})
	return lc
}

func (lc *localCluster) cluster(opts origin.Options) *origin.Origin {
	c := origin.New(lc.system, lc.dir, lc.hosts[0], opts)
	return c
}

// waitFree waits until no host holds a session's KV cache.
func (lc *localCluster) waitFree(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		busy := ""
		for i, h := range lc.hosts {
			for _, s := range h.Stats().Shards {
				if s.Sessions != 0 || s.KvBytes != s.CachedKvBytes { // retained prompt caches are kept on purpose
					busy = fmt.Sprintf("host %d shard %s: %d sessions, %d KV bytes", i, s.ActorId, s.Sessions, s.KvBytes)
				}
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("KV memory left behind: %s", busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGreedyMatchesSingleNode(t *testing.T) {
	store := oracle.Stories(t)
	prompts := []string{"", "Lily and Tom went to the park. They saw"}
	var want []engine.Result
	for _, p := range prompts {
		want = append(want, oracle.OneNode(t, store["stories260K"], engine.Request{Prompt: p, MaxTokens: 120}))
	}
	for _, c := range []struct {
		nodes  int
		mem    uint64
		stages int
	}{{1, 4 << 20, 1}, {2, 1100e3, 2}, {3, 800e3, 3}, {5, 450e3, 5}} {
		t.Run(fmt.Sprintf("%d-nodes", c.nodes), func(t *testing.T) {
			lc := newLocalCluster(t, c.nodes, c.mem, store)
			cl := lc.cluster(origin.Options{PlanContext: 512})
			defer cl.Close()
			p, _, err := cl.Plan("stories260K")
			if err != nil || len(p.Stages) != c.stages {
				t.Fatalf("plan %v, %v; want %d stages", p, err, c.stages)
			}
			for i, prompt := range prompts {
				var streamed strings.Builder
				res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 120}, func(tok engine.Token) error {
					streamed.WriteString(tok.Text)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(res.Tokens) != fmt.Sprint(want[i].Tokens) || res.Text != want[i].Text || streamed.String() != res.Text {
					t.Fatalf("prompt %q: tokens differ from one node\n got %v\nwant %v", prompt, res.Tokens, want[i].Tokens)
				}
			}
			lc.waitFree(t)
		})
	}
}

func TestF16ActivationsStayClose(t *testing.T) {
	store := oracle.Stories(t)
	lc := newLocalCluster(t, 3, 800e3, store)
	cl := lc.cluster(origin.Options{PlanContext: 512, Hidden: messages.HiddenType_HIDDEN_F16})
	defer cl.Close()
	res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 30}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "Once upon a time") {
		t.Errorf("f16 activations: %q", res.Text)
	}
}

func TestConcurrentSessionsShareShards(t *testing.T) {
	store := oracle.Stories(t)
	lc := newLocalCluster(t, 3, 800e3*2, store)
	// Both plan room for two sessions' KV, so the second session finds
	// its cache's memory on every stage the first one uses.
	a := lc.cluster(origin.Options{PlanContext: 512, PlanSessions: 2})
	b := lc.cluster(origin.Options{PlanContext: 512, PlanSessions: 2})
	defer a.Close()
	defer b.Close()
	want := oracle.OneNode(t, store["stories260K"], engine.Request{Prompt: "Tom had a red ball.", MaxTokens: 80})
	want2 := oracle.OneNode(t, store["stories260K"], engine.Request{MaxTokens: 80, Sampling: sample.Params{Temperature: 0.9, Seed: 3}})
	var wg sync.WaitGroup
	var got, got2 engine.Result
	var err, err2 error
	wg.Go(func() {
		got, err = a.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: "Tom had a red ball.", MaxTokens: 80}, func(engine.Token) error { return nil })
	})
	wg.Go(func() {
		got2, err2 = b.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 80, Sampling: sample.Params{Temperature: 0.9, Seed: 3}}, func(engine.Token) error { return nil })
	})
	wg.Wait()
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	if got.Text != want.Text || got2.Text != want2.Text {
		t.Errorf("concurrent sessions differ from single node:\n%q\n%q\n%q\n%q", got.Text, want.Text, got2.Text, want2.Text)
	}
	p, _, _ := a.Plan("stories260K")
	// Each session's statistics are its own: one step per token fed back.
	for _, r := range []engine.Result{got, got2} {
		steps := len(r.Tokens) - 1
		if r.FinishReason == engine.FinishStop {
			steps++ // the end-of-generation token was not kept
		}
		if st := r.Stats; st.Steps != steps || st.Stages != len(p.Stages) || st.Recoveries != 0 || st.Round <= 0 {
			t.Errorf("stats %+v for %d tokens (%s) on %d stages", st, len(r.Tokens), r.FinishReason, len(p.Stages))
		}
	}
	shards := 0
	for _, h := range lc.hosts {
		shards += len(h.Stats().Shards)
	}
	if shards != len(p.Stages) || len(p.Stages) < 2 {
		t.Errorf("%d shards loaded for two sessions of one model, want the plan's %d (shared)", shards, len(p.Stages))
	}
	lc.waitFree(t)
}

func TestCancelFreesKV(t *testing.T) {
	lc := newLocalCluster(t, 3, 800e3, oracle.Stories(t))
	cl := lc.cluster(origin.Options{PlanContext: 512})
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := cl.Generate(ctx, engine.Request{Model: "stories260K", MaxTokens: 400}, func(engine.Token) error {
		if n++; n == 20 {
			if len(cl.Sessions()) != 1 {
				t.Error("session not listed while running")
			}
			kv := uint64(0)
			for _, h := range lc.hosts {
				for _, s := range h.Stats().Shards {
					kv += s.KvBytes
				}
			}
			if kv == 0 {
				t.Error("no KV cache held while running")
			}
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	lc.waitFree(t)
	if len(cl.Sessions()) != 0 {
		t.Error("session still listed")
	}
}

func TestRefusals(t *testing.T) {
	lc := newLocalCluster(t, 2, 300e3, oracle.Stories(t))
	cl := lc.cluster(origin.Options{PlanContext: 512})
	defer cl.Close()
	_, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 5}, func(engine.Token) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "cannot place stories260K") || !strings.Contains(err.Error(), "offers 600.0 kB") {
		t.Errorf("too small cluster: %v", err)
	}
	if _, err := cl.Generate(context.Background(), engine.Request{Model: "nope"}, nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown model: %v", err)
	}
}

// A shard rejects garbage from a peer with an error to the session, not a crash.
func TestShardRejectsBadForward(t *testing.T) {
	lc := newLocalCluster(t, 1, 4<<20, oracle.Stories(t))
	h := lc.dir[0].Host
	res, err := lc.system.Root.RequestFuture(h, &messages.LoadShard{Shard: &messages.ShardSpec{Model: "stories260K", First: 2, End: 5, Layers: 5}}, time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	loaded := res.(*messages.ShardLoaded)
	if loaded.Error != "" {
		t.Fatal(loaded.Error)
	}
	in := &answers{ch: make(chan any, 8)}
	self := lc.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }))
	shardPID := &actor.PID{Address: h.Address, Id: loaded.ActorId}
	for _, bad := range []*messages.Forward{
		{Session: "s", Count: 1, Context: 64, Hidden: []byte{1, 2, 3}, ReplyTo: wire.FromPID(self)},
		{Session: "s", Count: 1000, Context: 64, ReplyTo: wire.FromPID(self)},
		{Session: "t", Count: 1, Context: 1 << 30, Hidden: make([]byte, 256), ReplyTo: wire.FromPID(self)},
		{Session: "u", Position: 9, Count: 1, Context: 64, Hidden: make([]byte, 256), ReplyTo: wire.FromPID(self)},
		{Session: "v", Count: 1, Context: 64, Hidden: make([]byte, 256), HiddenType: 7, ReplyTo: wire.FromPID(self)},
		// Non-finite activations: F32 NaN, F16 infinity.
		{Session: "w", Count: 1, Context: 64, Hidden: binary.LittleEndian.AppendUint32(make([]byte, 252), 0x7fc00000), ReplyTo: wire.FromPID(self), Sample: true},
		{Session: "x", Count: 1, Context: 64, Hidden: binary.LittleEndian.AppendUint16(make([]byte, 126), 0x7c00), HiddenType: messages.HiddenType_HIDDEN_F16, ReplyTo: wire.FromPID(self), Sample: true},
		// Speculative guesses: as many as rows, outside the vocabulary,
		// on a step that does not sample, with the shortcut.
		{Session: "y", Count: 1, Context: 64, Hidden: make([]byte, 256), ReplyTo: wire.FromPID(self), Sample: true, Guesses: []int32{5}},
		{Session: "y", Count: 2, Context: 64, Hidden: make([]byte, 512), ReplyTo: wire.FromPID(self), Sample: true, Guesses: []int32{1 << 20}},
		{Session: "y", Count: 2, Context: 64, Hidden: make([]byte, 512), ReplyTo: wire.FromPID(self), Guesses: []int32{5}},
		{Session: "y", Count: 2, Context: 64, Hidden: make([]byte, 512), ReplyTo: wire.FromPID(self), Sample: true, Guesses: []int32{5}, ChainUntil: 3},
		{Session: "y", Count: 20, Context: 64, Hidden: make([]byte, 20*256), ReplyTo: wire.FromPID(self), Sample: true, Guesses: make([]int32, 19)},
	} {
		lc.system.Root.Send(shardPID, bad)
		select {
		case m := <-in.ch:
			if fe, ok := m.(*messages.ForwardError); !ok || fe.Error == "" {
				t.Errorf("got %v", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no error reply")
		}
	}
	// Loading layers the model does not have is refused.
	res, _ = lc.system.Root.RequestFuture(h, &messages.LoadShard{Shard: &messages.ShardSpec{Model: "stories260K", First: 0, End: 9, Layers: 9}}, time.Second).Result()
	if res.(*messages.ShardLoaded).Error == "" {
		t.Error("layer range beyond the model accepted")
	}
}

// dynDirectory is a view nodes can leave.
type dynDirectory struct {
	mu      sync.Mutex
	members []origin.Member
}

func (d *dynDirectory) Members() []origin.Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]origin.Member(nil), d.members...)
}

func (d *dynDirectory) remove(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, m := range d.members {
		if m.ID == id {
			d.members = append(d.members[:i], d.members[i+1:]...)
			return
		}
	}
}

// kill stops a node's host and its shards, as if the process died, and
// drops it from the view.
func (lc *localCluster) kill(t testing.TB, dir *dynDirectory, i int) {
	if err := lc.system.Root.StopFuture(lc.dir[i].Host).Wait(); err != nil {
		t.Fatal(err)
	}
	dir.remove(lc.dir[i].ID)
}

func TestNodeLostMidAnswer(t *testing.T) {
	store := oracle.Stories(t)
	want := oracle.OneNode(t, store["stories260K"], engine.Request{MaxTokens: 200})
	for _, victim := range []int{0, 1, 2} { // first, middle and last stage
		t.Run(fmt.Sprintf("kill-stage-%d", victim), func(t *testing.T) {
			lc := newLocalCluster(t, 4, 800e3, store)
			dir := &dynDirectory{members: append([]origin.Member(nil), lc.dir...)}
			cl := origin.New(lc.system, dir, lc.hosts[0], origin.Options{PlanContext: 512})
			defer cl.Close()
			p, _, err := cl.Plan("stories260K")
			if err != nil || len(p.Stages) != 3 {
				t.Fatalf("%v %v", p, err)
			}
			node := p.Stages[victim].Node
			idx := int(node[1] - '0')
			var text strings.Builder
			n := 0
			res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 200}, func(tok engine.Token) error {
				text.WriteString(tok.Text)
				if n++; n == 60 {
					lc.kill(t, dir, idx)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != want.Text || text.String() != want.Text {
				t.Errorf("text after losing %s differs:\n got %q\nwant %q", node, res.Text, want.Text)
			}
			for _, s := range cl.Sessions() {
				t.Errorf("session %s still listed", s.ID)
			}
			lc.waitFree(t)
		})
	}
}

func TestSurvivorsTooSmall(t *testing.T) {
	store := oracle.Stories(t)
	lc := newLocalCluster(t, 3, 800e3, store)
	dir := &dynDirectory{members: append([]origin.Member(nil), lc.dir...)}
	cl := origin.New(lc.system, dir, lc.hosts[0], origin.Options{PlanContext: 512, ViewSettle: 200 * time.Millisecond})
	defer cl.Close()
	n := 0
	_, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 200}, func(tok engine.Token) error {
		if n++; n == 30 {
			lc.kill(t, dir, 1)
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "cannot place stories260K") || !strings.Contains(err.Error(), "across 2 node(s)") {
		t.Fatalf("err %v", err)
	}
	lc.waitFree(t)
}

// When the origin of a session vanishes, the shards free its KV caches.
func TestOriginLostFreesSessions(t *testing.T) {
	store := oracle.Stories(t)
	lc := newLocalCluster(t, 3, 800e3, store)
	cl := lc.cluster(origin.Options{PlanContext: 512})
	defer cl.Close()
	started := make(chan *actor.PID, 1)
	go cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 400}, func(tok engine.Token) error {
		if tok.Index == 5 {
			started <- lc.sessionOrigin()
			select {} // the origin hangs: only its inbox's death can free the stages
		}
		return nil
	})
	inbox := <-started
	lc.system.Root.Stop(inbox)
	lc.waitFree(t)
}

func loadShard(t *testing.T, lc *localCluster, first, end uint32) *messages.ShardLoaded {
	t.Helper()
	res, err := lc.system.Root.RequestFuture(lc.dir[0].Host, &messages.LoadShard{Shard: &messages.ShardSpec{Model: "stories260K", First: first, End: end, Layers: 5}}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return res.(*messages.ShardLoaded)
}

// Idle shards make room for new ones, are really forgotten, and the same
// layers load again later under a fresh actor.
func TestEvictionReleasesAndReloads(t *testing.T) {
	defer func(d time.Duration) { pinFor = d }(pinFor)
	pinFor = 0
	lc := newLocalCluster(t, 1, 800e3, oracle.Stories(t))
	h := lc.hosts[0]
	a := loadShard(t, lc, 0, 2)
	if a.Error != "" {
		t.Fatal(a.Error)
	}
	b := loadShard(t, lc, 2, 5)
	if b.Error != "" {
		t.Fatal(b.Error)
	}
	if st := h.Stats(); len(st.Shards) != 1 || st.Shards[0].ActorId != b.ActorId || h.UsedBytes() != b.Bytes {
		t.Fatalf("after evicting [0,2): %d shards, used %d, want only %s with %d bytes", len(st.Shards), h.UsedBytes(), b.ActorId, b.Bytes)
	}
	a2 := loadShard(t, lc, 0, 2)
	if a2.Error != "" || a2.ActorId == a.ActorId {
		t.Fatalf("reload of [0,2): %q as %s (first was %s)", a2.Error, a2.ActorId, a.ActorId)
	}
	if h.UsedBytes() != a2.Bytes {
		t.Errorf("used %d, want %d", h.UsedBytes(), a2.Bytes)
	}
}

// A shard short of memory for its first session's KV cache refuses the
// session; it does not evict itself to make room.
func TestShardNeverEvictsItself(t *testing.T) {
	defer func(d time.Duration) { pinFor = d }(pinFor)
	pinFor = 0
	lc := newLocalCluster(t, 1, 510e3, oracle.Stories(t))
	a := loadShard(t, lc, 0, 2)
	if a.Error != "" {
		t.Fatal(a.Error)
	}
	in := &answers{ch: make(chan any, 8)}
	self := lc.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }))
	pid := &actor.PID{Address: lc.dir[0].Host.Address, Id: a.ActorId}
	lc.system.Root.Send(pid, &messages.Forward{Session: "s", Count: 1, Tokens: []int32{1}, Context: 2048, ReplyTo: wire.FromPID(self), Route: []*messages.PID{wire.FromPID(self)}})
	select {
	case m := <-in.ch:
		fe, ok := m.(*messages.ForwardError)
		if !ok || !strings.Contains(fe.Error, "only") {
			t.Fatalf("got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	if st := lc.hosts[0].Stats(); len(st.Shards) != 1 || lc.hosts[0].UsedBytes() != a.Bytes {
		t.Errorf("shard evicted itself: %d shards, used %d", len(st.Shards), lc.hosts[0].UsedBytes())
	}
	// A session cannot be continued by someone else, nor opened without a reply_to.
	other := lc.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &answers{ch: make(chan any, 8)} }))
	for _, f := range []*messages.Forward{
		{Session: "t", Count: 1, Tokens: []int32{1}, Context: 16},
		{Session: "u", Count: 1, Tokens: []int32{1}, Context: 16, ReplyTo: wire.FromPID(self), Route: []*messages.PID{wire.FromPID(self)}},
		{Session: "u", Position: 1, Count: 1, Tokens: []int32{1}, Context: 16, ReplyTo: wire.FromPID(other), Route: []*messages.PID{wire.FromPID(self)}},
	} {
		lc.system.Root.Send(pid, f)
	}
	time.Sleep(200 * time.Millisecond)
	if st := lc.hosts[0].Stats(); st.Shards[0].Sessions != 1 {
		t.Errorf("%d sessions, want 1 (u only)", st.Shards[0].Sessions)
		for len(in.ch) > 0 {
			t.Logf("inbox: %v", <-in.ch)
		}
	}
}

// openSession opens session on the shard of all layers at pid with one
// sampled token, the test's root as its origin.
func openSession(t *testing.T, lc *localCluster, pid *actor.PID, session string) {
	t.Helper()
	in := &answers{ch: make(chan any, 8)}
	self := lc.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }))
	lc.system.Root.Send(pid, &messages.Forward{Session: session, Count: 1, Tokens: []int32{1}, Context: 64, ReplyTo: wire.FromPID(self), Sample: true})
	select {
	case m := <-in.ch:
		if _, ok := m.(*messages.Token); !ok {
			t.Fatalf("got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no token")
	}
}

// Only the origin's node may free a session: a FreeSession from another
// node (the bridge stamps a peer's messages with its address) leaves it.
func TestFreeSessionOnlyFromOrigin(t *testing.T) {
	lc := newLocalCluster(t, 1, 4<<20, oracle.Stories(t))
	shardPID := &actor.PID{Address: lc.dir[0].Host.Address, Id: loadShard(t, lc, 0, 5).ActorId}
	openSession(t, lc, shardPID, "s")
	sessions := func() uint32 { return lc.hosts[0].Stats().Shards[0].Sessions }
	// From another node: the session stays.
	intruder := actor.NewPID("12D3KooWIntruder", "future$1")
	lc.system.Root.RequestWithCustomSender(shardPID, &messages.FreeSession{Session: "s"}, intruder)
	// A round trip after it: the shard has handled the FreeSession.
	if _, err := lc.system.Root.RequestFuture(shardPID, &messages.ShardStats{}, time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if n := sessions(); n != 1 {
		t.Fatalf("a FreeSession from another node freed the session (%d left)", n)
	}
	// From the origin's node: freed.
	if _, err := lc.system.Root.RequestFuture(shardPID, &messages.FreeSession{Session: "s"}, time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if n := sessions(); n != 0 {
		t.Fatalf("the origin's FreeSession left %d sessions", n)
	}
}

// slowStore is a ModelStore whose Path waits until released: a cold disk,
// or headers fetched from a peer.
type slowStore struct {
	catalog.Files
	entered chan struct{}
	release chan struct{}
}

func (s *slowStore) Path(name string) (string, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Files.Path(name)
}

// returnsWithin fails the test if f does not return within d.
func returnsWithin(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("%s blocked while a model file was being opened", what)
	}
}

// Loading a shard or opening a model does I/O; the host's and the
// cluster's locks, which heartbeats (UsedBytes) and status requests need,
// must not be held through it.
func TestNoLockAcrossModelIO(t *testing.T) {
	store := &slowStore{Files: oracle.Stories(t), entered: make(chan struct{}, 2), release: make(chan struct{})}
	system := quietSystem()
	defer system.Shutdown()
	h := NewHost(HostConfig{Models: store, MemoryBytes: 4 << 20})
	pid, err := system.Root.SpawnNamed(h.Props(), HostName)
	if err != nil {
		t.Fatal(err)
	}
	f := system.Root.RequestFuture(pid, &messages.LoadShard{Shard: &messages.ShardSpec{Model: "stories260K", First: 0, End: 5, Layers: 5}}, 10*time.Second)
	<-store.entered
	returnsWithin(t, time.Second, "Host.UsedBytes", func() { h.UsedBytes() })
	returnsWithin(t, time.Second, "Host.Stats", func() { h.Stats() })

	c := origin.New(system, origin.StaticDirectory{{ID: "n0", Host: pid, MemoryBytes: 4 << 20, Models: []string{"stories260K"}}}, h, origin.Options{})
	defer c.Close()
	planned := make(chan error, 1)
	go func() { _, _, err := c.Plan("stories260K"); planned <- err }()
	<-store.entered
	returnsWithin(t, time.Second, "Cluster.Sessions", func() { c.Sessions() })

	close(store.release)
	res, err := f.Result()
	if err != nil || res.(*messages.ShardLoaded).Error != "" {
		t.Fatalf("load: %v %v", res, err)
	}
	if err := <-planned; err != nil {
		t.Fatal(err)
	}
}

// blackHoleHost answers LoadShard like a host, with a shard that never
// answers anything: a node whose heartbeats go on but whose stage is stuck.
func blackHoleHost(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.LoadShard); ok {
		hole := ctx.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		ctx.Respond(&messages.ShardLoaded{Shard: m.Shard, ActorId: hole.Id})
	}
}

// A stage that stops answering is left out after a step timeout, and the
// answer is still one node's.
func TestStuckStageExcluded(t *testing.T) {
	store := oracle.Stories(t)
	want := oracle.OneNode(t, store["stories260K"], engine.Request{MaxTokens: 40})
	// The first ring's other shards never saw a step: unpinned at once, so
	// the new ring may evict them.
	defer func(d time.Duration) { pinFor = d }(pinFor)
	pinFor = 0
	lc := newLocalCluster(t, 4, 800e3, store)
	hole, err := lc.system.Root.SpawnNamed(actor.PropsFromFunc(blackHoleHost), "black-hole")
	if err != nil {
		t.Fatal(err)
	}
	dir := append([]origin.Member(nil), lc.dir...)
	dir[0].Host = hole
	cl := origin.New(lc.system, origin.StaticDirectory(dir), lc.hosts[0], origin.Options{PlanContext: 512, StepTimeout: time.Second})
	defer cl.Close()
	if p, _, err := cl.Plan("stories260K"); err != nil || p.Stages[0].Node != "n0" {
		t.Fatalf("the stuck node is not in the plan: %v %v", p, err)
	}
	res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 40}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text {
		t.Errorf("text without the stuck stage differs:\n got %q\nwant %q", res.Text, want.Text)
	}
	if st := res.Stats; st.Recoveries == 0 || st.Recoveries > 2 {
		t.Errorf("%d recoveries, want 1 or 2", st.Recoveries)
	}
}

// On a node, the origin plans and tokenizes with the description of the
// model that its host read from the file it has open for the shards
// (Host.Info; origin.New takes nothing else to describe a model), and
// the last stage constrains sampling with that same description's
// vocabulary: one open file and one tokenizer per model.
func TestOneDescriptionPerModel(t *testing.T) {
	lc := newLocalCluster(t, 1, 4<<20, oracle.Stories(t))
	h := lc.hosts[0]
	cl := origin.New(lc.system, lc.dir, h, origin.Options{PlanContext: 512})
	sc, err := grammar.Compile([]byte(`{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 20, Schema: sc}, func(engine.Token) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	in, err := h.Info("stories260K")
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	held, files, infos := h.files["stories260K"], len(h.files)+len(h.stale), len(h.infos)
	var vocabs []*grammar.Vocab
	for _, s := range h.shards {
		vocabs = append(vocabs, s.gram.vocab)
	}
	h.mu.Unlock()
	if files != 1 || infos != 1 || h.infos[held] != in {
		t.Fatalf("the host holds %d files and %d descriptions", files, infos)
	}
	if len(vocabs) != 1 || vocabs[0] != in.Vocab() {
		t.Errorf("the last stage's vocabulary is not the node's description's: %v", vocabs)
	}
	// Closing the origin left the host's file open for its shards.
	if _, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 5}, func(engine.Token) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestIdleShardsUnload: with HostConfig.UnloadAfter, a shard no session
// uses unloads that long after its last use (its memory released), a
// shard with a session stays, and unloads in its turn that long after the
// session ended (into the prompt cache, which goes with it); the same
// layers load again under a fresh actor.
func TestIdleShardsUnload(t *testing.T) {
	defer func(d time.Duration) { pinFor = d }(pinFor)
	pinFor = 0
	const after = 300 * time.Millisecond
	lc := newLocalClusterWith(t, 1, 4<<20, oracle.Stories(t), func(_ int, c *HostConfig) { c.UnloadAfter = after })
	h := lc.hosts[0]
	busy, idle := loadShard(t, lc, 0, 5), loadShard(t, lc, 0, 2)
	if busy.Error != "" || idle.Error != "" {
		t.Fatal(busy.Error, idle.Error)
	}
	shardPID := &actor.PID{Address: lc.dir[0].Host.Address, Id: busy.ActorId}
	openSession(t, lc, shardPID, "s")
	loaded := func() []string {
		var ids []string
		for _, s := range h.Stats().Shards {
			ids = append(ids, s.ActorId)
		}
		return ids
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %v loaded, %d bytes used", what, loaded(), h.UsedBytes())
			}
		}
	}
	waitFor("the idle shard", func() bool { ids := loaded(); return len(ids) == 1 && ids[0] == busy.ActorId })
	time.Sleep(2 * after)
	if ids := loaded(); len(ids) != 1 || h.UsedBytes() <= busy.Bytes {
		t.Fatalf("the shard with a session: %v loaded, %d bytes used (weights %d and its KV)", ids, h.UsedBytes(), busy.Bytes)
	}
	// Ended into the prompt cache (as most sessions end): the count starts
	// again from here, not from the session's start.
	if _, err := lc.system.Root.RequestFuture(shardPID, &messages.FreeSession{Session: "s", Retain: true}, time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor("the shard whose session ended", func() bool { return len(loaded()) == 0 && h.UsedBytes() == 0 })
	if d := time.Since(start); d < after-50*time.Millisecond {
		t.Errorf("unloaded %v after its session ended, before UnloadAfter (%v)", d, after)
	}
	again := loadShard(t, lc, 0, 2)
	if again.Error != "" || again.ActorId == idle.ActorId {
		t.Fatalf("reload of [0,2): %q as %s (first was %s)", again.Error, again.ActorId, idle.ActorId)
	}
}

// TestAnswerAfterShardsUnloaded: a cluster whose shards unloaded while
// idle answers the next request as before (the plan loads them again).
func TestAnswerAfterShardsUnloaded(t *testing.T) {
	defer func(d time.Duration) { pinFor = d }(pinFor)
	pinFor = 0
	store := oracle.Stories(t)
	req := engine.Request{Model: "stories260K", Prompt: "Once upon a time", MaxTokens: 20}
	want := oracle.OneNode(t, store["stories260K"], req)
	lc := newLocalClusterWith(t, 3, 800e3, store, func(_ int, c *HostConfig) { c.UnloadAfter = 200 * time.Millisecond })
	cl := lc.cluster(origin.Options{PlanContext: 512})
	for round := range 2 {
		start := time.Now()
		res, err := cl.Generate(context.Background(), req, func(engine.Token) error { return nil })
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !slices.Equal(res.Tokens, want.Tokens) {
			t.Fatalf("round %d: tokens differ from one node\n got %v\nwant %v", round, res.Tokens, want.Tokens)
		}
		t.Logf("round %d: %v", round, time.Since(start))
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			n := 0
			for _, h := range lc.hosts {
				n += len(h.Stats().Shards)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d shards still loaded", round, n)
			}
		}
	}
}

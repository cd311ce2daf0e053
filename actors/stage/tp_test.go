package stage

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/oracle"
	"strata/actors/internal/wire"
	"strata/actors/origin"
	"strata/actors/plan"
	"strata/messages"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

// newTPCluster is newLocalCluster whose hosts form in-process all-reduce
// groups and announce the memory bandwidths given (one a node).
func newTPCluster(t testing.TB, bandwidths []float64, memBytes uint64, store catalog.Files) *localCluster {
	t.Helper()
	lc := &localCluster{system: quietSystem(), store: store}
	pool := tensor.NewPool(2)
	groups := &LocalGroups{}
	var names []string
	for name := range store {
		names = append(names, name)
	}
	for i, bw := range bandwidths {
		h := NewHost(HostConfig{Models: store, Pool: pool, MemoryBytes: memBytes, Name: fmt.Sprintf("n%d", i), KVType: model.KVF32, Groups: groups})
		pid, err := lc.system.Root.SpawnNamed(h.Props(), fmt.Sprintf("%s-%d", HostName, i))
		if err != nil {
			t.Fatal(err)
		}
		lc.hosts = append(lc.hosts, h)
		lc.dir = append(lc.dir, origin.Member{ID: fmt.Sprintf("n%d", i), Host: pid, MemoryBytes: memBytes, MemBandwidth: bw, Models: names})
	}
	t.Cleanup(func() {
		lc.system.Shutdown()
		pool.Close()
	})
	return lc
}

// shape renders a plan's stages: "[0,5)[n0 n1] ".
func shape(p plan.Plan) string {
	s := ""
	for _, st := range p.Stages {
		s += fmt.Sprintf("[%d,%d)%v ", st.First, st.End, st.Nodes())
	}
	return s
}

// TestTPGreedyMatchesSingleNode runs stories260K on tensor-parallel and
// hybrid plans of in-process nodes: the greedy text equals one node's.
func TestTPGreedyMatchesSingleNode(t *testing.T) {
	store := oracle.Stories(t)
	prompts := []string{"", "Lily and Tom went to the park. They saw"}
	var want []engine.Result
	for _, p := range prompts {
		want = append(want, oracle.OneNodeF32(t, store["stories260K"], engine.Request{Prompt: p, MaxTokens: 120}))
	}
	for _, c := range []struct {
		name       string
		bandwidths []float64
		mode       plan.Mode
		shape      string
		// slices: each member's KV heads and FFN columns, in plan order
		slices string
	}{
		{"tp-2", []float64{1e9, 1e9}, plan.TensorParallel, "[0,5)[n0 n1] ", "n0:[0,2)[0,86) n1:[2,4)[86,172) "},
		{"tp-3-uneven", []float64{3e9, 2e9, 1e9}, plan.TensorParallel, "[0,5)[n0 n1 n2] ", "n0:[0,2)[0,86) n1:[2,3)[86,140) n2:[3,4)[140,172) "},
		{"hybrid-2x2", []float64{1e9, 1e9, 1e9, 1e9}, plan.Hybrid, "[0,3)[n0 n1] [3,5)[n2 n3] ", "n0:[0,2)[0,86) n1:[2,4)[86,172) n2:[0,2)[0,86) n3:[2,4)[86,172) "},
	} {
		t.Run(c.name, func(t *testing.T) {
			lc := newTPCluster(t, c.bandwidths, 4<<20, store)
			cl := lc.cluster(origin.Options{PlanContext: 512, KVType: model.KVF32, Placement: c.mode})
			defer cl.Close()
			p, _, err := cl.Plan("stories260K")
			if err != nil || shape(p) != c.shape {
				t.Fatalf("plan %s, %v; want %s\n%v", shape(p), err, c.shape, p)
			}
			for i, prompt := range prompts {
				var streamed strings.Builder
				res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 120}, func(tok engine.Token) error {
					streamed.WriteString(tok.Text)
					if len(cl.Sessions()) != 1 || len(cl.Sessions()[0].Stages[0].TP) < 2 {
						return fmt.Errorf("the session lists no tensor-parallel stage: %+v", cl.Sessions())
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(res.Tokens) != fmt.Sprint(want[i].Tokens) || streamed.String() != res.Text {
					t.Fatalf("prompt %q: tokens differ from one node (first at %d)\n got %v\nwant %v", prompt, firstDiff(res.Tokens, want[i].Tokens), res.Tokens, want[i].Tokens)
				}
			}
			// The members hold the slices the weights give, uneven ones too.
			got := ""
			for i, h := range lc.hosts {
				for _, s := range h.shards {
					got += fmt.Sprintf("n%d:%v%v ", i, s.tp.m.Slice.KVHeads, s.tp.m.Slice.FFN)
				}
			}
			if got != c.slices {
				t.Errorf("slices %s, want %s", got, c.slices)
			}
			lc.waitFree(t)
		})
	}
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestTPMemberLostMidAnswer kills a member of a tensor-parallel stage (a
// follower, then the leader) while the answer streams: the session
// re-plans on the nodes left and the text equals one node's.
func TestTPMemberLostMidAnswer(t *testing.T) {
	store := oracle.Stories(t)
	want := oracle.OneNodeF32(t, store["stories260K"], engine.Request{MaxTokens: 160})
	for _, victim := range []int{1, 0, 2} {
		t.Run(fmt.Sprintf("kill-member-%d", victim), func(t *testing.T) {
			lc := newTPCluster(t, []float64{1e9, 1e9, 1e9}, 4<<20, store)
			dir := &dynDirectory{members: append([]origin.Member(nil), lc.dir...)}
			cl := origin.New(lc.system, dir, lc.hosts[0], origin.Options{PlanContext: 512, KVType: model.KVF32, Placement: plan.TensorParallel})
			defer cl.Close()
			n := 0
			res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 160}, func(tok engine.Token) error {
				if n++; n == 50 {
					lc.kill(t, dir, victim)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != want.Text {
				t.Errorf("text after losing n%d differs (first token at %d):\n got %q\nwant %q", victim, firstDiff(res.Tokens, want.Tokens), res.Text, want.Text)
			}
			if res.Stats.Recoveries == 0 {
				t.Error("no recovery counted")
			}
			// The survivors went on as a 2-way group.
			p, _, err := cl.Plan("stories260K")
			if err != nil || len(p.Stages) != 1 || len(p.Stages[0].TP) != 2 {
				t.Errorf("plan after the loss: %s %v", shape(p), err)
			}
			lc.waitFree(t)
		})
	}
}

// TestTPLogitsMatchOneNode loads the slices a 3-way uneven plan gives
// (through the host's loadTP) and compares their logits with one node's,
// teacher-forced over 64 positions: summation order differs, so within a
// relative 1e-5 of each position's largest logit (F32 weights).
func TestTPLogitsMatchOneNode(t *testing.T) {
	f, err := gguf.Open(oracle.Stories(t)["stories260K"])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := model.ConfigOf(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	whole, err := model.Load(f, 0, cfg.Layers)
	if err != nil {
		t.Fatal(err)
	}
	if err := whole.SetKVType(model.KVF32); err != nil {
		t.Fatal(err)
	}
	const positions = 64
	ws, wc := whole.NewState(nil, 1, positions), whole.NewCache(positions)
	spec := &messages.ShardSpec{Model: "stories260K", First: 0, End: uint32(cfg.Layers), Layers: uint32(cfg.Layers),
		TpNodes: []string{"a", "b", "c"}, TpWeights: []uint64{3000, 2000, 1000}}
	ars := model.LocalGroup(3)
	type member struct {
		st *model.TPState
		c  *model.TPCache
	}
	var ms []member
	for i := range 3 {
		spec.TpIndex = uint32(i)
		m, _, err := loadTP(f, cfg, spec, model.KVF32)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, member{m.NewState(nil, 1, positions), m.NewCache(positions)})
	}
	// A fixed token sequence (no sampling): the text of a story's start.
	tok := 1
	worst := 0.0
	for pos := range positions {
		if err := ws.Embed([]int{tok}); err != nil {
			t.Fatal(err)
		}
		if err := ws.Forward(wc, 1); err != nil {
			t.Fatal(err)
		}
		want, err := ws.LogitsOf(0)
		if err != nil {
			t.Fatal(err)
		}
		got := make([][]float32, 3)
		errs := make(chan error, 3)
		for i, m := range ms {
			go func() {
				if err := m.st.Embed([]int{tok}); err != nil {
					errs <- err
					return
				}
				if err := m.st.Forward(context.Background(), m.c, 1, ars[i]); err != nil {
					errs <- err
					return
				}
				l, err := m.st.LogitsOf(context.Background(), 0, ars[i])
				got[i] = l
				errs <- err
			}()
		}
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		var scale, diff float64
		for j, w := range want {
			scale = max(scale, math.Abs(float64(w)))
			diff = max(diff, math.Abs(float64(got[0][j]-w)))
			if got[1][j] != got[0][j] || got[2][j] != got[0][j] {
				t.Fatalf("position %d: the members' logits differ", pos)
			}
		}
		worst = max(worst, diff/scale)
		tok = (pos*37 + 11) % whole.Vocab // any tokens will do: teacher-forced
	}
	t.Logf("largest relative logit difference over %d positions: %.2e", positions, worst)
	if worst > 1e-5 {
		t.Errorf("relative logit difference %.2e exceeds 1e-5", worst)
	}
}

// A tensor-parallel member takes steps only from its leader's node, and a
// LoadShard's group PIDs must lie on the members its spec names; bad
// specs are refused with an error.
func TestTPMemberRefusesStrangers(t *testing.T) {
	store := oracle.Stories(t)
	system := quietSystem()
	defer system.Shutdown()
	h := NewHost(HostConfig{Models: store, Groups: &LocalGroups{}, NodeAddress: func(node string) string { return "addr-" + node }})
	hpid, err := system.Root.SpawnNamed(h.Props(), HostName)
	if err != nil {
		t.Fatal(err)
	}
	load := func(spec *messages.ShardSpec, group ...*messages.PID) *messages.ShardLoaded {
		res, err := system.Root.RequestFuture(hpid, &messages.LoadShard{Shard: spec, Group: group}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*messages.ShardLoaded)
	}
	spec := func(index uint32, nodes []string, weights []uint64) *messages.ShardSpec {
		return &messages.ShardSpec{Model: "stories260K", First: 0, End: 5, Layers: 5, TpNodes: nodes, TpWeights: weights, TpIndex: index}
	}
	leaderHost := &messages.PID{Address: "addr-a", Id: HostName}
	for _, bad := range []struct {
		spec  *messages.ShardSpec
		group []*messages.PID
		why   string
	}{
		{spec(1, []string{"a", "b"}, []uint64{1, 1}), []*messages.PID{{Address: "addr-c", Id: HostName}}, "not on member a"},
		{spec(0, []string{"a", "b"}, []uint64{1, 1}), []*messages.PID{{Address: "addr-c", Id: HostName + "/x"}}, "not on member b"},
		{spec(1, []string{"a", "b"}, []uint64{1, 1}), nil, "group PIDs"},
		{spec(2, []string{"a", "b"}, []uint64{1, 1}), []*messages.PID{leaderHost}, "member 2"},
		{spec(1, []string{"a", "a"}, []uint64{1, 1}), []*messages.PID{leaderHost}, "repeated"},
		{spec(1, []string{"a", "b"}, []uint64{1, 0}), []*messages.PID{leaderHost}, "weight 0"},
		{spec(1, []string{"a", "b"}, []uint64{1}), []*messages.PID{leaderHost}, "1 weights"},
	} {
		if r := load(bad.spec, bad.group...); !strings.Contains(r.Error, bad.why) {
			t.Errorf("spec %v: error %q, want one saying %q", bad.spec, r.Error, bad.why)
		}
	}
	r := load(spec(1, []string{"a", "b"}, []uint64{1, 1}), leaderHost)
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	in := &answers{ch: make(chan any, 8)}
	self := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return in }))
	member := &actor.PID{Address: hpid.Address, Id: r.ActorId}
	// A step from the session's origin (or anyone but the leader) is refused.
	system.Root.Request(member, &messages.Forward{Session: "s", Count: 1, Context: 64, Tokens: []int32{1}, ReplyTo: wire.FromPID(self)})
	select {
	case m := <-in.ch:
		if fe, ok := m.(*messages.ForwardError); !ok || !strings.Contains(fe.Error, "from its leader only") {
			t.Errorf("got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no error reply")
	}
	if st := h.Stats().Shards; len(st) != 1 || st[0].Sessions != 0 {
		t.Errorf("the member opened a session for a stranger: %+v", st)
	}
}

// A stranger's LoadShard cannot re-form a loaded tensor-parallel stage's
// group (attack 5 of the second hardening round: sent again with group
// PIDs on the right nodes but of actors that do not exist, it made the
// leader relay every session's steps nowhere; completions took 30 s):
// a group PID that is not the stage's member shard is refused, and so is
// a new actor in place of a member whose actor has not stopped. The
// answer after the attempts is one node's, at once.
func TestTPGroupNotReformedByStranger(t *testing.T) {
	store := oracle.Stories(t)
	want := oracle.OneNodeF32(t, store["stories260K"], engine.Request{MaxTokens: 40})
	lc := newTPCluster(t, []float64{1e9, 1e9}, 4<<20, store)
	cl := lc.cluster(origin.Options{PlanContext: 512, KVType: model.KVF32, Placement: plan.TensorParallel})
	defer cl.Close()
	gen := func() string {
		res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 40}, func(engine.Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	if got := gen(); got != want.Text {
		t.Fatalf("before: %q, want %q", got, want.Text)
	}
	var (
		spec  *messages.ShardSpec
		group []*actor.PID
		host  *actor.PID
	)
	for i, h := range lc.hosts {
		for _, s := range h.shards {
			if s.tp != nil && s.tp.leads() {
				spec, group, host = s.spec, *s.tp.group.Load(), lc.dir[i].Host
			}
		}
	}
	if spec == nil || len(group) != 1 {
		t.Fatalf("no leader with one member found: %v %v", spec, group)
	}
	member := group[0]
	hostID, _, _ := strings.Cut(member.Id, "/")
	for _, c := range []struct{ id, want string }{
		{hostID + "/" + ShardID(spec) + "#1", "not the actor"}, // the leader's own shard, not the member's
		{hostID + "/somebody-else#1", "not the actor"},
		{member.Id[:strings.LastIndex(member.Id, "#")] + "#999", "has not stopped"}, // the member's shard, an actor that does not exist
	} {
		res, err := lc.system.Root.RequestFuture(host, &messages.LoadShard{Shard: spec, Group: []*messages.PID{{Address: member.Address, Id: c.id}}}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if e := res.(*messages.ShardLoaded).Error; !strings.Contains(e, c.want) {
			t.Errorf("group PID %q: answer %q, want %q", c.id, e, c.want)
		}
	}
	start := time.Now()
	if got := gen(); got != want.Text {
		t.Fatalf("after: %q, want %q", got, want.Text)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the answer after the attempts took %v", d)
	}
}

// Speculation on tensor-parallel and hybrid rings: the last stage's group
// gathers the logits of every checked row, and the text is one node's.
func TestTPSpeculation(t *testing.T) {
	store := oracle.Stories(t)
	draft, err := engine.Open(store["stories260K"], engine.Options{Threads: 1, Context: 512, PromptCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer draft.Close()
	prompt := "Lily and Tom went to the park. They saw"
	want := oracle.OneNodeF32(t, store["stories260K"], engine.Request{Prompt: prompt, MaxTokens: 120})
	for _, c := range []struct {
		name       string
		bandwidths []float64
		mode       plan.Mode
	}{
		{"tp-2", []float64{1e9, 1e9}, plan.TensorParallel},
		{"hybrid-2x2", []float64{1e9, 1e9, 1e9, 1e9}, plan.Hybrid},
	} {
		t.Run(c.name, func(t *testing.T) {
			lc := newTPCluster(t, c.bandwidths, 4<<20, store)
			cl := lc.cluster(origin.Options{PlanContext: 512, KVType: model.KVF32, Placement: c.mode, Speculate: engine.SpeculateDraft, GuessEveryStep: true, Draft: draft})
			defer cl.Close()
			res, err := cl.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 120}, func(engine.Token) error {
				if len(cl.Sessions()) != 1 || len(cl.Sessions()[0].Stages[0].TP) < 2 {
					return fmt.Errorf("the session lists no tensor-parallel stage: %+v", cl.Sessions())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Tokens, want.Tokens) {
				t.Fatalf("tokens differ from one node (first at %d)\n got %v\nwant %v", firstDiff(res.Tokens, want.Tokens), res.Tokens, want.Tokens)
			}
			if res.Accepted == 0 {
				t.Errorf("no guess accepted (%d guessed)", res.Drafted)
			}
			t.Logf("%d tokens in %d steps: %d of %d guesses right", len(res.Tokens), res.Stats.Steps, res.Accepted, res.Drafted)
			lc.waitFree(t)
		})
	}
}

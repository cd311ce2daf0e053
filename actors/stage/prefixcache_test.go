package stage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/actors/plan"
	"strata/runtime/engine"
	"strata/runtime/model"
)

// generate runs req on cl and fails the test on error.
func generate(t *testing.T, cl *origin.Origin, req engine.Request) engine.Result {
	t.Helper()
	res, err := cl.Generate(context.Background(), req, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A conversation's second turn resumes the first turn's KV caches on
// every stage of a 3-stage ring: its prompt repeats the first prompt and
// answer, so all of that is cached, and the greedy answer equals the one
// a cluster without a prompt cache gives.
func TestPromptCacheAcrossStages(t *testing.T) {
	store := oracle.Stories(t)
	lc := newLocalCluster(t, 3, 800e3, store)
	cached := lc.cluster(origin.Options{PlanContext: 512})
	defer cached.Close()
	// The reference runs on other nodes: its sessions would take the
	// memory the cached ones are kept in.
	plain := newLocalCluster(t, 3, 800e3, store).cluster(origin.Options{PlanContext: 512, PromptCache: -1})
	defer plain.Close()
	if p, _, err := cached.Plan("stories260K"); err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v, %v; want 3 stages", p, err)
	}
	lm, err := lc.hosts[0].Info("stories260K")
	if err != nil {
		t.Fatal(err)
	}
	turn1 := lm.Tokenizer.Encode("Lily and Tom went to the park. They saw a big dog. The dog was sad because", true, false)
	first := generate(t, cached, engine.Request{Model: "stories260K", Tokens: turn1, MaxTokens: 60})
	if first.CachedTokens != 0 {
		t.Errorf("first turn: %d cached tokens, want 0", first.CachedTokens)
	}
	if st := lc.hosts[0].Stats().Shards[0]; st.Cached != 1 {
		t.Fatalf("stage 0 after the first turn: %v", st)
	}
	// The second turn: everything the first one saw (its prompt and its
	// answer but the last token, which was never fed back), plus a new line.
	seen := append(append([]int(nil), turn1...), first.Tokens[:len(first.Tokens)-1]...)
	turn2 := append(append([]int(nil), seen...), lm.Tokenizer.Encode("\nThen Tom said", false, false)...)
	want := generate(t, plain, engine.Request{Model: "stories260K", Tokens: turn2, MaxTokens: 60})
	got := generate(t, cached, engine.Request{Model: "stories260K", Tokens: turn2, MaxTokens: 60})
	if got.CachedTokens != len(seen) {
		t.Errorf("second turn: %d cached tokens, want %d", got.CachedTokens, len(seen))
	}
	if fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
		t.Fatalf("cached answer differs from uncached\n got %v\nwant %v", got.Tokens, want.Tokens)
	}
	// The same prompt again: all of it but the last token is cached.
	again := generate(t, cached, engine.Request{Model: "stories260K", Tokens: turn2, MaxTokens: 60})
	if again.CachedTokens != len(turn2)-1 || fmt.Sprint(again.Tokens) != fmt.Sprint(want.Tokens) {
		t.Errorf("repeated prompt: %d cached (want %d), tokens %v", again.CachedTokens, len(turn2)-1, again.Tokens)
	}
	// An unrelated prompt resumes nothing.
	other := generate(t, cached, engine.Request{Model: "stories260K", Prompt: "Once upon a time", MaxTokens: 10})
	if other.CachedTokens != 0 {
		t.Errorf("unrelated prompt: %d cached tokens", other.CachedTokens)
	}
	cached.DropPromptCache()
	waitNoCache(t, lc)
}

// waitNoCache waits until no stage retains a prompt cache.
func waitNoCache(t *testing.T, lc *localCluster) {
	t.Helper()
	lc.waitFree(t)
	for i, h := range lc.hosts {
		for _, s := range h.Stats().Shards {
			if s.Cached != 0 || s.KvBytes != 0 {
				t.Errorf("host %d %s: %d entries, %d KV bytes left", i, s.ActorId, s.Cached, s.KvBytes)
			}
		}
	}
}

// A stage that lost its entry (evicted, restarted) answers a cache miss;
// the session runs the whole prompt and answers as without a cache.
func TestPromptCacheMissFallsBack(t *testing.T) {
	store := oracle.Stories(t)
	lc := newLocalCluster(t, 3, 800e3, store)
	cl := lc.cluster(origin.Options{PlanContext: 512})
	defer cl.Close()
	prompt := "Lily and Tom went to the park. They saw a big dog."
	first := generate(t, cl, engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 20})
	// The last stage forgets everything it retained.
	h := lc.hosts[2]
	h.mu.Lock()
	for _, s := range h.shards {
		h.used -= s.dropAllCached()
	}
	h.mu.Unlock()
	res := generate(t, cl, engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 20})
	if res.CachedTokens != 0 || fmt.Sprint(res.Tokens) != fmt.Sprint(first.Tokens) {
		t.Errorf("after a miss: %d cached, tokens %v, want 0 and %v", res.CachedTokens, res.Tokens, first.Tokens)
	}
	// The fallback's own session is retained and used next time.
	res = generate(t, cl, engine.Request{Model: "stories260K", Prompt: prompt, MaxTokens: 20})
	if res.CachedTokens == 0 || fmt.Sprint(res.Tokens) != fmt.Sprint(first.Tokens) {
		t.Errorf("after the fallback: %d cached, tokens %v, want %v", res.CachedTokens, res.Tokens, first.Tokens)
	}
	cl.DropPromptCache()
	waitNoCache(t, lc)
}

// A tensor-parallel stage retains a session's caches on every member
// (the leader relays the retain): the second turn resumes them and
// answers as one node does. A member that lost its entry makes the
// session run the whole prompt again at once (it leaves the session's
// group, so the leader does not wait for it), and the origin's free of
// the entries reaches the members.
func TestPromptCacheTensorParallel(t *testing.T) {
	store := oracle.Stories(t)
	lc := newTPCluster(t, []float64{1e9, 1e9}, 4<<20, store)
	cl := lc.cluster(origin.Options{PlanContext: 512, KVType: model.KVF32, Placement: plan.TensorParallel})
	defer cl.Close()
	if p, _, err := cl.Plan("stories260K"); err != nil || shape(p) != "[0,5)[n0 n1] " {
		t.Fatalf("plan %s, %v; want one 2-way stage", shape(p), err)
	}
	lm, err := lc.hosts[0].Info("stories260K")
	if err != nil {
		t.Fatal(err)
	}
	turn1 := lm.Tokenizer.Encode("Lily and Tom went to the park. They saw a big dog. The dog was sad because", true, false)
	first := generate(t, cl, engine.Request{Model: "stories260K", Tokens: turn1, MaxTokens: 60})
	waitCached(t, lc, 1)
	seen := append(append([]int(nil), turn1...), first.Tokens[:len(first.Tokens)-1]...)
	turn2 := append(append([]int(nil), seen...), lm.Tokenizer.Encode("\nThen Tom said", false, false)...)
	want := oracle.OneNodeF32(t, store["stories260K"], engine.Request{Tokens: turn2, MaxTokens: 60})
	got := generate(t, cl, engine.Request{Model: "stories260K", Tokens: turn2, MaxTokens: 60})
	if got.CachedTokens != len(seen) {
		t.Errorf("second turn: %d cached tokens, want %d", got.CachedTokens, len(seen))
	}
	if fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
		t.Fatalf("resumed answer differs from one node's (first at %d)\n got %v\nwant %v", firstDiff(got.Tokens, want.Tokens), got.Tokens, want.Tokens)
	}
	// The member forgets what it retained; the leader still has it.
	waitCached(t, lc, 1)
	h := lc.hosts[1]
	h.mu.Lock()
	for _, s := range h.shards {
		h.used -= s.dropAllCached()
	}
	h.mu.Unlock()
	start := time.Now()
	res := generate(t, cl, engine.Request{Model: "stories260K", Tokens: turn2, MaxTokens: 60})
	if took := time.Since(start); took >= tpJoinTimeout {
		t.Errorf("after the member's miss the answer took %v: the leader waited for the member", took)
	}
	if res.CachedTokens != 0 || fmt.Sprint(res.Tokens) != fmt.Sprint(want.Tokens) {
		t.Errorf("after a member's miss: %d cached, tokens %v; want 0 and one node's", res.CachedTokens, res.Tokens)
	}
	cl.DropPromptCache()
	waitCached(t, lc, 0) // the members drop theirs after the leader
	waitNoCache(t, lc)
}

// waitCached waits until every member of lc holds n prompt-cache entries:
// a member gets the retain after its leader answered the origin.
func waitCached(t *testing.T, lc *localCluster, n uint32) {
	t.Helper()
	for i, h := range lc.hosts {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			st := h.Stats().Shards[0]
			if st.Cached == n && (n == 0 || st.CachedKvBytes > 0) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d: %d entries, %d bytes; want %d", i, st.Cached, st.CachedKvBytes, n)
			}
		}
	}
}

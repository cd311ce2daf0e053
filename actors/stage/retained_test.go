package stage

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/oracle"
	"strata/actors/internal/wire"
	"strata/messages"
)

// capture records what a stage sends on: the Forward with its hidden
// states, or an error.
type capture struct{ ch chan any }

func (c *capture) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Forward, *messages.ForwardError, *messages.Token:
		c.ch <- m
	}
}

// stageRig is one host with the first stage of stories260K (layers 0-1)
// loaded, and a capture actor standing in for the next stage and the origin.
type stageRig struct {
	lc    *localCluster
	shard *actor.PID
	self  *actor.PID
	ch    chan any
}

func newStageRig(t *testing.T, mem uint64) *stageRig {
	t.Helper()
	lc := newLocalCluster(t, 1, mem, oracle.Stories(t))
	loaded := loadShard(t, lc, 0, 2)
	if loaded.Error != "" {
		t.Fatal(loaded.Error)
	}
	c := &capture{ch: make(chan any, 16)}
	self := lc.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	return &stageRig{lc: lc, shard: &actor.PID{Address: lc.dir[0].Host.Address, Id: loaded.ActorId}, self: self, ch: c.ch}
}

// step sends one Forward and returns the stage's answer.
func (r *stageRig) step(t *testing.T, f *messages.Forward) any {
	t.Helper()
	if f.ReplyTo == nil {
		f.ReplyTo = wire.FromPID(r.self)
	}
	f.Route = []*messages.PID{wire.FromPID(r.self)}
	f.Count = uint32(len(f.Tokens))
	if f.Context == 0 {
		f.Context = 64
	}
	r.lc.system.Root.Send(r.shard, f)
	select {
	case m := <-r.ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the stage")
		return nil
	}
}

// hidden runs tokens at pos in session and returns the hidden states.
func (r *stageRig) hidden(t *testing.T, f *messages.Forward) []float32 {
	t.Helper()
	m := r.step(t, f)
	fw, ok := m.(*messages.Forward)
	if !ok {
		t.Fatalf("session %s: got %v, want hidden states", f.Session, m)
	}
	x := make([]float32, len(fw.Hidden)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(fw.Hidden[4*i:]))
	}
	return x
}

func (r *stageRig) free(t *testing.T, session string, retain bool, sender *actor.PID) {
	t.Helper()
	if sender != nil {
		r.lc.system.Root.RequestWithCustomSender(r.shard, &messages.FreeSession{Session: session, Retain: retain}, sender)
		if _, err := r.lc.system.Root.RequestFuture(r.shard, &messages.ShardStats{}, time.Second).Result(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := r.lc.system.Root.RequestFuture(r.shard, &messages.FreeSession{Session: session, Retain: retain}, time.Second).Result(); err != nil {
		t.Fatal(err)
	}
}

func (r *stageRig) state() *messages.ShardState { return r.lc.hosts[0].Stats().Shards[0] }

func int32s(n, base int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(base + 7*i%200)
	}
	return out
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// A retained session is adopted truncated: positions beyond the shared
// prefix are invisible, so a session that resumes at 10 with other tokens
// after them computes what a fresh session of those tokens computes.
func TestStageAdoptsTruncated(t *testing.T) {
	r := newStageRig(t, 4<<20)
	a := int32s(20, 5)                                              // the retained session's tokens
	b := append(append([]int32(nil), a[:10]...), int32s(10, 90)...) // shares 10 with a
	r.hidden(t, &messages.Forward{Session: "a", Tokens: a})
	r.free(t, "a", true, nil)
	if st := r.state(); st.Sessions != 0 || st.Cached != 1 || st.KvBytes == 0 || st.KvBytes != st.CachedKvBytes {
		t.Fatalf("after retain: %v", st)
	}
	used := r.lc.hosts[0].UsedBytes()

	fresh := r.hidden(t, &messages.Forward{Session: "fresh", Tokens: b})
	r.free(t, "fresh", false, nil)
	resumed := r.hidden(t, &messages.Forward{Session: "b", Position: 10, Tokens: b[10:], Resume: "a"})
	if st := r.state(); st.Sessions != 1 || st.Cached != 0 {
		t.Fatalf("after adopting: %v", st)
	}
	if got := r.lc.hosts[0].UsedBytes(); got != used {
		t.Errorf("adopting changed the memory held: %d, was %d", got, used)
	}
	d := maxDiff(resumed, fresh[len(fresh)-len(resumed):])
	t.Logf("resumed vs fresh: max diff %g", d)
	if d > 1e-4 {
		t.Errorf("resumed hidden states differ from a fresh run's by %g", d)
	}
	// The old tokens at 10.. would give other states: the check above can fail.
	old := r.hidden(t, &messages.Forward{Session: "old", Tokens: a})
	if d := maxDiff(resumed, old[len(old)-len(resumed):]); d < 1e-3 {
		t.Errorf("resumed states equal those of the retained tokens (diff %g): truncation not exact", d)
	}
	r.free(t, "old", false, nil)

	// The adopted session goes on like any other, and can be retained again.
	next := r.hidden(t, &messages.Forward{Session: "b", Position: 20, Tokens: []int32{3}})
	r.free(t, "b", true, nil)
	again := r.hidden(t, &messages.Forward{Session: "c", Position: 20, Tokens: []int32{3}, Resume: "b"})
	if !bytes.Equal(f32bytes(next), f32bytes(again)) {
		t.Error("resuming at the entry's full length gives other states than continuing it")
	}
}

func f32bytes(x []float32) []byte {
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// An entry belongs to its origin's node: another node can neither adopt
// nor free it, and cannot tell it from a missing one.
func TestStageCacheRefusesForeignOrigin(t *testing.T) {
	r := newStageRig(t, 4<<20)
	r.hidden(t, &messages.Forward{Session: "a", Tokens: int32s(20, 5)})
	r.free(t, "a", true, nil)

	foreign := &messages.PID{Address: "12D3KooWIntruder", Id: "inbox"}
	r.lc.system.Root.Send(r.shard, &messages.Forward{Session: "x", Position: 10, Count: 1, Tokens: []int32{1}, Context: 64,
		Resume: "a", ReplyTo: foreign, Route: []*messages.PID{wire.FromPID(r.self)}})
	r.free(t, "a", false, actor.NewPID("12D3KooWIntruder", "future$1"))
	if st := r.state(); st.Cached != 1 || st.Sessions != 0 {
		t.Fatalf("a foreign origin touched the entry: %v", st)
	}
	// Missing and unknown entries answer a cache miss, so the origin
	// falls back to a full prefill.
	for _, f := range []*messages.Forward{
		{Session: "y", Position: 10, Tokens: []int32{1}, Resume: "nope"},
		{Session: "y2", Position: 21, Tokens: []int32{1}, Resume: "a"},              // beyond what it holds
		{Session: "y3", Position: 10, Tokens: []int32{1}, Resume: "a", Context: 32}, // another context
	} {
		fe, ok := r.step(t, f).(*messages.ForwardError)
		if !ok || !fe.CacheMiss {
			t.Errorf("resume %s at %d: got %v, want a cache miss", f.Resume, f.Position, fe)
		}
	}
	if st := r.state(); st.Cached != 1 {
		t.Fatalf("failed resumes dropped the entry: %v", st)
	}
	// The origin may drop it.
	r.free(t, "a", false, nil)
	if st := r.state(); st.Cached != 0 || st.KvBytes != 0 {
		t.Fatalf("after the origin dropped it: %v", st)
	}
}

// Entries give way when the node needs their memory, least recently
// used first, and the stage then answers a cache miss.
func TestStageCacheEvictedForMemory(t *testing.T) {
	probe := newStageRig(t, 4<<20)
	probe.hidden(t, &messages.Forward{Session: "a", Tokens: []int32{1}})
	kv := probe.state().KvBytes
	weights := probe.lc.hosts[0].UsedBytes() - kv

	// Room for the weights and two sessions' KV caches.
	r := newStageRig(t, weights+2*kv+kv/2)
	r.hidden(t, &messages.Forward{Session: "a", Tokens: int32s(8, 5)})
	r.free(t, "a", true, nil)
	time.Sleep(2 * time.Millisecond)
	r.hidden(t, &messages.Forward{Session: "b", Tokens: int32s(8, 9)})
	r.free(t, "b", true, nil)
	if st := r.state(); st.Cached != 2 {
		t.Fatalf("%v", st)
	}
	// A new session needs memory: the older entry (a) goes.
	r.hidden(t, &messages.Forward{Session: "c", Tokens: []int32{1}})
	if st := r.state(); st.Cached != 1 || st.Sessions != 1 || r.lc.hosts[0].UsedBytes() != weights+2*kv {
		t.Fatalf("after a new session: %v, used %d", st, r.lc.hosts[0].UsedBytes())
	}
	if fe, ok := r.step(t, &messages.Forward{Session: "d", Position: 4, Tokens: []int32{1}, Resume: "a"}).(*messages.ForwardError); !ok || !fe.CacheMiss {
		t.Errorf("resuming the evicted entry: %v", fe)
	}
	r.hidden(t, &messages.Forward{Session: "e", Position: 4, Tokens: []int32{1}, Resume: "b"})
	// A shard keeps at most maxCachedPerShard entries even without a budget.
	big := newStageRig(t, 0)
	for i := range maxCachedPerShard + 3 {
		id := string(rune('A' + i))
		big.hidden(t, &messages.Forward{Session: id, Tokens: []int32{1}})
		big.free(t, id, true, nil)
	}
	if st := big.state(); st.Cached != maxCachedPerShard || st.KvBytes != maxCachedPerShard*kv || big.lc.hosts[0].UsedBytes() != weights+maxCachedPerShard*kv {
		t.Errorf("%v, used %d", st, big.lc.hosts[0].UsedBytes())
	}
}

package peers

import (
	"crypto/rand"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"strata/messages"
)

func newID(t testing.TB) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func beat(id peer.ID, inc int64, seq uint64, mem uint64) *messages.NodeInfo {
	return &messages.NodeInfo{PeerId: id.String(), Incarnation: inc, Seq: seq, MemoryTotalBytes: mem, MemoryAvailableBytes: mem}
}

func TestTable(t *testing.T) {
	self, a, b, c := newID(t), newID(t), newID(t), newID(t)
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tb := newTable(self, 2500*time.Millisecond)

	type step struct {
		name string
		do   func() []Event
		want []EventKind
		ids  []peer.ID // view after the step, any order
	}
	obs := func(id peer.ID, inc int64, seq, mem uint64, ms int, connected bool) func() []Event {
		return func() []Event {
			if ev, ok := tb.observe(id, beat(id, inc, seq, mem), at(ms), connected); ok {
				return []Event{ev}
			}
			return nil
		}
	}
	rm := func(id peer.ID, reason string, ms int) func() []Event {
		return func() []Event {
			if ev, ok := tb.remove(id, reason, at(ms)); ok {
				return []Event{ev}
			}
			return nil
		}
	}
	exp := func(ms int) func() []Event { return func() []Event { return tb.expire(at(ms)) } }
	for _, s := range []step{
		{"self joins", obs(self, 1, 1, 10, 0, true), []EventKind{Joined}, []peer.ID{self}},
		{"a joins", obs(a, 1, 1, 10, 0, true), []EventKind{Joined}, []peer.ID{self, a}},
		{"b joins", obs(b, 1, 1, 10, 100, true), []EventKind{Joined}, []peer.ID{self, a, b}},
		{"a same info", obs(a, 1, 2, 10, 1000, true), nil, []peer.ID{self, a, b}},
		{"a duplicate", obs(a, 1, 2, 20, 1000, true), nil, []peer.ID{self, a, b}},
		{"a older", obs(a, 1, 1, 20, 1000, true), nil, []peer.ID{self, a, b}},
		{"a updates", obs(a, 1, 3, 20, 2000, true), []EventKind{Updated}, []peer.ID{self, a, b}},
		{"nobody expired yet", exp(2500), nil, []peer.ID{self, a, b}},
		{"b expires, self never", exp(2600), []EventKind{Left}, []peer.ID{self, a}},
		{"late b heartbeat ignored", obs(b, 1, 1, 10, 2700, true), nil, []peer.ID{self, a}},
		{"b newer heartbeat rejoins", obs(b, 1, 2, 10, 2800, true), []EventKind{Joined}, []peer.ID{self, a, b}},
		{"self cannot be removed", rm(self, "disconnected", 2800), nil, []peer.ID{self, a, b}},
		{"a disconnects", rm(a, "disconnected", 3000), []EventKind{Left}, []peer.ID{self, b}},
		{"relayed a heartbeat while disconnected ignored", obs(a, 1, 4, 20, 3100, false), nil, []peer.ID{self, b}},
		{"a reconnected rejoins", obs(a, 1, 5, 20, 3200, true), []EventKind{Joined}, []peer.ID{self, a, b}},
		{"a disconnects again", rm(a, "disconnected", 3300), []EventKind{Left}, []peer.ID{self, b}},
		{"a restarted (new incarnation) not yet connected", obs(a, 2, 1, 20, 3400, false), nil, []peer.ID{self, b}},
		{"a restarted and connected rejoins", obs(a, 2, 2, 20, 3400, true), []EventKind{Joined}, []peer.ID{self, a, b}},
		{"c heard of only through gossip does not count", obs(c, 1, 1, 1<<40, 3400, false), nil, []peer.ID{self, a, b}},
		{"c connected joins", obs(c, 1, 2, 1<<40, 3400, true), []EventKind{Joined}, []peer.ID{self, a, b, c}},
		{"c disconnects", rm(c, "disconnected", 3400), []EventKind{Left}, []peer.ID{self, a, b}},
		{"remove unknown", rm(newID(t), "timeout", 3400), nil, []peer.ID{self, a, b}},
		{"both expire", exp(10000), []EventKind{Left, Left}, []peer.ID{self}},
	} {
		before := tb.version
		evs := s.do()
		var kinds []EventKind
		for _, ev := range evs {
			kinds = append(kinds, ev.Kind)
		}
		if !slices.Equal(kinds, s.want) {
			t.Fatalf("%s: events %v, want %v", s.name, kinds, s.want)
		}
		if got := tb.version - before; got != uint64(len(evs)) {
			t.Fatalf("%s: version moved by %d for %d events", s.name, got, len(evs))
		}
		if len(evs) > 0 && evs[len(evs)-1].Version != tb.version {
			t.Fatalf("%s: event version %d, table %d", s.name, evs[len(evs)-1].Version, tb.version)
		}
		v := tb.view()
		want := slices.Clone(s.ids)
		slices.SortFunc(want, func(x, y peer.ID) int { return cmpStr(x.String(), y.String()) })
		if !slices.Equal(v.IDs(), want) {
			t.Fatalf("%s: view %v, want %v", s.name, v.IDs(), want)
		}
		for _, id := range want {
			if _, ok := v.Member(id); !ok {
				t.Fatalf("%s: Member(%s) not found", s.name, id)
			}
		}
	}
	if _, ok := tb.view().Member(a); ok {
		t.Error("Member found a peer not in the view")
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Every node that sees the same heartbeats has the same member list,
// whatever the order they arrive in.
func TestTableOrderIndependent(t *testing.T) {
	ids := []peer.ID{newID(t), newID(t), newID(t), newID(t), newID(t)}
	var first []peer.ID
	for perm := range 5 {
		tb := newTable(ids[perm], time.Minute)
		now := time.Unix(0, 0)
		for i := range ids {
			id := ids[(i+perm)%len(ids)]
			tb.observe(id, beat(id, 1, 1, 1), now, true)
		}
		got := tb.view().IDs()
		if first == nil {
			first = got
		} else if !slices.Equal(got, first) {
			t.Fatalf("order %d: view %v, want %v", perm, got, first)
		}
	}
}

func TestValidateInfo(t *testing.T) {
	id, other := newID(t), newID(t)
	ok := func() *messages.NodeInfo {
		return &messages.NodeInfo{PeerId: id.String(), Seq: 1, Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, MemoryTotalBytes: 2, MemoryAvailableBytes: 1,
			Models: []*messages.ModelInfo{{Name: "m", SizeBytes: 1, Digest: "d"}},
			Links:  []*messages.LinkInfo{{PeerId: other.String(), Transport: TransportShm, RttUs: 40}}}
	}
	if err := validateInfo(ok(), id); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*messages.NodeInfo){
		"other signer":     func(i *messages.NodeInfo) { i.PeerId = other.String() },
		"seq 0":            func(i *messages.NodeInfo) { i.Seq = 0 },
		"bad addr":         func(i *messages.NodeInfo) { i.Addrs = []string{"not/an/addr"} },
		"too many addrs":   func(i *messages.NodeInfo) { i.Addrs = make([]string, maxInfoAddrs+1) },
		"avail over total": func(i *messages.NodeInfo) { i.MemoryAvailableBytes = 3 },
		"negative compute": func(i *messages.NodeInfo) { i.ComputeFlops = -1 },
		"infinite compute": func(i *messages.NodeInfo) { i.ComputeFlops = math.Inf(1) },
		"absurd compute":   func(i *messages.NodeInfo) { i.ComputeFlops = 1e30 },
		"absurd memory": func(i *messages.NodeInfo) {
			i.MemoryTotalBytes, i.MemoryAvailableBytes = math.MaxUint64, math.MaxUint64
		},
		"unnamed model":  func(i *messages.NodeInfo) { i.Models[0].Name = "" },
		"link transport": func(i *messages.NodeInfo) { i.Links[0].Transport = "carrier-pigeon" },
		"link peer":      func(i *messages.NodeInfo) { i.Links[0].PeerId = "not-a-peer" },
		"link rtt":       func(i *messages.NodeInfo) { i.Links[0].RttUs = math.MaxUint32 },
		"long device":    func(i *messages.NodeInfo) { i.Device = strings.Repeat("x", maxInfoString+1) },
		"too many links": func(i *messages.NodeInfo) {
			for range maxInfoLinks {
				i.Links = append(i.Links, i.Links[0])
			}
		},
	} {
		info := ok()
		mut(info)
		if err := validateInfo(info, id); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

package plan

import (
	"testing"
	"time"

	"strata/runtime/model"
	"strata/runtime/tensor"
)

func TestInputs(t *testing.T) {
	def := LinkPresets["tcp"]
	members := []Announced{
		{ID: "a", MemoryBytes: 64 << 30, Compute: 2e11, MemBandwidth: 4e11, Links: []AnnouncedLink{
			{Peer: "b", RTT: 40 * time.Microsecond},
			{Peer: "c", RTT: 0},                   // not measured yet: c's own claim decides
			{Peer: "gone", RTT: time.Millisecond}, // not a member: ignored
			{Peer: "a", RTT: time.Microsecond},    // itself: ignored
		}},
		{ID: "b", MemoryBytes: 32 << 30, MemBandwidth: 2e11, Links: []AnnouncedLink{{Peer: "a", RTT: 60 * time.Microsecond}}},
		{ID: "c", MemoryBytes: 16 << 30, Links: []AnnouncedLink{{Peer: "a", RTT: 900 * time.Microsecond}}},
	}
	nodes, net := Inputs(members, def)
	want := []Node{{ID: "a", FreeBytes: 64 << 30, Compute: 2e11, MemBandwidth: 4e11}, {ID: "b", FreeBytes: 32 << 30, MemBandwidth: 2e11}, {ID: "c", FreeBytes: 16 << 30}}
	for i := range want {
		if nodes[i].ID != want[i].ID || nodes[i].FreeBytes != want[i].FreeBytes || nodes[i].Compute != want[i].Compute || nodes[i].MemBandwidth != want[i].MemBandwidth {
			t.Errorf("node %d: %+v, want %+v", i, nodes[i], want[i])
		}
	}
	for _, tc := range []struct {
		a, b string
		want Link
	}{
		{"a", "b", Link{Latency: 20 * time.Microsecond, Throughput: def.Throughput}}, // the smaller of 40 and 60 µs, halved
		{"b", "a", Link{Latency: 20 * time.Microsecond, Throughput: def.Throughput}},
		{"c", "a", Link{Latency: 450 * time.Microsecond, Throughput: def.Throughput}},
		{"b", "c", def}, // neither measured
	} {
		if got := net.Link(tc.a, tc.b); got != tc.want {
			t.Errorf("link %s-%s: %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	if len(net.Pairs) != 2 {
		t.Errorf("%d measured pairs, want 2: %v", len(net.Pairs), net.Pairs)
	}
	// A measured fast link makes tensor parallelism cheaper than the default
	// link would: the cost model reads the announced latency.
	m := FromProfile("tinyllama-1.1b", model.Shapes["tinyllama-1.1b"].Profile(tensor.Q8_0))
	slow, err := Candidates(m, nodes[:2], Network{Default: def}, Options{}, CostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := Candidates(m, nodes[:2], net, Options{}, CostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tpSpeed(fast) <= tpSpeed(slow) {
		t.Errorf("tensor-parallel prediction with the measured 20 µs link %.1f tok/s, with the default link %.1f: the measured link was not used", tpSpeed(fast), tpSpeed(slow))
	}
}

func tpSpeed(cs []Candidate) float64 {
	var best float64
	for _, c := range cs {
		if c.Refusal == "" && c.Kind() == "tensor-parallel" {
			best = max(best, c.TokensPerSecond)
		}
	}
	return best
}

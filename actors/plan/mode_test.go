package plan

import (
	"fmt"
	"testing"
	"time"
)

// fourLayers is costModel with four layers, so that two stages of two
// layers each can be cut.
func fourLayers() Model {
	m := costModel()
	m.LayerBytes = []uint64{1e9, 1e9, 1e9, 1e9}
	m.ActiveLayerBytes = m.LayerBytes
	m.AttnLayerBytes = []uint64{2e8, 2e8, 2e8, 2e8}
	m.KVBytesPerToken = 4 * 1024
	return m
}

func TestPlaceModeShapes(t *testing.T) {
	nodes := []Node{{ID: "d", FreeBytes: 10e9}, {ID: "b", FreeBytes: 10e9}, {ID: "a", FreeBytes: 10e9}, {ID: "c", FreeBytes: 10e9}}
	net := Network{Default: Link{Latency: 10 * time.Microsecond, Throughput: 1e9}}
	shape := func(p Plan) string {
		s := ""
		for _, st := range p.Stages {
			s += fmt.Sprintf("[%d,%d)%v ", st.First, st.End, st.Nodes())
		}
		return s
	}
	for _, tc := range []struct {
		mode Mode
		want string
	}{
		{Pipeline, "[0,4)[a] "},
		{TensorParallel, "[0,4)[a b c d] "},
		{Hybrid, "[0,2)[a b] [2,4)[c d] "},
	} {
		p, err := PlaceMode(fourLayers(), nodes, net, Options{Context: 512}, CostOptions{}, tc.mode)
		if err != nil {
			t.Fatalf("%v: %v", tc.mode, err)
		}
		if got := shape(p); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.mode, got, tc.want)
		}
		// The same nodes in another order give the same plan.
		rev := []Node{nodes[3], nodes[2], nodes[1], nodes[0]}
		q, _ := PlaceMode(fourLayers(), rev, net, Options{Context: 512}, CostOptions{}, tc.mode)
		if shape(q) != shape(p) {
			t.Errorf("%v: the node order changed the plan: %s vs %s", tc.mode, shape(q), shape(p))
		}
		for _, st := range p.Stages {
			var w, kv uint64
			for _, m := range st.TP {
				if m.Weight == 0 || m.WeightBytes+m.KVBytes > 10e9 {
					t.Errorf("%v: member %+v", tc.mode, m)
				}
				w, kv = w+m.WeightBytes, kv+m.KVBytes
			}
			// The members' estimates add up to the stage (within rounding),
			// but every member of the first stage embeds the tokens.
			if st.Embed && len(st.TP) > 0 {
				w -= uint64(len(st.TP)-1) * fourLayers().EmbedBytes
			}
			if len(st.TP) > 0 && (w+4 < st.WeightBytes || w > st.WeightBytes+4 || kv+4 < st.KVBytes || kv > st.KVBytes+4) {
				t.Errorf("%v: members hold %d + %d, the stage %d + %d", tc.mode, w, kv, st.WeightBytes, st.KVBytes)
			}
		}
	}
	// Auto with fast links and equal nodes: every node in one group.
	p, err := PlaceMode(fourLayers(), nodes, Network{}, Options{Context: 512}, CostOptions{}, Auto)
	if err != nil || len(p.Stages) != 1 || len(p.Stages[0].TP) != 4 {
		t.Errorf("auto: %s, %v", shape(p), err)
	}
	// A model that cannot be split falls back to layers.
	m := fourLayers()
	m.NoTP = "multi-head latent attention is not sliced yet"
	p, err = PlaceMode(m, nodes, net, Options{Context: 512}, CostOptions{}, TensorParallel)
	if err != nil || shape(p) != "[0,4)[a] " {
		t.Errorf("no TP: %s, %v", shape(p), err)
	}
	// Hybrid on three nodes cannot be: the fastest fitting plan instead.
	p, err = PlaceMode(fourLayers(), nodes[:3], net, Options{Context: 512}, CostOptions{}, Hybrid)
	if err != nil || len(p.Stages) != 1 || len(p.Stages[0].TP) != 3 {
		t.Errorf("hybrid on 3: %s, %v", shape(p), err)
	}
	// Uneven bandwidth: the weights follow it.
	uneven := []Node{{ID: "a", FreeBytes: 10e9, MemBandwidth: 2e11}, {ID: "b", FreeBytes: 10e9, MemBandwidth: 1e11}}
	p, _ = PlaceMode(fourLayers(), uneven, net, Options{Context: 512}, CostOptions{}, TensorParallel)
	if tp := p.Stages[0].TP; len(tp) != 2 || tp[0].Weight != 8 || tp[1].Weight != 4 {
		t.Errorf("uneven: %+v", p.Stages[0].TP)
	}
	// Too little memory anywhere: Place's refusal.
	small := []Node{{ID: "a", FreeBytes: 1e9}, {ID: "b", FreeBytes: 1e9}}
	if _, err := PlaceMode(fourLayers(), small, net, Options{}, CostOptions{}, TensorParallel); err == nil {
		t.Error("placed 4 GB on 2 GB")
	} else if _, ok := err.(*RefusalError); !ok {
		t.Errorf("refusal %T %v", err, err)
	}
	if m, err := ParseMode("TP"); err != nil || m != TensorParallel || m.String() != "tp" {
		t.Errorf("ParseMode: %v %v", m, err)
	}
	if _, err := ParseMode("ring"); err == nil {
		t.Error("ParseMode took ring")
	}
}

package peers

import (
	"math"
	"strings"
	"testing"

	"strata/messages"
)

// TestValidateMeasures: a peer's announced memory bandwidth and links are
// accepted when plausible and dropped (the whole NodeInfo) when not.
func TestValidateMeasures(t *testing.T) {
	id, other, third := newID(t), newID(t), newID(t)
	ok := func() *messages.NodeInfo {
		return &messages.NodeInfo{PeerId: id.String(), Seq: 1, MemoryBandwidth: 4e11,
			Links: []*messages.LinkInfo{{PeerId: other.String(), RttUs: 90, Transport: "shm"}, {PeerId: third.String(), RttUs: 0, Transport: "tcp"}}}
	}
	if err := validateInfo(ok(), id); err != nil {
		t.Fatal(err)
	}
	many := make([]*messages.LinkInfo, maxInfoLinks+1)
	for i := range many {
		many[i] = &messages.LinkInfo{PeerId: newID(t).String()}
	}
	for name, mut := range map[string]func(*messages.NodeInfo){
		"NaN bandwidth":      func(i *messages.NodeInfo) { i.MemoryBandwidth = math.NaN() },
		"negative bandwidth": func(i *messages.NodeInfo) { i.MemoryBandwidth = -1 },
		"infinite bandwidth": func(i *messages.NodeInfo) { i.MemoryBandwidth = math.Inf(1) },
		"absurd bandwidth":   func(i *messages.NodeInfo) { i.MemoryBandwidth = 1e18 },
		"too many links":     func(i *messages.NodeInfo) { i.Links = many },
		"link to no peer":    func(i *messages.NodeInfo) { i.Links[0].PeerId = "nobody" },
		"link twice":         func(i *messages.NodeInfo) { i.Links[1].PeerId = other.String() },
		"link to itself":     func(i *messages.NodeInfo) { i.Links[0].PeerId = id.String() },
		"absurd RTT":         func(i *messages.NodeInfo) { i.Links[0].RttUs = maxInfoRTT + 1 },
		"long transport":     func(i *messages.NodeInfo) { i.Links[0].Transport = strings.Repeat("x", 17) },
	} {
		info := ok()
		mut(info)
		if err := validateInfo(info, id); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

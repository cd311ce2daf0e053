package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"strata/actors/internal/oracle"
	"strata/internal/testdata"
	"strata/peers"
	"strata/peers/side"
	"strata/peers/verbs"
	"strata/runtime/engine"
)

// The side channel the test nodes use (startNodesIn): auto (shared
// memory, as they share a host) unless a test sets these.
var (
	testTransport string
	testVerbs     side.Options
)

func withVerbs(t *testing.T, transport string, v side.Options) {
	oldT, oldV := testTransport, testVerbs
	testTransport, testVerbs = transport, v
	t.Cleanup(func() { testTransport, testVerbs = oldT, oldV })
}

// faultAt injects fault f into frame k of every link.
func faultAt(f verbs.Fault, k int) func(peer.ID) func(int) verbs.Fault {
	return func(peer.ID) func(int) verbs.Fault {
		return func(n int) verbs.Fault {
			if n == k {
				return f
			}
			return verbs.Deliver
		}
	}
}

// linkTransports waits until every node has a link to each other one and
// returns the transports seen.
func linkTransports(t *testing.T, nodes []*Node) map[string]int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		seen, total := map[string]int{}, 0
		for _, nd := range nodes {
			for _, l := range nd.Peers.Links() {
				seen[l.Transport]++
				total++
			}
		}
		if total == len(nodes)*(len(nodes)-1) || time.Now().After(deadline) {
			return seen
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fallbacks(nodes []*Node) int64 {
	var n int64
	for _, nd := range nodes {
		n += nd.Peers.LinkFallbacks()
	}
	return n
}

// Greedy output across three nodes over the side channel, with each fault
// injected into the frames of every link, equals one node's: a fault is
// detected, the activation resent over the stream, and no corrupt
// activation reaches a shard (it would change the text, and the peers
// tests check every byte).
func TestPipelineOverSideChannel(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	want := oracle.OneNode(t, path, engine.Request{MaxTokens: 120})
	cases := []struct {
		name      string
		transport string
		v         side.Options
		link      string
		faults    bool
	}{
		{"shm", peers.TransportAuto, side.Options{}, peers.TransportShm, false},
		{"apple", peers.TransportShm, side.Options{Apple: true}, peers.TransportShm, false},
		{"tcp", peers.TransportTCP, side.Options{}, peers.TransportTCP, false},
	}
	for _, f := range []verbs.Fault{verbs.Drop, verbs.Truncate, verbs.Corrupt, verbs.Reorder, verbs.Stall} {
		for _, apple := range []bool{false, true} {
			cases = append(cases, struct {
				name      string
				transport string
				v         side.Options
				link      string
				faults    bool
			}{fmt.Sprintf("%v/apple=%v", f, apple), peers.TransportAuto, side.Options{Apple: apple, Faults: faultAt(f, 3), Stall: 300 * time.Millisecond}, peers.TransportShm, true})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withVerbs(t, tc.transport, tc.v)
			nodes := startNodes(t, 3, 800e3, 1)
			if seen := linkTransports(t, nodes); seen[tc.link] != 6 {
				t.Fatalf("links %v, want 6 %s", seen, tc.link)
			}
			start := time.Now()
			res, err := nodes[2].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 120}, func(engine.Token) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != want.Text {
				t.Fatalf("got %q\nwant %q", res.Text, want.Text)
			}
			t.Logf("%s: 120 tokens in %v", tc.name, time.Since(start))
			if got := fallbacks(nodes); tc.faults != (got > 0) {
				t.Fatalf("%d fallbacks (faults injected: %v)", got, tc.faults)
			}
			// The shards read their activations in place from the slots
			// (no copy between the side channel and the stage's input).
			var st side.InPlaceStats
			for _, nd := range nodes {
				s := nd.Peers.InPlace()
				st.InPlace += s.InPlace
				st.Copied += s.Copied
			}
			if tc.link != peers.TransportTCP && st.InPlace == 0 {
				t.Fatalf("no activation read in place (%+v)", st)
			}
			t.Logf("side-channel deliveries: %+v", st)
		})
	}
}

// The pipeline's fault tests (a node killed, a link cut) pass with the
// Apple constraints and with faults injected into the side channel.
func TestPipelineFaultsOverSideChannel(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    side.Options
	}{
		{"apple", side.Options{Apple: true}},
		{"corrupt", side.Options{Faults: faultAt(verbs.Corrupt, 40), Stall: 300 * time.Millisecond}},
		{"apple+stall", side.Options{Apple: true, Faults: faultAt(verbs.Stall, 40), Stall: 300 * time.Millisecond}},
	} {
		t.Run(tc.name+"/node-killed", func(t *testing.T) {
			withVerbs(t, peers.TransportShm, tc.v)
			peerKilledMidAnswer(t)
		})
		t.Run(tc.name+"/link-cut", func(t *testing.T) {
			withVerbs(t, peers.TransportShm, tc.v)
			linkCutMidAnswer(t)
		})
	}
}

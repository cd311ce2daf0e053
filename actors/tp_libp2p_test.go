package actors

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"strata/actors/internal/oracle"
	"strata/actors/plan"
	"strata/peers"
	"strata/runtime/engine"
	"strata/runtime/model"
)

// Tensor parallelism between real peers over loopback (libp2p streams,
// shared memory between members on this host): a 2-way group, then a
// member killed mid-answer; the text equals one node's.
func TestTPOverLibp2p(t *testing.T) {
	path := oracle.Stories(t)["stories260K"]
	want := oracle.OneNodeF32(t, path, engine.Request{MaxTokens: 160})
	models := t.TempDir()
	if err := os.Symlink(path, filepath.Join(models, "stories260K.gguf")); err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{peers.TransportTCP, peers.TransportAuto} {
		t.Run(transport, func(t *testing.T) {
			nodes := startNodesFn(t, models, 512, 3, 8<<20, 1, func(i int, cfg *NodeConfig) {
				cfg.Origin.Placement, cfg.Origin.KVType = plan.TensorParallel, model.KVF32
				cfg.Peers.Transport = transport
				cfg.Peers.MemoryBandwidth = 1e9 // equal slices, whatever the machine measures
			})
			p, _, err := nodes[0].Origin.Plan("stories260K")
			if err != nil || len(p.Stages) != 1 || len(p.Stages[0].TP) != 3 {
				t.Fatalf("plan %v %v", p, err)
			}
			// The first answer runs whole; during the second a follower dies.
			res, err := nodes[0].Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 160}, func(engine.Token) error { return nil })
			if err != nil || res.Text != want.Text {
				t.Fatalf("3-way: %v\n got %q\nwant %q", err, res.Text, want.Text)
			}
			var victim *Node
			for _, nd := range nodes {
				if id := nd.Peers.ID().String(); id == p.Stages[0].TP[1].Node {
					victim = nd
				}
			}
			origin := nodes[0]
			if origin == victim {
				origin = nodes[1]
			}
			n := 0
			res, err = origin.Origin.Generate(context.Background(), engine.Request{Model: "stories260K", MaxTokens: 160}, func(engine.Token) error {
				if n++; n == 40 {
					victim.Close()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != want.Text || res.Stats.Recoveries == 0 {
				t.Fatalf("after killing a member (%d recoveries):\n got %q\nwant %q", res.Stats.Recoveries, res.Text, want.Text)
			}
			var live []*Node
			for _, nd := range nodes {
				if nd != victim {
					live = append(live, nd)
				}
			}
			waitNoKV(t, live)
		})
	}
}

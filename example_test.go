package strata_test

import (
	"context"
	"fmt"
	"path/filepath"

	"strata"
	"strata/actors/plan"
	"strata/internal/testdata"
)

// spread is a placement policy: every node gets an equal share of the
// layers, in order (plan.Place would use the fewest nodes that fit).
func spread(m plan.Model, nodes []plan.Node, opts plan.Options) (plan.Plan, error) {
	p := plan.Plan{Model: m.Name, Context: opts.Context, Sessions: max(opts.Sessions, 1)}
	kv := m.KVBytesPerToken / uint64(m.Layers()) * uint64(opts.Context) * uint64(p.Sessions)
	for i, n := range nodes {
		s := plan.Stage{Node: n.ID, First: i * m.Layers() / len(nodes), End: (i + 1) * m.Layers() / len(nodes)}
		s.Embed, s.Head = i == 0, i == len(nodes)-1
		for l := s.First; l < s.End; l++ {
			s.WeightBytes += m.LayerBytes[l]
			s.KVBytes += kv
		}
		p.Stages = append(p.Stages, s)
	}
	return p, nil
}

// Three nodes in one process split stories260K; the middle one dies
// mid-answer, the session re-plans on the two left and replays, and the
// story comes out as one node tells it.
func Example() {
	dir, err := testdata.Dir()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	c, err := strata.NewLocalCluster(ctx, strata.LocalConfig{
		Models:  map[string]string{"stories260K": filepath.Join(dir, "gguf", "stories260K.gguf")},
		Nodes:   []strata.NodeSpec{{MemoryBytes: 4 << 20}, {MemoryBytes: 4 << 20}, {MemoryBytes: 4 << 20}},
		Placer:  spread,
		Context: 512,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	p, err := c.Plan("stories260K")
	if err != nil {
		fmt.Println(err)
		return
	}
	victim := c.NodeIndex(p.Stages[1].Node)
	res, err := c.Generate(ctx, strata.Request{Model: "stories260K", Prompt: "Once upon a time", MaxTokens: 40},
		func(t strata.Token) error {
			fmt.Print(t.Text)
			if t.Index == 20 {
				return c.Kill(victim)
			}
			return nil
		})
	fmt.Println()
	fmt.Println(len(p.Stages), "stages;", res.Stats.Stages, "after a loss;", len(res.Tokens), res.FinishReason, err)
	// Output:
	// , there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball.
	// 3 stages; 2 after a loss; 40 length <nil>
}

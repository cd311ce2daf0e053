package actors_test

import (
	"context"
	"fmt"
	"path/filepath"

	"strata/actors"
	"strata/internal/testdata"
	"strata/runtime/engine"
)

// Two shard hosts in one actor system split stories260K; a Cluster plans
// over them and drives a session. (strata.NewLocalCluster does this for
// any number of nodes, over libp2p too.)
func Example() {
	dir, err := testdata.Dir()
	if err != nil {
		fmt.Println(err)
		return
	}
	models := actors.Files{"stories260K": filepath.Join(dir, "gguf", "stories260K.gguf")}
	system := actors.NewSystem(nil)
	defer system.Shutdown()
	var view actors.StaticDirectory
	for _, id := range []string{"a", "b"} {
		host := actors.NewHost(actors.HostConfig{Models: models, MemoryBytes: 1100e3, Name: id})
		pid, err := system.Root.SpawnNamed(host.Props(), actors.HostName+"-"+id)
		if err != nil {
			fmt.Println(err)
			return
		}
		view = append(view, actors.Member{ID: id, Host: pid, MemoryBytes: 1100e3, Models: []string{"stories260K"}})
	}
	c := actors.NewCluster(system, view, models, actors.ClusterOptions{PlanContext: 512})
	defer c.Close()
	res, err := c.Generate(context.Background(), actors.Request{Model: "stories260K", Prompt: "Lily", MaxTokens: 12},
		func(t engine.Token) error {
			fmt.Print(t.Text)
			return nil
		})
	fmt.Println()
	fmt.Println(res.Stats.Stages, "stages,", len(res.Tokens), "tokens,", err)
	// Output:
	//  and Tom were playing in the park
	// 2 stages, 12 tokens, <nil>
}

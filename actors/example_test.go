package actors_test

import (
	"context"
	"fmt"
	"path/filepath"

	"strata/actors"
	"strata/actors/origin"
	"strata/actors/stage"
	"strata/internal/testdata"
	"strata/runtime/catalog"
	"strata/runtime/engine"
)

// Two stage hosts in one actor system split stories260K; an origin plans
// over them and drives a session. (strata.NewLocalCluster does this for
// any number of nodes, over libp2p too.)
func Example() {
	dir, err := testdata.Dir()
	if err != nil {
		fmt.Println(err)
		return
	}
	models := catalog.Files{"stories260K": filepath.Join(dir, "gguf", "stories260K.gguf")}
	system := actors.NewSystem(nil)
	defer system.Shutdown()
	var view origin.StaticDirectory
	var hosts []*stage.Host
	for _, id := range []string{"a", "b"} {
		host := stage.NewHost(stage.HostConfig{Models: models, MemoryBytes: 1100e3, Name: id})
		pid, err := system.Root.SpawnNamed(host.Props(), stage.HostName+"-"+id)
		if err != nil {
			fmt.Println(err)
			return
		}
		view = append(view, origin.Member{ID: id, Host: pid, MemoryBytes: 1100e3, Models: []string{"stories260K"}})
		hosts = append(hosts, host)
	}
	// The origin runs on node a: its host describes the model.
	c := origin.New(system, view, hosts[0], origin.Options{PlanContext: 512})
	defer c.Close()
	res, err := c.Generate(context.Background(), engine.Request{Model: "stories260K", Prompt: "Lily", MaxTokens: 12},
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

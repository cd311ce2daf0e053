package plan_test

import (
	"errors"
	"fmt"

	"strata/actors/plan"
)

// Eight layers of 100 MB and an embedding and a head of 50 MB each, on
// two nodes that cannot hold it alone: the fewest stages that fit, layers
// in proportion to memory. On one node it is refused, in words.
func Example() {
	m := plan.Model{Name: "m", EmbedBytes: 50e6, HeadBytes: 50e6, KVBytesPerToken: 8000,
		LayerBytes: []uint64{100e6, 100e6, 100e6, 100e6, 100e6, 100e6, 100e6, 100e6}}
	nodes := []plan.Node{{ID: "a", FreeBytes: 600e6}, {ID: "b", FreeBytes: 400e6}}
	p, err := plan.Place(m, nodes, plan.Options{Context: 1000})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range p.Stages {
		fmt.Printf("%s: layers [%d, %d), %d MB of weights\n", s.Node, s.First, s.End, s.WeightBytes/1e6)
	}
	_, err = plan.Place(m, nodes[:1], plan.Options{Context: 1000})
	var refused *plan.RefusalError
	fmt.Println(errors.As(err, &refused), err)
	// Output:
	// a: layers [0, 5), 550 MB of weights
	// b: layers [5, 8), 350 MB of weights
	// true cannot place m: needs 900.0 MB for weights + 8.0 MB KV (context 1000 × 1 session(s)); the cluster offers 600.0 MB across 1 node(s)
}

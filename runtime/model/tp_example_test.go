package model_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/model"
)

// Two tensor-parallel members, each a goroutine holding half of every
// layer, decode stories260K greedily; they all-reduce in-process. Members
// on different hosts would pass an AllReducer over their link instead.
func ExampleLoadTP() {
	dir, err := testdata.Dir()
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := gguf.Open(filepath.Join(dir, "gguf", "stories260K.gguf"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	c, _ := model.ConfigOf(f.Metadata())
	units, _ := model.TPUnitsOf(f, c, 0, c.Layers)
	emb, _ := f.Tensor("token_embd.weight")
	slices, err := model.PlanTP(c, int(emb.Dims[1]), units, []uint64{1, 1}) // equal compute rates
	if err != nil {
		fmt.Println(err)
		return
	}
	group := model.LocalGroup(len(slices))
	out := make([][]int, len(slices))
	var wg sync.WaitGroup
	for i, s := range slices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := model.LoadTP(f, 0, c.Layers, s)
			if err != nil {
				panic(err)
			}
			ctx := context.Background()
			st, cache := m.NewState(nil, 1, 16), m.NewCache(16)
			token := 1 // BOS
			for range 8 {
				st.Embed([]int{token})
				if err := st.Forward(ctx, cache, 1, group[i]); err != nil {
					panic(err)
				}
				logits, err := st.LogitsOf(ctx, 0, group[i])
				if err != nil {
					panic(err)
				}
				token = argmax(logits) // every member holds the same logits
				out[i] = append(out[i], token)
			}
		}()
	}
	wg.Wait()
	fmt.Println(out[0])
	fmt.Println(out[1])
	// Output:
	// [403 407 261 378 432 383 286 261]
	// [403 407 261 378 432 383 286 261]
}

package stage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"strata/actors/internal/oracle"
	"strata/actors/origin"
	"strata/actors/plan"
	"strata/messages"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// TestTPExpertsMatchSingleNode runs the synthetic qwen3moe-tiny (8
// experts, 2 used, expert FFN of 2 Q8_0 units) on 3-way tensor-parallel
// plans, experts split by columns (the cost model's choice: the busiest
// member reads 1 expert's bytes, against 1.25 whole experts) and whole per
// member (--experts whole): the members load the layout the plan chose,
// and the greedy tokens equal one node's.
func TestTPExpertsMatchSingleNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qwen3moe-tiny.gguf")
	if err := synth.WriteFile(path, model.Shapes["qwen3moe-tiny"], synth.Options{Type: tensor.Q8_0, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	store := catalog.Files{"moe": path}
	prompt := "The expert said"
	want := oracle.OneNodeF32(t, path, engine.Request{Prompt: prompt, MaxTokens: 40})
	for _, c := range []struct {
		name    string
		experts plan.ExpertMode
		whole   bool
		slices  string // each member's experts, or columns of each expert
	}{
		{"auto", plan.ExpertsAuto, false, "n0:cols[0,32) n1:cols[32,64) n2:cols[64,64) "},
		{"whole", plan.ExpertsWhole, true, "n0:experts[0,3) n1:experts[3,6) n2:experts[6,8) "},
	} {
		t.Run(c.name, func(t *testing.T) {
			lc := newTPCluster(t, []float64{1e9, 1e9, 1e9}, 64<<20, store)
			cl := lc.cluster(origin.Options{PlanContext: 512, KVType: model.KVF32, Placement: plan.TensorParallel, Experts: c.experts})
			defer cl.Close()
			p, _, err := cl.Plan("moe")
			if err != nil || shape(p) != "[0,2)[n0 n1 n2] " || p.Stages[0].ExpertParallel != c.whole {
				t.Fatalf("plan %s, %v; want [0,2)[n0 n1 n2] with experts whole %v\n%v", shape(p), err, c.whole, p)
			}
			res, err := cl.Generate(context.Background(), engine.Request{Model: "moe", Prompt: prompt, MaxTokens: 40}, func(engine.Token) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(res.Tokens) != fmt.Sprint(want.Tokens) {
				t.Fatalf("tokens differ from one node (first at %d)\n got %v\nwant %v", firstDiff(res.Tokens, want.Tokens), res.Tokens, want.Tokens)
			}
			got := ""
			for i, h := range lc.hosts {
				for _, s := range h.shards {
					if sl := s.tp.m.Slice; sl.ExpertParallel {
						got += fmt.Sprintf("n%d:experts%v ", i, sl.Experts)
					} else {
						got += fmt.Sprintf("n%d:cols%v ", i, sl.ExpertFFN)
					}
				}
			}
			if got != c.slices {
				t.Errorf("slices %s, want %s", got, c.slices)
			}
			lc.waitFree(t)
		})
	}
}

// Members that hold experts differently never form one group or share a
// loaded shard; a model without experts refuses expert parallelism.
func TestTPExpertParallelSpec(t *testing.T) {
	spec := &messages.ShardSpec{Model: "stories260K", First: 0, End: 5, Layers: 5, TpNodes: []string{"a", "b"}, TpWeights: []uint64{1, 1}}
	ep := &messages.ShardSpec{Model: "stories260K", First: 0, End: 5, Layers: 5, TpNodes: []string{"a", "b"}, TpWeights: []uint64{1, 1}, TpExpertParallel: true}
	if tpStageID(spec) == tpStageID(ep) || ShardID(spec) == ShardID(ep) {
		t.Errorf("the expert layout does not change the stage's ID: %s, %s", ShardID(spec), ShardID(ep))
	}
	f, err := gguf.Open(oracle.Stories(t)["stories260K"])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := model.ConfigOf(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadTP(f, cfg, ep, model.KVF32); err == nil || !strings.Contains(err.Error(), "no experts") {
		t.Errorf("expert parallelism of a dense model: %v", err)
	}
	if _, _, err := loadTP(f, cfg, spec, model.KVF32); err != nil {
		t.Errorf("columns: %v", err)
	}
}

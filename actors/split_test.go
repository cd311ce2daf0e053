package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"strata/actors/internal/oracle"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// TestSplitModelIsOneModel: a model written in 3 parts (as llama.cpp's
// gguf-split names them) is announced, planned and run under one name on
// a 3-node cluster, and generates what the single file generates.
func TestSplitModelIsOneModel(t *testing.T) {
	shape := model.Shape{Name: "split", Arch: "llama", Layers: 6, Embd: 256, FFN: 512, Heads: 8, KVHeads: 2, Vocab: 1000, Context: 512, RopeBase: 10000}
	o := synth.Options{Type: tensor.Q8_0, Seed: 7}
	single := filepath.Join(t.TempDir(), "single.gguf")
	if err := synth.WriteFile(single, shape, o); err != nil {
		t.Fatal(err)
	}
	models := t.TempDir()
	if _, err := synth.WriteSplit(filepath.Join(models, "tiny.gguf"), shape, o, 3); err != nil {
		t.Fatal(err)
	}
	req := engine.Request{Prompt: "hello world", MaxTokens: 40}
	want := oracle.OneNode(t, single, req)

	nodes := startNodesIn(t, models, 512, 3, 2200e3, 1)
	for _, m := range nodes[0].Peers.Membership().View().Members {
		var names []string
		for _, mi := range m.Info.GetModels() {
			names = append(names, mi.GetName())
		}
		if len(names) != 1 || names[0] != "tiny" {
			t.Fatalf("member %s announces %v, want the one model [tiny]", m.ID, names)
		}
	}
	// Peers serve the model's manifest: tensor digests of all three parts.
	b, err := nodes[1].Peers.Weights().Manifest(context.Background(), nodes[0].Peers.ID(), "tiny")
	var man catalog.Manifest
	if err != nil || json.Unmarshal(b, &man) != nil || len(man.Parts) != 3 || len(man.Tensors) == 0 || man.Tensors[0].SHA256 == "" {
		t.Fatalf("manifest over the weights protocol: %v (%d bytes)", err, len(b))
	}
	p, _, err := nodes[1].Origin.Plan("tiny")
	if err != nil || len(p.Stages) != 3 {
		t.Fatalf("plan %v %v; want 3 stages", p, err)
	}
	res, err := nodes[1].Origin.Generate(context.Background(), engine.Request{Model: "tiny", Prompt: req.Prompt, MaxTokens: req.MaxTokens}, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) == 0 || fmt.Sprint(res.Tokens) != fmt.Sprint(want.Tokens) {
		t.Fatalf("split model on 3 nodes:\n got %v\nwant %v", res.Tokens, want.Tokens)
	}
}

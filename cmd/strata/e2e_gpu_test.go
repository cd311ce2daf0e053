//go:build e2e

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"strata/api"
	"strata/internal/testdata"
	"strata/runtime/gpu"
)

// A 3-process pipeline whose nodes compute their shards' matrix products
// on a Vulkan device (strata node --gpu 0: lavapipe in CI), the last two
// layers of each, tells one node's story, token for token.
func TestE2EGPUNode(t *testing.T) {
	if _, err := gpu.List(); err != nil {
		if os.Getenv("STRATA_WANT_VULKAN") != "" {
			t.Fatalf("STRATA_WANT_VULKAN is set, and: %v", err)
		}
		t.Skipf("no Vulkan device: %v", err)
	}
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	c := newClusterEach(t, bin, map[string]string{"stories260K": stories}, 3, "800kB", func(i int) []string {
		return []string{"--gpu", "0", "--gpu-layers", "2"}
	}, "--context", "512")
	const n = 120
	prompt := "Once upon a time, there was a little girl named Lily."
	want := runLocal(t, bin, stories, prompt, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got strings.Builder
	if _, err := api.StreamGenerate(ctx, "http://"+c.nodes[2].api, "", api.GenerateRequest{Model: "stories260K", Prompt: prompt, MaxTokens: n},
		func(text string) error { got.WriteString(text); return nil }); err != nil {
		t.Fatal(err)
	}
	if got.String()+"\n" != want {
		t.Fatalf("with a GPU node:\n got %q\nwant %q", got.String()+"\n", want)
	}
	shards := 0
	for _, p := range c.nodes {
		log, err := os.ReadFile(p.log.Name())
		if err != nil {
			t.Fatal(err)
		}
		shards += strings.Count(string(log), "gpu: layers [")
	}
	if shards < 2 {
		t.Errorf("%d shards on the device, want the pipeline's stages (at least 2)", shards)
	}
}

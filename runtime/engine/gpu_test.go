package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gpu"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// TestGPUGivesTheCPUsText: stories260K, and a synthetic deepseek2-tiny
// (latent attention, experts; F16), with their layers on a Vulkan device
// (the first: lavapipe in CI), all layers and the last two, and all
// layers as on a discrete GPU (STRATA_GPU_DISCRETE: weights copied into
// its memory, the KV cache mirrored there), generate the CPU's greedy
// text token for token.
func TestGPUGivesTheCPUsText(t *testing.T) {
	if _, err := gpu.Devices(); err != nil {
		if os.Getenv("STRATA_WANT_VULKAN") != "" {
			t.Fatalf("STRATA_WANT_VULKAN is set, and: %v", err)
		}
		t.Skipf("no Vulkan: %v", err)
	}
	ds := filepath.Join(t.TempDir(), "deepseek2-tiny-F16.gguf")
	if err := synth.WriteFile(ds, model.Shapes["deepseek2-tiny"], synth.Options{Type: tensor.F16, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{testdata.Path(t, "gguf/stories260K.gguf"), ds} {
		t.Run(filepath.Base(path), func(t *testing.T) { gpuGivesTheCPUsText(t, path) })
	}
	path := testdata.Path(t, "gguf/stories260K.gguf")
	if _, err := Open(path, Options{GPU: "99", GPULayers: gpu.AllLayers}); err == nil {
		t.Error("device 99 opened")
	}
	if _, err := Open(path, Options{GPU: "fast", GPULayers: gpu.AllLayers}); err == nil {
		t.Error(`--gpu "fast" accepted`)
	}
}

func gpuGivesTheCPUsText(t *testing.T, path string) {
	generate := func(opts Options) ([]int, string, string) {
		t.Helper()
		opts.Threads, opts.PromptCache = 1, -1
		e, err := Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		res, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 120}, func(Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens, res.Text, e.GPU()
	}
	want, text, where := generate(Options{})
	if where != "" {
		t.Fatalf("the CPU engine says it runs on %q", where)
	}
	for _, run := range []struct {
		layers   int
		discrete bool
	}{{gpu.AllLayers, false}, {2, false}, {gpu.AllLayers, true}} {
		if run.discrete {
			t.Setenv(gpu.DiscreteEnv, "1")
		}
		got, _, where := generate(Options{GPU: "0", GPULayers: run.layers})
		if where == "" {
			t.Fatalf("%d layers: the engine did not take the device", run.layers)
		}
		t.Logf("%s", where)
		if run.discrete != strings.Contains(where, "copied into its own memory") {
			t.Fatalf("discrete %v, and the engine says %q", run.discrete, where)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%d layers on %s:\n got %v\nwant %v (%q)", run.layers, where, got, want, text)
		}
	}
}

package engine

import (
	"context"
	"os"
	"slices"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gpu"
)

// TestGPUGivesTheCPUsText: stories260K with its matrix products on a
// Vulkan device (the first: lavapipe in CI), all layers and the last two,
// generates the CPU's greedy text token for token.
func TestGPUGivesTheCPUsText(t *testing.T) {
	if _, err := gpu.Devices(); err != nil {
		if os.Getenv("STRATA_WANT_VULKAN") != "" {
			t.Fatalf("STRATA_WANT_VULKAN is set, and: %v", err)
		}
		t.Skipf("no Vulkan: %v", err)
	}
	path := testdata.Path(t, "gguf/stories260K.gguf")
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
	for _, layers := range []int{gpu.AllLayers, 2} {
		got, _, where := generate(Options{GPU: "0", GPULayers: layers})
		if where == "" {
			t.Fatalf("%d layers: the engine did not take the device", layers)
		}
		t.Logf("%s", where)
		if !slices.Equal(got, want) {
			t.Fatalf("%d layers on %s:\n got %v\nwant %v (%q)", layers, where, got, want, text)
		}
	}
	if _, err := Open(path, Options{GPU: "99", GPULayers: gpu.AllLayers}); err == nil {
		t.Error("device 99 opened")
	}
	if _, err := Open(path, Options{GPU: "fast", GPULayers: gpu.AllLayers}); err == nil {
		t.Error(`--gpu "fast" accepted`)
	}
}

//go:build e2e

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"strata/api"
	"strata/internal/testdata"
	"strata/runtime/gpu"
)

// A 3-process pipeline whose nodes compute their shards' last two layers
// on a Vulkan device (strata node --gpu 0: lavapipe in CI; stories260K's
// layers run whole there) tells one node's story, token for token; each
// node announces its device, and strata status shows it; the memory kept
// for the device's scratch (--gpu-memory) is not offered for shards. And
// the same as on discrete GPUs (STRATA_GPU_DISCRETE: the weights copied
// into the device's memory, the KV caches mirrored there).
func TestE2EGPUNode(t *testing.T) {
	if _, err := gpu.List(); err != nil {
		if os.Getenv("STRATA_WANT_VULKAN") != "" {
			t.Fatalf("STRATA_WANT_VULKAN is set, and: %v", err)
		}
		t.Skipf("no Vulkan device: %v", err)
	}
	bin := buildBinary(t)
	for _, discrete := range []bool{false, true} {
		t.Run(fmt.Sprintf("discrete=%v", discrete), func(t *testing.T) {
			if discrete {
				t.Setenv(gpu.DiscreteEnv, "1")
			}
			gpuNode(t, bin, discrete)
		})
	}
}

func gpuNode(t *testing.T, bin string, discrete bool) {
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	// 800 kB offered for shards, as the CPU nodes of other tests offer; the
	// rest kept for the device's scratch (0.3-0.4 MB a shard at 64 rows).
	c := newClusterEach(t, bin, map[string]string{"stories260K": stories}, 3, "1400kB", func(i int) []string {
		return []string{"--gpu", "0", "--gpu-layers", "2", "--gpu-memory", "600kB"}
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
		if copied := strings.Contains(string(log), "copied into its own memory"); discrete != copied {
			t.Errorf("discrete %v, and the node's log says otherwise of its weights:\n%s", discrete, log)
		}
	}
	if shards < 2 {
		t.Errorf("%d shards on the device, want the pipeline's stages (at least 2)", shards)
	}
	list, _ := gpu.List()
	device := strings.TrimPrefix(list[0], "0: ")
	var st api.PeersStatus
	if err := getJSON("http://"+c.nodes[0].api+"/api/peers", &st); err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.Device != device {
			t.Errorf("member %s announces device %q, want %q", m.PeerID, m.Device, device)
		}
		if m.MemoryBytes != 800e3 {
			t.Errorf("member %s offers %d bytes for shards, want 800 kB (--memory less --gpu-memory)", m.PeerID, m.MemoryBytes)
		}
	}
	out, err := exec.Command(bin, "status", "--api", c.nodes[0].api).CombinedOutput()
	if err != nil || strings.Count(string(out), device) != len(c.nodes) {
		t.Errorf("strata status (%v) does not show the device of each node:\n%s", err, out)
	}
}

package model_test

import (
	"os"
	"path/filepath"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// BenchmarkDecodeAt measures one decoded token after 0 and 4096 cached
// positions of the model at $STRATA_BENCH_MODEL (e.g. strata synth
// --shape tinyllama-1.1b --type Q4_K; unset: a synthetic llama3-tiny),
// 2 threads. The cache is marked
// full without a prefill (attention's cost does not depend on the cached
// values), so the difference between the two is what the context costs.
func BenchmarkDecodeAt(b *testing.B) {
	path := os.Getenv("STRATA_BENCH_MODEL")
	if path == "" {
		path = filepath.Join(b.TempDir(), "llama3-tiny.gguf")
		if err := synth.WriteFile(path, model.Shapes["llama3-tiny"], synth.Options{Type: tensor.Q8_0, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cfg, err := model.ConfigOf(f.Metadata())
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.Load(f, 0, cfg.Layers)
	if err != nil {
		b.Fatal(err)
	}
	pool := tensor.NewPool(2)
	defer pool.Close()
	// Touch every weight once, so the first run does not time page faults.
	warm := m.NewState(pool, 1, 1)
	if warm.Embed([]int{5}) != nil || warm.Forward(m.NewCache(1), 1) != nil {
		b.Fatal("warm-up failed")
	}
	for _, pos := range []int{0, 4096} {
		b.Run(map[int]string{0: "pos0", 4096: "pos4096"}[pos], func(b *testing.B) {
			s := m.NewState(pool, 1, pos+1)
			c := m.NewCache(pos + 1)
			for b.Loop() {
				c.Len = pos
				if err := s.Embed([]int{5}); err != nil {
					b.Fatal(err)
				}
				if err := s.Forward(c, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := s.LogitsOf(0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

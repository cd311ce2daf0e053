package synth_test

import (
	"fmt"
	"os"
	"path/filepath"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// Write a random-weight model of a real shape (the tiny Qwen3 test shape,
// Q8_0), then open it as any GGUF.
func Example() {
	dir, err := os.MkdirTemp("", "synth-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "qwen3-tiny-q8.gguf")
	if err := synth.WriteFile(path, model.Shapes["qwen3-tiny"], synth.Options{Type: tensor.Q8_0, Seed: 1}); err != nil {
		fmt.Println(err)
		return
	}
	f, err := gguf.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	prof, err := model.ProfileOf(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Metadata().Architecture(), prof.Layers, "layers,", prof.Vocab, "tokens,", prof.TotalBytes(), "bytes of weights")
	// Output:
	// qwen3 2 layers, 1024 tokens, 699904 bytes of weights
}

package gguf_test

import (
	"fmt"
	"path/filepath"

	"strata/internal/testdata"
	"strata/runtime/gguf"
)

// Open a model (stories260K, from the shared test data), read its
// metadata, and add up its tensors' bytes, read in place from the mapping.
func Example() {
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
	md := f.Metadata()
	layers := md.ArchUint("block_count", 0) // llama.block_count, qwen3.block_count, ...
	var bytes int
	for _, t := range f.Tensors() {
		bytes += len(f.Data(t)) // a view into the mapping, valid until Close
	}
	fmt.Println(md.Architecture(), layers, "layers,", len(f.Tensors()), "tensors,", bytes, "bytes")
	// Output:
	// llama 5 layers, 48 tensors, 1171200 bytes
}

package modelinfo_test

import (
	"fmt"
	"path/filepath"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/modelinfo"
)

// Describe stories260K (from ../shared/testdata, or $STRATA_TESTDATA):
// its shape and how its tokenizer starts a prompt.
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
	info, err := modelinfo.Read(f)
	f.Close() // the description keeps what it needs
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Arch, info.Config.Layers, "layers,", info.Tokenizer.VocabSize(), "tokens")
	fmt.Println(info.Tokenizer.Encode("Once upon a time", true, false))
	// Output:
	// llama 5 layers, 512 tokens
	// [1 403 407 261 378]
}

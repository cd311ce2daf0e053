package tokenizer_test

import (
	"fmt"
	"log"
	"path/filepath"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/tokenizer"
)

// A model file's tokenizer encodes a prompt (with BOS) and decodes ids
// back to text as they stream, a token at a time, until an
// end-of-generation token.
func Example() {
	dir, err := testdata.Dir()
	if err != nil {
		log.Fatal(err)
	}
	f, err := gguf.Open(filepath.Join(dir, "gguf", "stories260K.gguf"))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.Metadata())
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("Once upon a time", true, true)
	fmt.Println(len(ids) > 1, tok.IsEOG(ids[len(ids)-1]))
	dec := tok.NewDecoder()
	text := ""
	for _, id := range ids[1:] { // a model's output would stream here
		if tok.IsEOG(id) {
			break
		}
		text += dec.Add(id)
	}
	text += dec.Flush()
	fmt.Printf("%q\n", text) // SentencePiece marks the first word's space too
	// Output:
	// true false
	// " Once upon a time"
}

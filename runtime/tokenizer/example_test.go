package tokenizer_test

import (
	"fmt"
	"log"

	"strata/runtime/gguf"
	"strata/runtime/tokenizer"
)

// A prompt is encoded with BOS and chat-template tokens parsed; generated
// ids are streamed back to text until an end-of-generation token.
func Example() {
	f, err := gguf.Open("model.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.Metadata())
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("<|im_start|>user\nHello!<|im_end|>\n", true, true)
	dec := tok.NewDecoder()
	for _, id := range generate(ids) {
		if tok.IsEOG(id) {
			break
		}
		fmt.Print(dec.Add(id))
	}
	fmt.Print(dec.Flush())
}

// generate stands in for the model.
func generate(prompt []int) []int { return nil }

package grammar

import (
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/tokenizer"
)

// BenchmarkMask32k masks a 32000-token vocabulary (llama-2-tiny-random's
// SentencePiece vocabulary) inside a free string, the widest state (most
// tokens allowed), and at a key, a narrow one.
func BenchmarkMask32k(b *testing.B) {
	f, err := gguf.Open(testdata.Path(b, "gguf/llama-2-tiny-random.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.Metadata())
	if err != nil {
		b.Fatal(err)
	}
	v := VocabOf(tok)
	s, err := Compile([]byte(weather))
	if err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, tok.VocabSize())
	for _, c := range []struct{ name, prefix string }{{"in-string", `{"city":"Par`}, {"at-key", `{"`}} {
		b.Run(c.name, func(b *testing.B) {
			m := NewMatcher(s, v, 100)
			for i := 0; i < len(c.prefix); i++ {
				var ok bool
				if m.st, ok = step(m.st, c.prefix[i]); !ok {
					b.Fatal("prefix refused")
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				m.Mask(logits)
			}
		})
	}
	b.Run("VocabOf", func(b *testing.B) {
		for b.Loop() {
			VocabOf(tok)
		}
	})
}

package grammar

import (
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/tokenizer"
)

// llama32k is llama-2-tiny-random's SentencePiece tokenizer, a 32000-token
// vocabulary.
func llama32k(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(testdata.Path(t, "gguf/llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// BenchmarkMask32k masks a 32000-token vocabulary (llama-2-tiny-random's
// SentencePiece vocabulary) inside a free string, the widest state (most
// tokens allowed); at a key, a narrow one; and at a key with the budget
// spent, where no token fits it and the trie is walked again without it.
func BenchmarkMask32k(b *testing.B) {
	tok := llama32k(b)
	v := VocabOf(tok)
	s, err := Compile([]byte(weather))
	if err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, tok.VocabSize())
	// scan is the reference Mask is tested against (mask_test.go), which
	// scans the vocabulary once more, up to the first allowed token, to
	// learn whether there is one: run beside Mask, under the same load.
	impls := []struct {
		name string
		mask func(m *Matcher, logits []float32)
	}{{"Mask", (*Matcher).Mask}, {"scan", func(m *Matcher, l []float32) { m.maskByScan(l) }}}
	for _, c := range []struct {
		name, prefix string
		budget       int
	}{{"in-string", `{"city":"Par`, 100}, {"at-key", `{"`, 100}, {"at-key-spent", `{"`, 1}} {
		for _, impl := range impls {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				m := NewMatcher(s, v, c.budget)
				for i := 0; i < len(c.prefix); i++ {
					var ok bool
					if m.st, ok = step(m.st, c.prefix[i]); !ok {
						b.Fatal("prefix refused")
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					impl.mask(m, logits)
				}
			})
		}
	}
	b.Run("VocabOf", func(b *testing.B) {
		for b.Loop() {
			VocabOf(tok)
		}
	})
}

package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func addSeeds(f *testing.F) {
	inputs, _ := readVectors(f, "ggml-vocab-llama-spm.gguf")
	for _, s := range append(inputs, extraSplitInputs...) {
		f.Add(s)
	}
	f.Add("<s>[INST] hi [/INST]</s><unk>")
	f.Add("<|endoftext|>\xf0\x9f")
}

// FuzzEncodeDecode checks that encoding never panics and returns ids in
// range, that byte-level BPE is lossless for any bytes, and that SPM gives
// back valid UTF-8 text with its dummy-prefix space (and '▁' read as ' ').
func FuzzEncodeDecode(f *testing.F) {
	addSeeds(f)
	spm := loadVocab(f, vocabPath("llama-spm"))
	bpe := loadVocab(f, vocabPath("gpt-2"))
	coder := loadVocab(f, vocabPath("deepseek-coder"))
	f.Fuzz(func(t *testing.T, s string) {
		for _, tk := range []*Tokenizer{spm, bpe, coder} {
			for _, parse := range []bool{false, true} {
				for _, id := range tk.Encode(s, true, parse) {
					if id < 0 || id >= tk.VocabSize() {
						t.Fatalf("%s: id %d out of range", tk.Model(), id)
					}
				}
			}
		}
		if got := bpe.Decode(bpe.Encode(s, false, false)); got != s {
			t.Errorf("gpt-2: Decode(Encode(%q)) = %q", s, got)
		}
		if !utf8.ValidString(s) {
			return
		}
		// deepseek-coder has byte-level tokens typed user-defined, which
		// decode as their text (as in llama.cpp): lossless for UTF-8 only.
		if got := coder.Decode(coder.Encode(s, false, false)); got != s {
			t.Errorf("deepseek-coder: Decode(Encode(%q)) = %q", s, got)
		}
		{
			want := ""
			if s != "" {
				want = " " + strings.ReplaceAll(s, "▁", " ")
			}
			if got := spm.Decode(spm.Encode(s, false, false)); got != want {
				t.Errorf("llama-spm: Decode(Encode(%q)) = %q, want %q", s, got, want)
			}
		}
	})
}

// FuzzSplitters checks the hand-written GPT-2 and Llama 3 splitters
// against their regexes run through regexp2, and the Qwen2 regex against
// Llama 3's with digit runs split.
func FuzzSplitters(f *testing.F) {
	addSeeds(f)
	gpt2 := regexOnly(f, reGPT2)
	llama3 := regexOnly(f, reLlama3)
	qwen2 := regexOnly(f, reQwen2)
	simple := simpleExprs(f)
	regex := map[string]rule{}
	for e := range simple {
		regex[e] = regexOnly(f, e)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for e, sr := range simple {
			if got, want := splitWith(s, sr), splitWith(s, regex[e]); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Errorf("%q on %q: simple %q, regex %q", e, s, got, want)
			}
		}
		if got, want := splitWith(s, gpt2Rule{}), splitWith(s, gpt2); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("gpt2 %q: custom %q, regex %q", s, got, want)
		}
		if got, want := splitWith(s, llama3Rule{3}), splitWith(s, llama3); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("llama3 %q: custom %q, regex %q", s, got, want)
		}
		if got, want := splitWith(s, llama3Rule{1}), splitWith(s, qwen2); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("qwen2 %q: custom %q, regex %q", s, got, want)
		}
		if got := strings.Join(splitPreset(t, "qwen2", s), ""); got != s {
			t.Errorf("qwen2 split of %q loses text: %q", s, got)
		}
	})
}

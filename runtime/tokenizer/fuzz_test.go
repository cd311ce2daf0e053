package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func addSeeds(f *testing.F) {
	inputs, _ := readVectors(f, "ggml-vocab-llama-spm.gguf")
	for _, s := range slices.Concat(inputs, extraSplitInputs, oracleInputs) {
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

// FuzzSplitters checks the hand-written GPT-2, Llama 3, Qwen2 and Kimi K2
// splitters and the single-class fast path against their regexes run
// through regexp2 (for Kimi K2, the regex of llama.cpp's code), and that
// the big models' presets keep every byte.
func FuzzSplitters(f *testing.F) {
	addSeeds(f)
	custom := []struct {
		name string
		rule rule
		re   rule
	}{
		{"gpt2", gpt2Rule{}, regexOnly(f, reGPT2)},
		{"llama3", llama3Rule{3, flagLetter}, regexOnly(f, reLlama3)},
		{"qwen2", llama3Rule{1, flagLetter}, regexOnly(f, reQwen2)},
		{"qwen35", llama3Rule{1, flagLetter | flagAccentMark}, regexOnly(f, reQwen35)},
		{"kimi-k2", kimiRule{}, kimiRegex(f)},
	}
	simple := simpleExprs(f)
	regex := map[string]rule{}
	for e := range simple {
		regex[e] = regexOnly(f, e)
	}
	pres := map[string]*pretokenizer{}
	for _, name := range bigModelPresets {
		p, err := lookupPreset(name)
		if err != nil {
			f.Fatal(err)
		}
		if pres[name], err = newPretokenizer(p); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		for e, sr := range simple {
			if got, want := splitWith(s, sr), splitWith(s, regex[e]); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Errorf("%q on %q: simple %q, regex %q", e, s, got, want)
			}
		}
		for _, c := range custom {
			if got, want := splitWith(s, c.rule), splitWith(s, c.re); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Errorf("%s %q: custom %q, regex %q", c.name, s, got, want)
			}
		}
		for name, pt := range pres {
			if got := strings.Join(splitWith(s, pt.rules...), ""); got != s {
				t.Errorf("%s split of %q loses text: %q", name, s, got)
			}
		}
	})
}

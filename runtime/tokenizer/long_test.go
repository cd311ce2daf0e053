package tokenizer

import (
	"strings"
	"testing"
)

var longInputs = map[string]string{
	"spaces":   strings.Repeat(" ", 10000),
	"spaces+a": strings.Repeat(" ", 10000) + "a",
	"letters":  strings.Repeat("a", 10000),
	"newlines": strings.Repeat("\n", 10000),
	"digits":   strings.Repeat("7", 10000),
	"tabs+a":   strings.Repeat(" \t", 5000) + "a",
	"emoji":    strings.Repeat("🦙", 2500),
}

// TestLongInputs encodes long degenerate inputs with every vocabulary. It
// asserts sizes, not times: a quadratic merge or regex would show up as a
// test that takes minutes.
func TestLongInputs(t *testing.T) {
	for _, name := range vocabs {
		tk := loadVocab(t, vocabPath(name))
		for kind, in := range longInputs {
			ids := tk.Encode(in, false, false)
			if len(ids) == 0 || len(ids) > len(in)+1 {
				t.Errorf("%s %s: %d ids for %d bytes", name, kind, len(ids), len(in))
			}
			want := in
			if tk.Model() == ModelSPM {
				want = " " + in
			}
			if got := tk.Decode(ids); got != want {
				t.Errorf("%s %s: round trip lost text", name, kind)
			}
		}
	}
}

// benchText is about 4 KiB of mixed prose, code, numbers and non-Latin text.
var benchText = strings.Repeat("Hello, world! The year 2024 had 366 days; x := f(y) * 3.14.\n"+
	"  Привет, мир — 我想在apple工作 🦙 don't panic!\n", 40)[:4096]

func BenchmarkEncode(b *testing.B) {
	for _, name := range vocabs {
		tk := loadVocab(b, vocabPath(name))
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(benchText)))
			b.ReportAllocs()
			for b.Loop() {
				tk.Encode(benchText, true, false)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"llama-spm", "gpt-2"} {
		tk := loadVocab(b, vocabPath(name))
		ids := tk.Encode(benchText, false, false)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(benchText)))
			b.ReportAllocs()
			for b.Loop() {
				d := tk.NewDecoder()
				for _, id := range ids {
					d.Add(id)
				}
			}
		})
	}
}

// BenchmarkPretokenize splits benchText with the big models' presets:
// the pre-tokenizer alone, without merges.
func BenchmarkPretokenize(b *testing.B) {
	flagsOf(0) // build the flag table outside the timings
	for _, name := range bigModelPresets {
		p, err := lookupPreset(name)
		if err != nil {
			b.Fatal(err)
		}
		pt, err := newPretokenizer(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(benchText)))
			b.ReportAllocs()
			var sc splitScratch
			for b.Loop() {
				pt.words(&sc, benchText)
			}
		})
	}
}

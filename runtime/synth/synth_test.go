package synth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/runtime/engine"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

// small is tinyllama's architecture at a size tests can fill quickly
// (the real shapes take seconds per file; race-enabled CI, minutes).
var small = model.Shape{Name: "small", Arch: "llama", Layers: 2, Embd: 256, FFN: 512, Heads: 8, KVHeads: 2, Vocab: 1000, Context: 256, RopeBase: 10000}

// A small llama in every computable type loads and generates.
func TestWriteLoadsAndGenerates(t *testing.T) {
	s := small
	for _, typ := range []tensor.Type{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.F16, tensor.Q2_K, tensor.Q3_K, tensor.IQ4_XS} {
		t.Run(typ.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := WriteFile(path, s, Options{Type: typ, Layers: 1, Seed: 1}); err != nil {
				t.Fatal(err)
			}
			e, err := engine.Open(path, engine.Options{Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if e.Model.Vocab != 1000 || e.Tokenizer.VocabSize() != 1000 || e.Model.Embed.Type != typ || len(e.Model.Blocks) != 1 {
				t.Errorf("vocab %d/%d, type %s", e.Model.Vocab, e.Tokenizer.VocabSize(), e.Model.Embed.Type)
			}
			res, err := e.Generate(context.Background(), engine.Request{Prompt: "hello world", MaxTokens: 4}, func(engine.Token) error { return nil })
			if err != nil || len(res.Tokens) == 0 {
				t.Fatalf("generate: %v (%d tokens)", err, len(res.Tokens))
			}
			if got := e.Tokenizer.Decode(e.Tokenizer.Encode("hello world", false, false)); got != " hello world" && got != "hello world" {
				t.Errorf("tokenizer round trip %q", got)
			}
		})
	}
}

// The same seed writes the same bytes; another seed does not.
func TestDeterministic(t *testing.T) {
	s := model.Shapes["qwen3-0.6b"]
	s.Vocab, s.Embd, s.FFN, s.Heads, s.KVHeads, s.HeadDim = 1000, 128, 256, 4, 2, 64
	dir := t.TempDir()
	for i, seed := range []uint64{5, 5, 6} {
		if err := WriteFile(filepath.Join(dir, string(rune('a'+i))), s, Options{Type: tensor.Q8_0, Layers: 1, Seed: seed}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a"))
	b, _ := os.ReadFile(filepath.Join(dir, "b"))
	c, _ := os.ReadFile(filepath.Join(dir, "c"))
	if string(a) != string(b) || string(a) == string(c) {
		t.Error("seeding is not deterministic")
	}
	f, err := gguf.Open(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f, 0, 1)
	if err != nil {
		t.Fatalf("qwen3 shape does not load: %v", err)
	}
	if !m.QKNorm || !m.RopeNeox || m.Output.Data == nil {
		t.Errorf("qwen3 config %+v", m.Config)
	}
}

// A 1T-parameter model is written sparsely: real tensor table, no disk.
func TestSparseKimiK2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kimi.gguf")
	s := model.Shapes["kimi-k2"]
	err := WriteFile(path, s, Options{Type: tensor.Q4_K})
	if err == nil || !strings.Contains(err.Error(), "--sparse") {
		t.Fatalf("filled 1T file not refused: %v", err)
	}
	if err := WriteFile(path, s, Options{Type: tensor.Q4_K, Sparse: true}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Size() < 500e9 {
		t.Errorf("apparent size %d", st.Size())
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := model.ProfileOf(f)
	if err != nil || p.Layers != 61 {
		t.Fatalf("profile: %v %+v", err, p.Layers)
	}
	if want := s.Profile(tensor.Q4_K); p.TotalBytes() != want.TotalBytes() {
		t.Errorf("profile from file %d bytes, from shape %d", p.TotalBytes(), want.TotalBytes())
	}
}

// deepseek2-tiny (MLA, MoE with grouped sigmoid routing) runs in the
// engine, its cache sized by the latent.
func TestDeepseek2TinyGenerates(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		s := model.Shapes["deepseek2-tiny"]
		s.LegacyKVB = legacy
		path := filepath.Join(t.TempDir(), "ds.gguf")
		if err := WriteFile(path, s, Options{Type: tensor.Q8_0, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		e, err := engine.Open(path, engine.Options{Context: 64})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Generate(context.Background(), engine.Request{Prompt: "hello world", MaxTokens: 8}, func(engine.Token) error { return nil })
		e.Close()
		if err != nil || len(res.Tokens) != 8 {
			t.Fatalf("legacy %v: generate: %v (%d tokens)", legacy, err, len(res.Tokens))
		}
	}
}

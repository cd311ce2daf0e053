package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/catalog"
	"strata/runtime/tensor"
)

// run executes the strata command line args and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestInspect(t *testing.T) {
	out, err := run(t, "inspect", testdata.Path(t, "gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"architecture:  llama", "block_count                        5", "512 tokens, BOS 1, EOS 2", "no chat template", "blk.4.ffn_down.weight", "layer 4", "177.50 KiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectJSON(t *testing.T) {
	out, err := run(t, "inspect", "--json", testdata.Path(t, "gguf/llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var r inspectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Architecture != "llama" || r.Tokenizer.VocabSize != 32000 || r.TiedOutput || len(r.Layers) != 1 || r.TypeCounts["F16"] == 0 {
		t.Errorf("report %+v", r)
	}
}

func TestInspectErrors(t *testing.T) {
	if _, err := run(t, "inspect", "/nonexistent.gguf"); err == nil || !strings.Contains(err.Error(), "/nonexistent.gguf") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := run(t, "inspect", "main.go"); err == nil || !strings.Contains(err.Error(), "not a GGUF file") {
		t.Errorf("non-GGUF file: %v", err)
	}
	// A vocabulary-only file inspects without tensors.
	out, err := run(t, "inspect", testdata.Path(t, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf"))
	if err != nil || !strings.Contains(out, "vocabulary-only") {
		t.Errorf("vocab file: %v\n%s", err, out)
	}
}

func TestRunTellsTheStory(t *testing.T) {
	out, err := run(t, "run", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--max-tokens", "30")
	if err != nil {
		t.Fatal(err)
	}
	// stdout and stderr share the buffer here; the story comes first.
	if !strings.HasPrefix(out, "Once upon a time, there was a little girl named Lily.") || !strings.Contains(out, "generated 30 tokens") {
		t.Errorf("output:\n%s", out)
	}
	if _, err := run(t, "run"); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("missing --model: %v", err)
	}
	if _, err := run(t, "run", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--top-p", "2"); err == nil {
		t.Error("top-p 2 accepted")
	}
}

// run --speculate prints the same story, and how many guesses were right;
// bad values are refused with what to write instead.
func TestRunSpeculates(t *testing.T) {
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	story := func(out string) string { return out[:strings.Index(out, "load ")] }
	plain, err := run(t, "run", "--model", stories, "--max-tokens", "60")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"ngram", "draft:" + stories} {
		out, err := run(t, "run", "--model", stories, "--max-tokens", "60", "--speculate", spec)
		if err != nil {
			t.Fatal(err)
		}
		if story(out) != story(plain) {
			t.Errorf("--speculate %s: the story changed:\n%s\nwant\n%s", spec, story(out), story(plain))
		}
		if !strings.Contains(out, "guesses right") {
			t.Errorf("--speculate %s: no speculation counts:\n%s", spec, out)
		}
	}
	for spec, want := range map[string]string{"draft": "draft:PATH", "draft:": "path is missing", "eagle": "want off, ngram or draft",
		"draft:/nonexistent.gguf": "/nonexistent.gguf"} {
		if _, err := run(t, "run", "--model", stories, "--speculate", spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--speculate %s: %v, want an error with %q", spec, err, want)
		}
	}
	// A draft of another vocabulary is refused.
	if _, err := run(t, "run", "--model", stories, "--speculate", "draft:"+testdata.Path(t, "gguf/llama-2-tiny-random.gguf")); err == nil || !strings.Contains(err.Error(), "share the vocabulary") {
		t.Errorf("draft of another vocabulary: %v", err)
	}
	if _, err := run(t, "run", "--api", "127.0.0.1:1", "--model", "m", "--speculate", "eagle"); err == nil || !strings.Contains(err.Error(), "want off, ngram or draft") {
		t.Errorf("--api with --speculate eagle: %v", err)
	}
}

func TestPlan(t *testing.T) {
	out, err := run(t, "plan", "--shape", "kimi-k2", "--type", "Q8_0", "--nodes", "a=512GB,b=512GB,c=256GB,d=256GB")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "3 stage(s)") || !strings.Contains(out, "+embedding") || !strings.Contains(out, "+head") {
		t.Errorf("plan output:\n%s", out)
	}
	out, err = run(t, "plan", "--json", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--nodes", "a=1MB,b=1MB", "--context", "256")
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Stages []struct{ First, End int } }
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Stages) != 2 || p.Stages[1].End != 5 {
		t.Errorf("json plan %v: %s", err, out)
	}
	// The seeds' cluster (issue 15): the cost model's table, RDMA and TCP.
	out, err = run(t, "plan", "--simulate", "--nodes", "a=512GB:800GB/s,b=512GB:800GB/s,c=512GB:800GB/s,d=512GB:800GB/s", "--link", "rdma", "--link", "tcp")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| qwen3-235b-a22b Q4_K | rdma | 4 | TP 4-way |", "| kimi-k2 Q4_K | rdma | 1 | does not fit |", "| qwen3-235b-a22b Q4_K | tcp | 4 | 1 node |",
		"qwen3-235b-a22b Q4_K, TP 4-way: each expert split by columns (the busiest member reads 2.67", "kimi-k2 Q4_K, TP 4-way: each expert split by columns (the busiest member reads 2.00"} {
		if !strings.Contains(out, want) {
			t.Errorf("simulate output lacks %q:\n%s", want, out)
		}
	}
	// --experts whole forces the layout the cost model would not choose,
	// in the plan shown as in the table.
	out, err = run(t, "plan", "--shape", "qwen3-235b-a22b", "--type", "Q4_K", "--nodes", "a=512GB:800GB/s,b=512GB:800GB/s,c=512GB:800GB/s,d=512GB:800GB/s",
		"--link", "rdma", "--placement", "tp", "--experts", "whole")
	if err != nil || !strings.Contains(out, "TP 4-way             layers   0-93  (94) +embedding +head  experts whole per member") || !strings.Contains(out, "a+b+c+d (experts whole per member)") {
		t.Errorf("plan --experts whole: %v\n%s", err, out)
	}
	out, err = run(t, "plan", "--shape", "tinyllama-1.1b", "--nodes", "a=2GB,b=2GB", "--membw", "20GB/s", "--link", "20us,5GB/s")
	if err != nil || !strings.Contains(out, "chose TP 2-way") || !strings.Contains(out, "1 stage(s)") {
		t.Errorf("plan with the cost model: %v\n%s", err, out)
	}
	for _, bad := range [][]string{
		{"plan", "--shape", "kimi-k2", "--nodes", "a=1TB"},
		{"plan", "--simulate", "--nodes", "a=1TB", "--link", "fast"},
		{"plan", "--simulate", "--nodes", "a=1TB:lots"},
		{"plan", "--shape", "nope", "--nodes", "a=1TB"},
		{"plan", "--shape", "kimi-k2", "--nodes", "a"},
		{"plan", "--shape", "kimi-k2", "--nodes", "a=lots"},
		{"plan", "--nodes", "a=1TB"},
		{"plan", "--shape", "kimi-k2", "--nodes", "a=1TB", "--experts", "columns"},
	} {
		if _, err := run(t, bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if got := catalog.Name("/m/Kimi-K2-Q4_K-00001-of-00013.gguf"); got != "Kimi-K2-Q4_K" {
		t.Errorf("ModelName %q", got)
	}
}

func TestSynth(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/k2.gguf"
	if _, err := run(t, "synth", "--shape", "kimi-k2", "--type", "Q4_K", "-o", path); err == nil || !strings.Contains(err.Error(), "--sparse") {
		t.Errorf("1T model without --sparse: %v", err)
	}
	if out, err := run(t, "synth", "--shape", "kimi-k2", "--type", "Q4_K", "--sparse", "-o", path); err != nil || !strings.Contains(out, "61 layers") {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := run(t, "plan", "--model", path, "--nodes", "a=512GB,b=512GB,c=256GB,d=256GB")
	if err != nil || !strings.Contains(out, "2 stage(s)") {
		t.Errorf("plan of the synthetic file: %v\n%s", err, out)
	}
	if _, err := run(t, "synth", "--shape", "tinyllama-1.1b", "--type", "IQ2_XS", "-o", path); err == nil {
		t.Error("IQ2_XS accepted")
	}
	if _, err := run(t, "synth", "--shape", "gpt-9", "-o", path); err == nil || !strings.Contains(err.Error(), "tinyllama-1.1b") {
		t.Errorf("unknown shape: %v", err)
	}
}

// STRATA_KERNELS selects the kernel set for any command (and names the
// available ones when it cannot).
func TestKernelsEnv(t *testing.T) {
	orig := tensor.Kernels()
	t.Cleanup(func() {
		if err := tensor.SetKernels(orig); err != nil {
			t.Error(err)
		}
	})
	t.Setenv("STRATA_KERNELS", "generic")
	if _, err := run(t, "inspect", testdata.Path(t, "gguf/stories260K.gguf")); err != nil {
		t.Fatal(err)
	}
	if got := tensor.Kernels(); got != "generic" {
		t.Errorf("STRATA_KERNELS=generic: kernels %q", got)
	}
	t.Setenv("STRATA_KERNELS", "nosuch")
	if _, err := run(t, "inspect", testdata.Path(t, "gguf/stories260K.gguf")); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("STRATA_KERNELS=nosuch: err %v", err)
	}
}

// Type names are read in any case: synth --type and plan --type take
// "q8_0" and "q4_k" as "Q8_0" and "Q4_K" (and write ggml's names).
func TestTypeNamesAnyCase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lower.gguf")
	if out, err := run(t, "synth", "--shape", "qwen3moe-tiny", "--type", "q8_0", "--layers", "1", "-o", path); err != nil {
		t.Fatalf("synth --type q8_0: %v\n%s", err, out)
	}
	out, err := run(t, "inspect", "--json", path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		TypeCounts map[string]int `json:"tensor_types"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.TypeCounts["Q8_0"] == 0 {
		t.Errorf("synth --type q8_0 wrote %v (%v)", r.TypeCounts, err)
	}
	out, err = run(t, "plan", "--json", "--shape", "tinyllama-1.1b", "--type", "q4_k", "--nodes", "a=64GB")
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Model string }
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.Model != "tinyllama-1.1b-Q4_K" {
		t.Errorf("plan --type q4_k: model %q (%v)", p.Model, err)
	}
	// --kv-type (any case) sizes the plan's KV cache: tinyllama's 11264
	// values per token take 22.5 kB in f16 and 12.0 kB in q8_0.
	for kt, want := range map[string]string{"f16": "KV 22.5 kB per token", "Q8_0": "KV 12.0 kB per token"} {
		out, err := run(t, "plan", "--shape", "tinyllama-1.1b", "--type", "q4_k", "--kv-type", kt, "--nodes", "a=64GB")
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("plan --kv-type %s: %v, output lacks %q:\n%s", kt, err, want, out)
		}
	}
}

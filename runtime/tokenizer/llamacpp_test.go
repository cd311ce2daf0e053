package tokenizer

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"strata/internal/llamacpp"
	"strata/runtime/gguf"
)

// bigModelPresets are the pre-tokenizers of the models strata is for
// (Qwen2/3 and its MoE, DeepSeek V3/R1, Kimi K2, Llama 3) and DeepSeek's
// older ones.
var bigModelPresets = []string{"qwen2", "kimi-k2", "deepseek-v3", "deepseek-llm", "deepseek-coder", "llama-bpe"}

// TestPretokenizersLlamaCpp encodes texts with byte-level BPE
// vocabularies relabelled with each pre-tokenizer and compares the ids
// with llama.cpp's for the same file. One vocabulary is real (DeepSeek
// LLM's); the other is trained here on the test texts themselves without
// any pre-tokenization, so its merges join the two sides of nearly every
// word boundary in them: a boundary put in the wrong place, or missed,
// changes the ids (a Kimi K2 splitter that runs the Llama 3 expression
// instead fails 12 of the texts here, the real vocabulary none).
func TestPretokenizersLlamaCpp(t *testing.T) {
	mods, err := llamacpp.NodeModules()
	if err != nil {
		t.Fatal(err)
	}
	vectors, _ := readVectors(t, "ggml-vocab-llama-bpe.gguf")
	var inputs []string
	for _, s := range slices.Concat(vectors, extraSplitInputs, oracleInputs) {
		// The script's JSON strings cannot carry bytes that are not UTF-8.
		if utf8.ValidString(s) {
			inputs = append(inputs, s)
		}
	}
	type file struct{ vocab, pre, path string }
	var files []file
	dir := t.TempDir()
	trained := filepath.Join(dir, "trained.gguf")
	writeTrainedVocab(t, trained, inputs, 6000)
	// Every preset with the trained vocabulary; the big models' ones with
	// a real vocabulary too.
	all := slices.Sorted(maps.Keys(presets))
	for _, v := range []struct {
		name, src string
		pres      []string
	}{
		{"trained", trained, all},
		{"deepseek-llm", filepath.Join(testdataDir(t), vocabPath("deepseek-llm")), bigModelPresets},
	} {
		for _, pre := range v.pres {
			path := filepath.Join(dir, v.name+"."+pre+".gguf")
			relabel(t, v.src, path, pre)
			files = append(files, file{v.name, pre, path})
		}
	}
	texts, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join("testdata", "llamacpp-tokenize.mjs")}
	for _, f := range files {
		args = append(args, f.path)
	}
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	cmd.Stdin = bytes.NewReader(texts)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("llamacpp-tokenize.mjs: %v\n%s", err, stderr.String())
	}
	var want map[string][][]int
	if err := json.Unmarshal(stdout.Bytes(), &want); err != nil {
		t.Fatalf("reading the script's output: %v\n%s", err, stdout.String())
	}
	for _, f := range files {
		t.Run(f.vocab+"/"+f.pre, func(t *testing.T) {
			ids := want[f.path]
			if len(ids) != len(inputs) {
				t.Fatalf("llama.cpp gave %d results for %d texts", len(ids), len(inputs))
			}
			gf, err := gguf.Open(f.path)
			if err != nil {
				t.Fatal(err)
			}
			defer gf.Close()
			tk, err := FromGGUF(gf.Metadata())
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, in := range inputs {
				if got := tk.Encode(in, false, false); !slices.Equal(got, ids[i]) && !(len(got) == 0 && len(ids[i]) == 0) {
					bad++
					t.Errorf("%q:\n strata   %v\n llama.cpp %v", in, got, ids[i])
				}
			}
			t.Logf("%d/%d texts agree", len(inputs)-bad, len(inputs))
		})
	}
}

// relabel copies the GGUF vocabulary at src to dst with
// tokenizer.ggml.pre set to pre.
func relabel(t *testing.T, src, dst, pre string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := gguf.NewMetadata()
	for _, kv := range f.Metadata().KVs() {
		if err := md.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := md.Set(keyPre, pre); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(out, md, nil); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeTrainedVocab writes a GGUF vocabulary (tokenizer.ggml.* only, with
// GPT-2's architecture keys so that llama.cpp loads it) learned by BPE on
// texts taken whole: the 256 byte tokens, up to maxMerges merges of the
// most frequent adjacent pair (ties to the pair seen first), and a control
// token for BOS/EOS.
func writeTrainedVocab(t *testing.T, path string, texts []string, maxMerges int) {
	t.Helper()
	var tokens []string
	id := map[string]int{}
	intern := func(s string) int {
		if i, ok := id[s]; ok {
			return i
		}
		id[s] = len(tokens)
		tokens = append(tokens, s)
		return len(tokens) - 1
	}
	for b := range 256 {
		intern(byteToUTF8[b])
	}
	// One sequence per text; a pair never spans two texts.
	var seqs [][]int
	for _, s := range texts {
		var seq []int
		for i := 0; i < len(s); i++ {
			seq = append(seq, int(s[i]))
		}
		seqs = append(seqs, seq)
	}
	var merges []string
	for len(merges) < maxMerges {
		count := map[[2]int]int{}
		var order [][2]int
		for _, seq := range seqs {
			for i := 0; i+1 < len(seq); i++ {
				p := [2]int{seq[i], seq[i+1]}
				if count[p] == 0 {
					order = append(order, p)
				}
				count[p]++
			}
		}
		if len(order) == 0 {
			break
		}
		best := order[0]
		for _, p := range order[1:] {
			if count[p] > count[best] {
				best = p
			}
		}
		merges = append(merges, tokens[best[0]]+" "+tokens[best[1]])
		m := intern(tokens[best[0]] + tokens[best[1]])
		for k, seq := range seqs {
			out := seq[:0]
			for i := 0; i < len(seq); i++ {
				if i+1 < len(seq) && seq[i] == best[0] && seq[i+1] == best[1] {
					out = append(out, m)
					i++
					continue
				}
				out = append(out, seq[i])
			}
			seqs[k] = out
		}
	}
	eos := intern("<|endoftext|>")
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = int32(TypeNormal)
	}
	types[eos] = int32(TypeControl)

	f, err := gguf.Open(filepath.Join(testdataDir(t), vocabPath("gpt-2")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := gguf.NewMetadata()
	for _, kv := range f.Metadata().KVs() {
		if !strings.HasPrefix(kv.Key, "tokenizer.") {
			if err := md.Set(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, kv := range []gguf.KV{
		{Key: "general.name", Value: "trained"},
		{Key: keyModel, Value: ModelBPE},
		{Key: keyPre, Value: "gpt-2"},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Array{Type: gguf.TypeString, Values: tokens}},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Array{Type: gguf.TypeInt32, Values: types}},
		{Key: "tokenizer.ggml.merges", Value: gguf.Array{Type: gguf.TypeString, Values: merges}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(eos)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(eos)},
	} {
		if err := md.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(out, md, nil); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("trained vocabulary: %d tokens, %d merges", len(tokens), len(merges))
}

package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"strata/runtime/gguf"
)

// testdataDir returns the shared test data directory: $STRATA_TESTDATA, or
// ../../../shared/testdata relative to this package (the checkout's
// sibling shared/ directory). A missing directory fails the test: the
// vectors are the point of these tests and must not be skipped silently.
func testdataDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("STRATA_TESTDATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "testdata")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("testdata: %v", err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		t.Fatalf("testdata directory %s not found (set STRATA_TESTDATA to the shared testdata directory): %v", abs, err)
	}
	return abs
}

var (
	loadedMu sync.Mutex
	loaded   = map[string]*Tokenizer{}
)

// loadVocab opens a GGUF under testdata (cached across tests).
func loadVocab(t testing.TB, rel string) *Tokenizer {
	t.Helper()
	path := filepath.Join(testdataDir(t), rel)
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if tk, ok := loaded[path]; ok {
		return tk
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	tk, err := FromGGUF(f.Metadata())
	if err != nil {
		t.Fatalf("FromGGUF %s: %v", rel, err)
	}
	loaded[path] = tk
	return tk
}

const vectorSep = "\n__ggml_vocab_test__\n"

// readVectors reads llama.cpp's test-tokenizer-0 .inp/.out pair.
func readVectors(t testing.TB, base string) (inputs []string, outputs [][]int) {
	t.Helper()
	dir := filepath.Join(testdataDir(t), "llama.cpp-vocab")
	inp, err := os.ReadFile(filepath.Join(dir, base+".inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(dir, base+".out"))
	if err != nil {
		t.Fatal(err)
	}
	inputs = strings.Split(string(inp), vectorSep)
	if inputs[len(inputs)-1] != "" {
		t.Fatalf("%s.inp does not end with the separator", base)
	}
	inputs = inputs[:len(inputs)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%s: %d inputs, %d output lines", base, len(inputs), len(lines))
	}
	for _, l := range lines {
		var ids []int
		for _, f := range strings.Fields(l) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out: %v", base, err)
			}
			ids = append(ids, id)
		}
		outputs = append(outputs, ids)
	}
	return inputs, outputs
}

var vocabs = []string{"llama-spm", "phi-3", "gpt-2", "deepseek-coder", "deepseek-llm", "falcon", "mpt", "refact", "starcoder"}

func TestVectors(t *testing.T) {
	for _, name := range vocabs {
		t.Run(name, func(t *testing.T) {
			base := "ggml-vocab-" + name + ".gguf"
			tk := loadVocab(t, filepath.Join("llama.cpp-vocab", base))
			inputs, outputs := readVectors(t, base)
			pass := 0
			for i, in := range inputs {
				got := tk.Encode(in, false, false)
				if !slices.Equal(got, outputs[i]) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, in, got, outputs[i])
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d", name, pass, len(inputs))
		})
	}
}

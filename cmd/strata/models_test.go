package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/internal/testdata"
)

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModelsFindsStores puts stories260K in a fake Hugging Face cache, a
// fake Ollama store and a fake LM Studio folder (HOME overridden), and
// strata models must list all three.
func TestModelsFindsStores(t *testing.T) {
	src := testdata.Path(t, "gguf/stories260K.gguf")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("HF_HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	hf := filepath.Join(home, "hf")
	t.Setenv("HF_HUB_CACHE", hf)
	ol := filepath.Join(home, "ollama")
	t.Setenv("OLLAMA_MODELS", ol)

	rev := strings.Repeat("0123456789", 4)
	repo := filepath.Join(hf, "models--karpathy--tinyllamas")
	etag := strings.Repeat("ab", 32)
	copyFile(t, src, filepath.Join(repo, "blobs", etag))
	os.MkdirAll(filepath.Join(repo, "snapshots", rev), 0o755)
	if err := os.Symlink("../../blobs/"+etag, filepath.Join(repo, "snapshots", rev, "hf-stories.gguf")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(rev), 0o644)

	hex := strings.Repeat("7e", 32)
	copyFile(t, src, filepath.Join(ol, "blobs", "sha256-"+hex))
	man := `{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + hex + `","size":1}]}`
	os.MkdirAll(filepath.Join(ol, "manifests", "registry.ollama.ai", "library", "stories"), 0o755)
	os.WriteFile(filepath.Join(ol, "manifests", "registry.ollama.ai", "library", "stories", "260k"), []byte(man), 0o644)

	copyFile(t, src, filepath.Join(home, ".lmstudio", "models", "someone", "stories-GGUF", "lms-stories.gguf"))

	dataDir := filepath.Join(home, "data")
	out, err := run(t, "models", "--data-dir", dataDir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Models []modelRow }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	fi, _ := os.Stat(src)
	want := map[string]string{"hf-stories": "huggingface", "lms-stories": "lmstudio", "stories:260k": "ollama"}
	for _, m := range got.Models {
		if want[m.Name] != m.Source || !m.Complete || m.Architecture != "llama" || m.Layers != 5 || m.SizeBytes != fi.Size() {
			t.Errorf("unexpected %+v", m)
		}
		delete(want, m.Name)
	}
	if len(want) > 0 {
		t.Errorf("not found: %v\n%s", want, out)
	}

	out, err = run(t, "models", "--data-dir", dataDir)
	if err != nil || !strings.Contains(out, "hf-stories") || !strings.Contains(out, "karpathy/tinyllamas@012345678901") {
		t.Errorf("table: %v\n%s", err, out)
	}
	if out, err := run(t, "models", "--data-dir", dataDir, "--stores", "none"); err != nil || !strings.Contains(out, "no models") {
		t.Errorf("--stores none: %v\n%s", err, out)
	}

	// rm: the Hugging Face copy goes, Ollama's stays.
	if _, err := run(t, "rm", "--data-dir", dataDir, "stories:260k"); err == nil || !strings.Contains(err.Error(), "ollama") {
		t.Errorf("rm ollama model: %v", err)
	}
	if out, err := run(t, "rm", "--data-dir", dataDir, "hf-stories"); err != nil || !strings.Contains(out, "removed hf-stories") {
		t.Fatalf("rm: %v %s", err, out)
	}
	if _, err := os.Stat(repo); !os.IsNotExist(err) {
		t.Errorf("cache repo left: %v", err)
	}
}

// strata synth --split writes parts llama.cpp's way; strata models lists one model.
func TestSynthSplitIsOneModel(t *testing.T) {
	dir := t.TempDir()
	if out, err := run(t, "synth", "--shape", "tinyllama-1.1b", "--type", "Q4_0", "--layers", "2", "--sparse", "--split", "3", "-o", filepath.Join(dir, "tl.gguf")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for i := 1; i <= 3; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("tl-%05d-of-00003.gguf", i))); err != nil {
			t.Error(err)
		}
	}
	out, err := run(t, "models", "--models", dir, "--stores", "none", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Models []modelRow }
	json.Unmarshal([]byte(out), &got)
	if len(got.Models) != 1 || got.Models[0].Name != "tl" || len(got.Models[0].Paths) != 3 || !got.Models[0].Complete || got.Models[0].Layers != 2 || got.Models[0].Quantization != "Q4_0" {
		t.Errorf("models: %s", out)
	}
}

package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/runtime/gguf"
	"strata/runtime/tensor"
)

// writeGGUF writes a tiny llama GGUF (Q8_0 file type) to path; split
// parts get the split.* keys so gguf.Open reads them as one model.
func writeGGUF(t *testing.T, path string, part, parts int) {
	t.Helper()
	md := gguf.NewMetadata()
	md.Set("general.architecture", "llama")
	md.Set("llama.block_count", uint32(2))
	md.Set("general.file_type", uint32(7))
	if parts > 1 {
		md.Set(gguf.KeySplitNo, uint16(part))
		md.Set(gguf.KeySplitCount, uint16(parts))
		md.Set(gguf.KeySplitTensors, int32(parts))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts := []gguf.WriteTensor{{Name: "t" + string(rune('0'+part)), Type: tensor.F32, Dims: []uint64{8}}}
	if err := gguf.Write(f, md, ts); err != nil {
		t.Fatal(err)
	}
}

// fakeHome points HOME and every store variable at a fresh directory.
func fakeHome(t *testing.T) string {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "OLLAMA_MODELS"} {
		t.Setenv(v, "")
	}
	return home
}

func TestStores(t *testing.T) {
	home := fakeHome(t)
	dir := filepath.Join(home, "models")
	writeGGUF(t, filepath.Join(dir, "plain.gguf"), 0, 1)
	for i := range 3 {
		writeGGUF(t, filepath.Join(dir, PartName("big", i+1, 3)), i, 3)
	}
	writeGGUF(t, filepath.Join(dir, PartName("torn", 1, 2)), 0, 2) // part 2 missing
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)

	// Hugging Face cache: a blob, a snapshot link to it, refs/main.
	hf := filepath.Join(home, "hfcache")
	t.Setenv("HF_HUB_CACHE", hf)
	repo := RepoDir(hf, "org/Tiny-GGUF")
	rev := strings.Repeat("ab", 20)
	blob := filepath.Join(repo, "blobs", strings.Repeat("1f", 32))
	writeGGUF(t, blob, 0, 1)
	os.MkdirAll(filepath.Join(repo, "snapshots", rev, "sub"), 0o755)
	os.Symlink("../../../blobs/"+filepath.Base(blob), filepath.Join(repo, "snapshots", rev, "sub", "tiny-Q8_0.gguf"))
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(rev), 0o644)

	// Ollama: a manifest whose model layer is a blob.
	ol := filepath.Join(home, "ollama")
	t.Setenv("OLLAMA_MODELS", ol)
	hex := strings.Repeat("c3", 32)
	writeGGUF(t, filepath.Join(ol, "blobs", "sha256-"+hex), 0, 1)
	man := `{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.license","digest":"sha256:` + strings.Repeat("00", 32) + `","size":1},` +
		`{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + hex + `","size":100}]}`
	os.MkdirAll(filepath.Join(ol, "manifests", "registry.ollama.ai", "library", "llama9"), 0o755)
	os.WriteFile(filepath.Join(ol, "manifests", "registry.ollama.ai", "library", "llama9", "7b"), []byte(man), 0o644)
	os.MkdirAll(filepath.Join(ol, "manifests", "example.com", "me", "mine"), 0o755)
	os.WriteFile(filepath.Join(ol, "manifests", "example.com", "me", "mine", "latest"), []byte(man), 0o644)

	// LM Studio: PUBLISHER/REPO/file.gguf, plus a projector that is no model.
	lms := filepath.Join(home, ".lmstudio", "models", "pub", "Repo-GGUF")
	writeGGUF(t, filepath.Join(lms, "studio-Q8_0.gguf"), 0, 1)
	writeGGUF(t, filepath.Join(lms, "mmproj-studio.gguf"), 0, 1)
	writeGGUF(t, filepath.Join(lms, "plain.gguf"), 0, 1) // shadowed by --models

	c := FromEnv([]string{dir})
	ms, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name, source, where string
		parts, paths        int
		complete, shadowed  bool
	}
	want := []row{
		{"big", SourceDir, dir, 3, 3, true, false},
		{"llama9:7b", SourceOllama, "registry.ollama.ai/library/llama9:7b", 1, 1, true, false},
		{"me-mine:latest", SourceOllama, "example.com/me/mine:latest", 1, 1, true, false},
		{"plain", SourceDir, dir, 1, 1, true, false},
		{"plain", SourceLMStudio, "pub/Repo-GGUF", 1, 1, true, true},
		{"studio-Q8_0", SourceLMStudio, "pub/Repo-GGUF", 1, 1, true, false},
		{"tiny-Q8_0", SourceHuggingFace, "org/Tiny-GGUF@" + rev[:12], 1, 1, true, false},
		{"torn", SourceDir, dir, 2, 1, false, false},
	}
	var got []row
	for _, m := range ms {
		got = append(got, row{m.Name, m.Source, m.Where, m.Parts, len(m.Paths), m.Complete, m.Shadowed})
	}
	if len(got) != len(want) {
		t.Fatalf("models:\n got %v\nwant %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("model %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	for _, name := range []string{"big", "tiny-Q8_0", "llama9:7b", "studio-Q8_0"} {
		m, err := c.Find(name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := Describe(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if info.Architecture != "llama" || info.Quantization != "Q8_0" || info.Layers != 2 {
			t.Errorf("%s: %+v", name, info)
		}
	}
	if p, err := c.Path("big"); err != nil || filepath.Base(p) != "big-00001-of-00003.gguf" {
		t.Errorf("Path(big) = %q, %v", p, err)
	}
	if _, err := c.Path("torn"); err == nil || !strings.Contains(err.Error(), "1 of its 2 parts") {
		t.Errorf("Path(torn) = %v", err)
	}
	if _, err := c.Path("nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "tiny-Q8_0") {
		t.Errorf("Path(nope) = %v", err)
	}
	if _, err := c.Path("../x"); err == nil {
		t.Error("a path is no name")
	}

	var d Digests
	dBig, err := d.Of(ms[0])
	if err != nil || !strings.HasPrefix(dBig, "sha256-fl:") {
		t.Fatalf("digest %q %v", dBig, err)
	}
	if dPlain, _ := d.Of(ms[3]); dPlain == dBig {
		t.Error("different models, same digest")
	}

	// rm: ours go, other tools' stay.
	if _, err := c.Remove("llama9:7b"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("rm ollama: %v", err)
	}
	if _, err := c.Remove("big"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Remove("tiny-Q8_0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(repo); !os.IsNotExist(err) {
		t.Errorf("HF repo folder left behind: %v", err)
	}
	if _, err := c.Find("big"); !errors.Is(err, ErrNotFound) {
		t.Errorf("big still found: %v", err)
	}
	if fs, _ := filepath.Glob(filepath.Join(dir, "big-*")); len(fs) != 0 {
		t.Errorf("parts left: %v", fs)
	}
}

func TestHFHomeOrder(t *testing.T) {
	home := fakeHome(t)
	if got, want := HFCacheDir(), filepath.Join(home, ".cache", "huggingface", "hub"); got != want {
		t.Errorf("default %q, want %q", got, want)
	}
	t.Setenv("HF_HOME", "/hfh")
	if got := HFCacheDir(); got != "/hfh/hub" {
		t.Errorf("HF_HOME: %q", got)
	}
	t.Setenv("HF_HUB_CACHE", "/cache")
	if got := HFCacheDir(); got != "/cache" {
		t.Errorf("HF_HUB_CACHE: %q", got)
	}
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"/m/Kimi-K2-Q4_K-00001-of-00013.gguf": "Kimi-K2-Q4_K",
		"/m/Kimi-K2-Q4_K-00013-of-00013.gguf": "Kimi-K2-Q4_K",
		"stories260K.gguf":                    "stories260K",
		"X.GGUF":                              "X",
		"a-1-of-2.gguf":                       "a-1-of-2",
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

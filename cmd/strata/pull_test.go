package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"strata/internal/testdata"
)

// TestPullThenModels pulls stories260K from a fake hub (HF_ENDPOINT) and
// strata models lists it from the HF cache; progress is plain lines when
// stderr is no terminal.
func TestPullThenModels(t *testing.T) {
	data, err := os.ReadFile(testdata.Path(t, "gguf/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	etag := hex.EncodeToString(sum[:])
	const commit = "fedcba9876543210fedcba9876543210fedcba98"
	const file = "stories260K-Q8_0.gguf"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/models/karpathy/tinyllamas/tree/main":
			fmt.Fprintf(w, `[{"type":"file","path":%q,"size":%d,"lfs":{"oid":%q,"size":%d}}]`, file, len(data), etag, len(data))
		case "/karpathy/tinyllamas/resolve/main/" + file:
			w.Header().Set("X-Repo-Commit", commit)
			w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
			http.Redirect(w, r, "/cdn/blob", http.StatusFound)
		case "/cdn/blob":
			w.Write(data)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("HF_HOME", filepath.Join(home, "hf"))
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("OLLAMA_MODELS", "")
	t.Setenv("HF_ENDPOINT", srv.URL)
	out, err := run(t, "pull", "karpathy/tinyllamas:q8_0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "stories260K-Q8_0.gguf: ") || !strings.Contains(out, "(100%)") || !strings.Contains(out, "stories260K-Q8_0: ") {
		t.Errorf("pull output:\n%s", out)
	}
	out, err = run(t, "models", "--data-dir", filepath.Join(home, "data"))
	if err != nil || !strings.Contains(out, "stories260K-Q8_0") || !strings.Contains(out, "karpathy/tinyllamas@fedcba987654") {
		t.Errorf("models: %v\n%s", err, out)
	}
	if _, err := run(t, "pull", "karpathy/tinyllamas:Q2_K"); err == nil || !strings.Contains(err.Error(), "Q2_K") {
		t.Errorf("missing quant: %v", err)
	}
}

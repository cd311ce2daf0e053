package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strata/internal/testdata"
)

// The ranges a stage needs are what the loader reads: header plus its
// blocks (and embedding or head), a fraction of the file, and each checks
// against the manifest's digests.
func TestManifestNeeded(t *testing.T) {
	src := testdata.Path(t, "gguf/stories260K.gguf")
	c := Catalog{Dirs: []string{filepath.Dir(src)}}
	m, err := c.Find("stories260K")
	if err != nil {
		t.Fatal(err)
	}
	man, err := ManifestOf(m)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(src)
	if len(man.Parts) != 1 || man.Parts[0].Size != int64(len(data)) || man.Parts[0].HeaderBytes <= 0 {
		t.Fatalf("parts %+v", man.Parts)
	}
	var total int64
	for _, stage := range [][2]int{{0, 2}, {2, 4}, {4, 5}} {
		rs, err := man.Needed(stage[0], stage[1], 5)
		if err != nil {
			t.Fatal(err)
		}
		var bytes int64
		names := map[string]bool{}
		for _, r := range rs {
			if err := r.Check(data[r.Offset : r.Offset+r.Size]); err != nil {
				t.Error(err)
			}
			bytes += r.Size
			names[r.What] = true
		}
		total += bytes
		if !names["header"] || names["token_embd.weight"] != (stage[0] == 0) || names["output_norm.weight"] != (stage[1] == 5) {
			t.Errorf("stage %v: %v", stage, names)
		}
		for n := range names {
			if strings.HasPrefix(n, "blk.") && (n[4]-'0' < byte(stage[0]) || n[4]-'0' >= byte(stage[1])) {
				t.Errorf("stage %v needs %s", stage, n)
			}
		}
		t.Logf("layers %v: %d of %d bytes", stage, bytes, len(data))
	}
	// Three stages together read each tensor once, plus three headers.
	if total < int64(len(data)) || total > int64(len(data))+3*man.Parts[0].HeaderBytes {
		t.Errorf("stages read %d bytes of a %d-byte file", total, len(data))
	}
	bad := man.Tensors[3]
	r := Range{Part: bad.Part, Offset: bad.Offset, Size: bad.Size, SHA256: bad.SHA256, What: bad.Name}
	corrupt := append([]byte(nil), data[bad.Offset:bad.Offset+bad.Size]...)
	corrupt[0] ^= 1
	if err := r.Check(corrupt); err == nil {
		t.Error("a corrupt tensor passed its check")
	}
	if _, err := man.Needed(3, 3, 5); err == nil {
		t.Error("empty layer range accepted")
	}
}

package catalog

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/model"
)

// A stage's ranges put into the store make a sparse file that gguf and
// the loader read like the original: the header parses, the layers
// present load and hold the original bytes; the store comes back after a
// restart and says which layers it has.
func TestStoreHoldsLayers(t *testing.T) {
	src := testdata.Path(t, "gguf/stories260K.gguf")
	m, err := Catalog{Dirs: []string{filepath.Dir(src)}}.Find("stories260K")
	if err != nil {
		t.Fatal(err)
	}
	man, err := ManifestOf(m)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(src)
	dir := t.TempDir()
	s, err := OpenStore(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(man); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Path("stories260K"); err == nil {
		t.Fatal("Path before the header is fetched")
	}
	need, err := man.Needed(0, 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	put := func(rs []Range) error {
		var bufs [][]byte
		for _, r := range rs {
			bufs = append(bufs, data[r.Offset:r.Offset+r.Size])
		}
		return s.Put("stories260K", rs, bufs)
	}
	// A corrupt range is refused and not recorded.
	bad := need[1]
	corrupt := append([]byte(nil), data[bad.Offset:bad.Offset+bad.Size]...)
	corrupt[0] ^= 0xff
	if err := s.Put("stories260K", []Range{bad}, [][]byte{corrupt}); err == nil {
		t.Fatal("a corrupt range was accepted")
	}
	if s.Has("stories260K", bad.Part, bad.Offset, bad.Size) {
		t.Fatal("a corrupt range counts as present")
	}
	if err := put(need); err != nil {
		t.Fatal(err)
	}
	if left := s.Missing("stories260K", need); len(left) != 0 {
		t.Fatalf("missing after put: %v", left)
	}

	check := func(s *Store) {
		t.Helper()
		path, _, err := s.Path("stories260K")
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := model.Load(f, 0, 2); err != nil {
			t.Fatal(err)
		}
		for _, r := range need[1:] {
			tn, ok := f.Tensor(r.What)
			if !ok || !bytes.Equal(f.Data(tn), data[r.Offset:r.Offset+r.Size]) {
				t.Fatalf("%s differs from the original", r.What)
			}
		}
		h, ok := s.Holding("stories260K")
		if !ok || h.Layers != 5 || FormatLayers(h.Held) != "0-1" || !h.Embed || h.Head {
			t.Fatalf("holding %+v", h)
		}
		if h.String() != "layers 0-1 +embedding" {
			t.Errorf("holding renders as %q", h)
		}
		var held int64
		for _, r := range need {
			held += r.Size
		}
		if s.Used() != held || held >= int64(len(data)) {
			t.Errorf("store uses %d bytes, ranges are %d of %d", s.Used(), held, len(data))
		}
	}
	check(s)
	// The sparse file takes about the bytes present, not the file's size.
	path, _, _ := s.Path("stories260K")
	if blocks := allocated(t, path); blocks > 0 && blocks > s.Used()+64<<10 {
		t.Errorf("sparse file allocates %d bytes for %d present", blocks, s.Used())
	}
	again, err := OpenStore(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	check(again)

	// The catalogue lists it, in part; Path refuses it; rm removes it.
	c := Catalog{Partial: again}
	ms, _ := c.List()
	if len(ms) != 1 || ms[0].Complete || ms[0].Holding == nil || ms[0].Source != SourcePartial {
		t.Fatalf("listed %+v", ms)
	}
	if _, err := c.Path("stories260K"); !errors.Is(err, ErrPartial) {
		t.Errorf("Path of a partial model: %v", err)
	}
	if _, err := c.Remove("stories260K"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "stories260K")); !os.IsNotExist(err) {
		t.Errorf("rm left %v", err)
	}
}

// The budget drops other models not in use, least recently used first,
// and refuses with numbers when that is not enough.
func TestStoreBudget(t *testing.T) {
	src := testdata.Path(t, "gguf/stories260K.gguf")
	m, _ := Catalog{Dirs: []string{filepath.Dir(src)}}.Find("stories260K")
	man, err := ManifestOf(m)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(src)
	s, err := OpenStore(t.TempDir(), int64(len(data))+1000)
	if err != nil {
		t.Fatal(err)
	}
	fill := func(name string) {
		cp := *man
		cp.Name = name
		if err := s.Reserve(name, int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Begin(&cp); err != nil {
			t.Fatal(err)
		}
		need, _ := cp.Needed(0, 5, 5)
		var bufs [][]byte
		for _, r := range need {
			bufs = append(bufs, data[r.Offset:r.Offset+r.Size])
		}
		if err := s.Put(name, need, bufs); err != nil {
			t.Fatal(err)
		}
	}
	fill("a")
	fill("b") // drops a
	if _, ok := s.Holding("a"); ok {
		t.Error("a was not dropped for b")
	}
	err = s.Reserve("c", int64(len(data)), func(m string) bool { return m == "b" })
	if !errors.Is(err, ErrDiskBudget) || !strings.Contains(err.Error(), "--disk") {
		t.Errorf("reserve past the budget with b in use: %v", err)
	}
}

// A manifest from a peer whose tensor offset plus size wraps around int64
// must not pass as lying inside its part.
func TestManifestValidateOverflow(t *testing.T) {
	sum := strings.Repeat("0", 64)
	man := &Manifest{Name: "m", Parts: []ManifestPart{{Size: 1 << 20, HeaderBytes: 4096, HeaderSHA256: sum}},
		Tensors: []ManifestTensor{{Name: "t", Part: 0, Offset: 8192, Size: math.MaxInt64 - 4096, SHA256: sum}}}
	if err := man.Validate(); err == nil {
		t.Fatal("a tensor of 2^63 bytes inside a 1 MiB part was accepted")
	}
	man.Tensors[0].Size = 1<<20 - 8192
	if err := man.Validate(); err != nil {
		t.Fatalf("a tensor filling the rest of its part: %v", err)
	}
}

// Names come from clients: pattern and control characters are refused
// before any store is searched.
func TestValidNameRefusesPatterns(t *testing.T) {
	for _, n := range []string{"z*", "stories260?", "[s]tories260K", "a\x00b", "a\nb", "../x", ""} {
		if err := ValidName(n); err == nil {
			t.Errorf("ValidName(%q) accepted it", n)
		}
	}
	for _, n := range []string{"stories260K", "llama3.2:3b-instruct-q4_K_M", "hf-org-Model-Q4_K_M"} {
		if err := ValidName(n); err != nil {
			t.Errorf("ValidName(%q): %v", n, err)
		}
	}
	dir := filepath.Dir(testdata.Path(t, "gguf/stories260K.gguf"))
	if _, err := (Catalog{Dirs: []string{dir}}).Path("stories260*"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Path(stories260*): %v, want an invalid-name error", err)
	}
}

// With no --disk, a store's budget is what it holds plus the free space
// less a margin: never the whole disk, never nothing at all.
func TestDefaultBudget(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	b, err := DefaultBudget(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b < 1 || b > free-2<<30 && b != 1 {
		t.Fatalf("budget %d with %d bytes free", b, free)
	}
	held, _ := DefaultBudget(dir, 5<<30)
	if held != max(1, b+5<<30) && b != 1 {
		t.Fatalf("holding 5 GiB: budget %d, without %d", held, b)
	}
	if _, err := DefaultBudget(filepath.Join(dir, "missing"), 0); err == nil {
		t.Fatal("no error for a missing folder")
	}
}

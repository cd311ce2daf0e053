package llamacpp

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The mirror links every entry of node_modules but the AMX build, and
// mirrors the folders on the way to it instead of linking them.
func TestMirrorWithoutAMX(t *testing.T) {
	mods := filepath.Join(t.TempDir(), "node_modules")
	bins := filepath.Join(mods, "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
	for _, p := range []string{
		filepath.Join(bins, amxVariant), filepath.Join(bins, "libggml-cpu-zen4.so"), filepath.Join(bins, "llama-addon.node"),
		filepath.Join(mods, "@node-llama-cpp", "linux-x64", "package.json"),
		filepath.Join(mods, "@node-llama-cpp", "linux-arm64", "package.json"),
		filepath.Join(mods, "node-llama-cpp", "package.json"),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "node_modules")
	skip := map[string]bool{}
	for p := filepath.Join(bins, amxVariant); p != mods; p = filepath.Dir(p) {
		skip[p] = true
	}
	if err := mirror(mods, dst, skip); err != nil {
		t.Fatal(err)
	}
	var links, dirs []string
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(dst, p)
		if d.Type()&os.ModeSymlink != 0 {
			links = append(links, rel)
		} else if d.IsDir() && rel != "." {
			dirs = append(dirs, rel)
		}
		return err
	})
	wantLinks := []string{"@node-llama-cpp/linux-arm64", "@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-zen4.so", "@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node", "@node-llama-cpp/linux-x64/package.json", "node-llama-cpp"}
	wantDirs := []string{"@node-llama-cpp", "@node-llama-cpp/linux-x64", "@node-llama-cpp/linux-x64/bins", "@node-llama-cpp/linux-x64/bins/linux-x64"}
	if !slices.Equal(links, wantLinks) || !slices.Equal(dirs, wantDirs) {
		t.Errorf("mirror:\n links %v\n want %v\n dirs %v\n want %v", links, wantLinks, dirs, wantDirs)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "node-llama-cpp", "package.json")); err != nil || string(b) != filepath.Join(mods, "node-llama-cpp", "package.json") {
		t.Errorf("a linked package reads %q, %v", b, err)
	}
}

// Test processes share one mirror per node_modules: a second call (as
// another process would make) finds the first one's and leaves nothing
// else behind.
func TestMirrorShared(t *testing.T) {
	mods := filepath.Join(t.TempDir(), "node_modules")
	build := filepath.Join(mods, "@node-llama-cpp", "linux-x64", "bins", "linux-x64", amxVariant)
	if err := os.MkdirAll(filepath.Dir(build), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(build, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "strata-node-modules-*"))
	first, err := mirrorOnce(mods, []string{build})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(first)) })
	second, err := mirrorOnce(mods, []string{build})
	if err != nil || second != first {
		t.Fatalf("second mirror %s, %v; want %s", second, err, first)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "strata-node-modules-*"))
	if len(after) != len(before)+1 {
		t.Errorf("%d mirror folders after two calls, %d before", len(after), len(before))
	}
	if _, err := os.Lstat(filepath.Join(first, "@node-llama-cpp", "linux-x64", "bins", "linux-x64", amxVariant)); !os.IsNotExist(err) {
		t.Errorf("the AMX build is in the mirror: %v", err)
	}
}

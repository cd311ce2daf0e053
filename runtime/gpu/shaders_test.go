package gpu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestShadersMatchSources: the committed SPIR-V is what make shaders
// makes of the GLSL sources, with the flags in the Makefile, where the
// glslc that made them (shaders/glslc.version) is installed; every source
// has its SPIR-V and every SPIR-V its source.
func TestShadersMatchSources(t *testing.T) {
	sources, _ := filepath.Glob("shaders/*.comp")
	binaries, _ := filepath.Glob("shaders/*.spv")
	if len(sources) == 0 || len(sources) != len(binaries) {
		t.Fatalf("%d sources, %d SPIR-V files: run make shaders", len(sources), len(binaries))
	}
	glslc, err := exec.LookPath("glslc")
	if err != nil {
		if os.Getenv("STRATA_WANT_VULKAN") != "" {
			t.Fatal("STRATA_WANT_VULKAN is set and there is no glslc (make deps installs it)")
		}
		t.Skip("no glslc here")
	}
	out, err := exec.Command(glslc, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("shaders/glslc.version")
	if err != nil {
		t.Fatal(err)
	}
	if have := strings.SplitN(string(out), "\n", 2)[0]; have != strings.TrimSpace(string(want)) {
		t.Skipf("glslc here is %q, the SPIR-V was made by %q: another compiler makes other bytes", have, strings.TrimSpace(string(want)))
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GLSLC_FLAGS := (.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no GLSLC_FLAGS in the Makefile")
	}
	dir := t.TempDir()
	for _, src := range sources {
		spv := strings.TrimSuffix(src, ".comp") + ".spv"
		committed, err := os.ReadFile(spv)
		if err != nil {
			t.Errorf("%s has no SPIR-V: run make shaders", src)
			continue
		}
		dst := filepath.Join(dir, filepath.Base(spv))
		args := append(strings.Fields(string(m[1])), "-o", dst, src)
		if out, err := exec.Command(glslc, args...).CombinedOutput(); err != nil {
			t.Fatalf("glslc %s: %v\n%s", src, err, out)
		}
		made, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(made, committed) {
			t.Errorf("%s is not what %s compiles to: run make shaders", spv, src)
		}
	}
}

//go:build e2e

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// The architectures of issue 11 split over three real processes generate
// what one process generates: 64 greedy tokens of each tiny synthetic
// shape (6 layers, so each node holds two), in F32, F16 and Q8_0.
func TestE2EArchitecturesAcrossProcesses(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	for _, shape := range []string{"qwen2-tiny", "qwen3-tiny", "qwen3moe-tiny", "deepseek2-tiny", "llama3-tiny"} {
		for _, typ := range []string{"F32", "F16", "Q8_0"} {
			t.Run(shape+"-"+typ, func(t *testing.T) {
				path := filepath.Join(dir, fmt.Sprintf("%s-%s.gguf", shape, typ))
				if out, err := exec.Command(bin, "synth", "--shape", shape, "--type", typ, "--layers", "6", "-o", path).CombinedOutput(); err != nil {
					t.Fatalf("synth: %v\n%s", err, out)
				}
				want := runLocal(t, bin, path, "hello world", 64)
				memory := threeWayMemory(t, bin, path)
				c := newCluster(t, bin, map[string]string{"m": path}, 3, memory, "--context", "256")
				got := runViaAPI(t, bin, c.nodes[2].api, "m", "hello world", 64)
				// Random weights pick byte tokens that make invalid UTF-8; JSON
				// carries each such byte as U+FFFD, strata run prints it raw.
				if want = perByteValidUTF8(want); got != want {
					t.Errorf("3 processes:\n got %q\nwant %q", got, want)
				}
				holders := 0
				for _, m := range clusterStatusOf(t, c.nodes[2].api).Members {
					if len(m.Shards) > 0 {
						holders++
					}
				}
				if holders != 3 {
					t.Errorf("%d nodes hold shards, want 3", holders)
				}
			})
		}
	}
}

// threeWayMemory finds the smallest memory per node (in 5% steps of a
// third of the file) for which strata plan splits the model over three
// nodes with a 256-token context.
func threeWayMemory(t *testing.T, bin, path string) string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for pct := 35; pct <= 90; pct += 5 {
		mem := fmt.Sprintf("%dB", st.Size()*int64(pct)/100)
		out, err := exec.Command(bin, "plan", "--model", path, "--context", "256", "--nodes", "a="+mem+",b="+mem+",c="+mem).CombinedOutput()
		if err == nil && strings.Contains(string(out), "3 stage(s)") {
			return mem
		}
	}
	t.Fatalf("no memory per node splits %s three ways", path)
	return ""
}

// perByteValidUTF8 replaces each byte of invalid UTF-8 with U+FFFD, as
// encoding/json does.
func perByteValidUTF8(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

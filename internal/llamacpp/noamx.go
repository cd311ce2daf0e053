package llamacpp

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sync"
)

// amxVariant is node-llama-cpp's CPU build for processors with AMX. ggml
// loads the best-scoring CPU build found next to its libraries, and on an
// AMX machine that build puts weights in its AMX buffer type, where the
// prebuilt llama.cpp of node-llama-cpp 3.22.1 aborts on deepseek2 graphs
// (GGML_ASSERT(*cur_backend_id != -1) in ggml-backend.cpp): no backend
// takes the latent-attention matrix products of those weights. The
// oracle runs the best build without AMX instead (AVX-512 on such a
// machine), which computes the same logits up to summation order.
const amxVariant = "libggml-cpu-sapphirerapids.so"

var noAMX struct {
	once sync.Once
	dir  string
	err  error
}

// withoutAMX returns a node_modules directory that mirrors mods with
// symbolic links, except that node-llama-cpp's folders of prebuilt
// libraries leave out the AMX CPU build; node must run with
// NODE_PRESERVE_SYMLINKS=1, so that packages resolve inside the mirror.
// It returns mods itself where no folder holds that build. The mirror
// lives in the system's temporary folder under a name made from mods and
// its modification time: made once, by whichever test process comes
// first (built aside, then renamed into place), and reused by the others
// (one folder of links per node_modules, not one per process).
func withoutAMX(mods string) (string, error) {
	builds, err := filepath.Glob(filepath.Join(mods, "@node-llama-cpp", "*", "bins", "*", amxVariant))
	if err != nil || len(builds) == 0 {
		return mods, err
	}
	noAMX.once.Do(func() {
		noAMX.dir, noAMX.err = mirrorOnce(mods, builds)
	})
	return noAMX.dir, noAMX.err
}

// mirrorOnce returns the shared mirror of mods without builds, making it
// if no process has.
func mirrorOnce(mods string, builds []string) (string, error) {
	fi, err := os.Stat(mods)
	if err != nil {
		return "", err
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d", mods, fi.ModTime().UnixNano())
	final := filepath.Join(os.TempDir(), fmt.Sprintf("strata-node-modules-%x", h.Sum64()))
	made := filepath.Join(final, "node_modules")
	if _, err := os.Stat(made); err == nil {
		return made, nil
	}
	dir, err := os.MkdirTemp("", "strata-node-modules-new-")
	if err != nil {
		return "", err
	}
	skip := map[string]bool{}
	for _, b := range builds {
		for p := b; p != mods; p = filepath.Dir(p) {
			skip[p] = true
		}
	}
	if err := mirror(mods, filepath.Join(dir, "node_modules"), skip); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("llamacpp: mirroring %s without %s: %w", mods, amxVariant, err)
	}
	if err := os.Rename(dir, final); err != nil {
		// Another process put its mirror there first: use that one.
		os.RemoveAll(dir)
		if _, statErr := os.Stat(made); statErr != nil {
			return "", fmt.Errorf("llamacpp: placing the mirror of %s: %w", mods, err)
		}
	}
	return made, nil
}

// mirror makes dst a folder of symbolic links to src's entries; an entry
// on the path to a skipped file becomes a folder mirrored the same way,
// and a skipped file is left out.
func mirror(src, dst string, skip map[string]bool) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		switch {
		case !skip[s]:
			err = os.Symlink(s, d)
		case e.IsDir():
			err = mirror(s, d, skip)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"strata/runtime/gguf"
)

// ModelStore finds a model's file by name.
type ModelStore interface {
	// Path returns the path of the model's (first) GGUF file.
	Path(name string) (string, error)
}

// Dir is a ModelStore over a directory of GGUF files: model NAME is
// NAME.gguf, or NAME-00001-of-0000N.gguf when split.
type Dir string

// Path implements ModelStore.
func (d Dir) Path(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return "", fmt.Errorf("invalid model name %q", name)
	}
	p := filepath.Join(string(d), name+".gguf")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if parts, _ := filepath.Glob(filepath.Join(string(d), name+"-00001-of-*.gguf")); len(parts) > 0 {
		sort.Strings(parts)
		return parts[0], nil
	}
	have, _ := d.List()
	return "", fmt.Errorf("model %q not found in %s (it has: %s)", name, string(d), strings.Join(have, ", "))
}

// List returns the model names in the directory.
func (d Dir) List() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(string(d), "*.gguf"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		n := ModelName(f)
		if strings.Contains(filepath.Base(f), "-of-") && !strings.Contains(filepath.Base(f), "-00001-of-") {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// ModelName is a model's name: its file name without .gguf and, for split
// files, without the -0000N-of-0000M part.
func ModelName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), ".gguf")
	if i := strings.LastIndex(base, "-of-"); i > 6 && len(base)-i == 9 && base[i-6] == '-' {
		return base[:i-6]
	}
	return base
}

// Files is a ModelStore over explicit paths, keyed by ModelName.
type Files map[string]string

// Path implements ModelStore.
func (f Files) Path(name string) (string, error) {
	if p, ok := f[name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("model %q is not known here", name)
}

// openModel opens a model file (split parts included).
func openModel(store ModelStore, name string) (*gguf.File, error) {
	p, err := store.Path(name)
	if err != nil {
		return nil, err
	}
	return gguf.Open(p)
}

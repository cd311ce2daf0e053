package actors

import (
	"fmt"

	"strata/runtime/catalog"
	"strata/runtime/gguf"
)

// ModelStore finds a model's file by name. catalog.Catalog is one.
type ModelStore interface {
	// Path returns the path of the model's (first) GGUF file.
	Path(name string) (string, error)
}

var _ ModelStore = catalog.Catalog{}

// Dir is a ModelStore over a directory of GGUF files: model NAME is
// NAME.gguf, or NAME-00001-of-0000N.gguf ... when split.
type Dir string

// Path implements ModelStore.
func (d Dir) Path(name string) (string, error) {
	return catalog.Catalog{Dirs: []string{string(d)}}.Path(name)
}

// List returns the names of the complete models in the directory.
func (d Dir) List() ([]string, error) {
	return catalog.Catalog{Dirs: []string{string(d)}}.Names(), nil
}

// ModelName is a model's name: its file name without .gguf and, for split
// files, without the -0000N-of-0000M part (catalog.Name).
func ModelName(path string) string { return catalog.Name(path) }

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

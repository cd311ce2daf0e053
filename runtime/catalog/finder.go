package catalog

import (
	"fmt"

	"strata/runtime/gguf"
)

// Finder finds a model's file by name. Catalog is one; Files is another.
type Finder interface {
	// Path returns the path of the model's (first) GGUF file.
	Path(name string) (string, error)
}

var _ Finder = Catalog{}

// Files is a Finder over explicit paths, keyed by model name (Name).
type Files map[string]string

// Path implements Finder.
func (f Files) Path(name string) (string, error) {
	if p, ok := f[name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("model %q is not known here", name)
}

// Open opens the model that f finds under name (split parts included).
func Open(f Finder, name string) (*gguf.File, error) {
	p, err := f.Path(name)
	if err != nil {
		return nil, err
	}
	return gguf.Open(p)
}

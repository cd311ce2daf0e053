package actors

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"strata/messages"
	"strata/peers"
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

// announcer lists the complete models of a catalogue for the node's
// heartbeat: one entry per name (a split model is one), with digests
// computed once per file version.
func announcer(c catalog.Catalog, log *slog.Logger) func() []*messages.ModelInfo {
	var digests catalog.Digests
	warned := map[string]bool{}
	return func() []*messages.ModelInfo {
		ms, err := c.List()
		if err != nil {
			if !warned[""] {
				log.Warn("actors: cannot list models", "err", err)
				warned[""] = true
			}
			return nil
		}
		var out []*messages.ModelInfo
		for _, m := range ms {
			if m.Shadowed || !m.Complete {
				continue
			}
			d, err := digests.Of(m)
			if err != nil {
				if !warned[m.Name] {
					log.Warn("actors: cannot digest model", "model", m.Name, "err", err)
					warned[m.Name] = true
				}
				continue
			}
			out = append(out, &messages.ModelInfo{Name: m.Name, SizeBytes: uint64(m.Size), Digest: d})
		}
		return out
	}
}

// catalogWeights serves the complete models of a catalogue to peers over
// the weights protocol, with manifests computed on first request (one
// full read of the model) and kept.
type catalogWeights struct {
	c catalog.Catalog

	mu        sync.Mutex
	manifests map[string][]byte // by model name, path, size and modification time
}

var _ peers.WeightSource = (*catalogWeights)(nil)

// WeightFiles implements peers.WeightSource.
func (w *catalogWeights) WeightFiles(model string) []string {
	m, err := w.c.Find(model)
	if err != nil || !m.Complete {
		return nil
	}
	return m.Paths
}

// WeightManifest implements peers.WeightSource.
func (w *catalogWeights) WeightManifest(model string) ([]byte, error) {
	m, err := w.c.Find(model)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d", model, m.Paths[0], m.Size, m.ModTime.UnixNano())
	w.mu.Lock()
	b, ok := w.manifests[key]
	w.mu.Unlock()
	if ok {
		return b, nil
	}
	man, err := catalog.ManifestOf(m) // reads the whole model: not under the lock
	if err != nil {
		return nil, err
	}
	if b, err = json.Marshal(man); err != nil {
		return nil, err
	}
	w.mu.Lock()
	if w.manifests == nil {
		w.manifests = map[string][]byte{}
	}
	w.manifests[key] = b
	w.mu.Unlock()
	return b, nil
}

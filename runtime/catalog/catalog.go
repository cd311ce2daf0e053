package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Sources of models, in the order a name is looked up.
const (
	SourceDir         = "models"      // a --models directory
	SourceHuggingFace = "huggingface" // the Hugging Face hub cache
	SourceLMStudio    = "lmstudio"    // ~/.lmstudio/models (read-only)
	SourceOllama      = "ollama"      // ~/.ollama/models (read-only)
)

// Errors.
var (
	ErrNotFound = errors.New("catalog: model not found")
	ErrReadOnly = errors.New("catalog: model belongs to another tool")
	// ErrPartial is returned by Path for a model the partial Store holds
	// only some layers of.
	ErrPartial = errors.New("catalog: model held only in part")
)

// Model is one model found on disk.
type Model struct {
	// Name is what the cluster, the API and the CLI call the model.
	Name string
	// Source is one of the Source constants.
	Source string
	// Where says where it lives in words a person can find: a directory,
	// "ORG/REPO@REVISION" in the Hugging Face cache, "MODEL:TAG" in Ollama.
	Where string
	// Paths are the GGUF files present, in part order (one for a plain
	// file). Complete is false when a split model lacks parts.
	Paths []string
	// Parts is how many files the model has when complete.
	Parts int
	// Size is the bytes of the files present.
	Size int64
	// Complete says every part is present.
	Complete bool
	// ReadOnly models belong to another tool; strata rm leaves them.
	ReadOnly bool
	// Shadowed is set on a model whose name an earlier store already uses.
	Shadowed bool
	// ModTime is the newest modification time of the files.
	ModTime time.Time
	// Holding, for a model of the partial Store, says which layers are
	// present (Size counts only their bytes); nil for files.
	Holding *Holding
}

// Catalog is where to look for models. Empty fields are not searched;
// FromEnv fills them the way other tools find their stores.
type Catalog struct {
	// Dirs hold GGUF files directly (not their subdirectories).
	Dirs []string
	// HFCache is the Hugging Face hub cache: models--ORG--NAME/{blobs,snapshots,refs}.
	HFCache string
	// LMStudio is LM Studio's models folder: PUBLISHER/REPO/*.gguf.
	LMStudio string
	// Ollama is Ollama's models folder: manifests/ and blobs/.
	Ollama string
	// Partial holds the models this node has only some layers of
	// (fetched from peers); listed last, never Complete.
	Partial *Store
}

// FromEnv returns the catalogue of dirs plus the stores of this user:
// the Hugging Face cache (HFCacheDir), $OLLAMA_MODELS or ~/.ollama/models,
// and ~/.lmstudio/models.
func FromEnv(dirs []string) Catalog {
	c := Catalog{Dirs: dirs, HFCache: HFCacheDir()}
	home, _ := os.UserHomeDir()
	if d := os.Getenv("OLLAMA_MODELS"); d != "" {
		c.Ollama = d
	} else if home != "" {
		c.Ollama = filepath.Join(home, ".ollama", "models")
	}
	if home != "" {
		c.LMStudio = filepath.Join(home, ".lmstudio", "models")
	}
	return c
}

// HFCacheDir is the Hugging Face hub cache as huggingface_hub finds it:
// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
// ($XDG_CACHE_HOME/huggingface/hub when that is set).
func HFCacheDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	return filepath.Join(HFHome(), "hub")
}

// HFHome is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
func HFHome() string {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".cache", "huggingface")
	}
	return filepath.Join(home, ".cache", "huggingface")
}

// List returns every model found, sorted by name; when two stores have
// the same name, the later one is marked Shadowed. Unreadable stores are
// skipped: a missing Ollama folder is not an error.
func (c Catalog) List() ([]Model, error) {
	var all []Model
	for _, d := range c.Dirs {
		ms, err := scanDir(d, false)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for i := range ms {
			ms[i].Source, ms[i].Where = SourceDir, d
		}
		all = append(all, ms...)
	}
	if c.HFCache != "" {
		all = append(all, scanHF(c.HFCache)...)
	}
	if c.LMStudio != "" {
		ms, _ := scanDir(c.LMStudio, true)
		for i := range ms {
			ms[i].Source, ms[i].ReadOnly = SourceLMStudio, true
			if rel, err := filepath.Rel(c.LMStudio, filepath.Dir(ms[i].Paths[0])); err == nil {
				ms[i].Where = filepath.ToSlash(rel)
			}
		}
		all = append(all, ms...)
	}
	if c.Ollama != "" {
		all = append(all, scanOllama(c.Ollama)...)
	}
	if c.Partial != nil {
		all = append(all, c.Partial.List()...)
	}
	seen := map[string]bool{}
	for i := range all {
		all[i].Shadowed = seen[all[i].Name]
		seen[all[i].Name] = true
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all, nil
}

// Names returns the names of the complete models, sorted, each once.
func (c Catalog) Names() []string {
	ms, _ := c.List()
	var out []string
	for _, m := range ms {
		if !m.Shadowed && m.Complete {
			out = append(out, m.Name)
		}
	}
	return out
}

// Find returns the model called name (the first store's, when several have it).
func (c Catalog) Find(name string) (Model, error) {
	if err := ValidName(name); err != nil {
		return Model{}, err
	}
	ms, err := c.List()
	if err != nil {
		return Model{}, err
	}
	var have []string
	for _, m := range ms {
		if m.Name == name && !m.Shadowed {
			return m, nil
		}
		if !m.Shadowed {
			have = append(have, m.Name)
		}
	}
	if len(have) == 0 {
		return Model{}, fmt.Errorf("%w: %q (no models here; strata pull one, or pass --models)", ErrNotFound, name)
	}
	return Model{}, fmt.Errorf("%w: %q (have: %s)", ErrNotFound, name, strings.Join(have, ", "))
}

// Path returns the path of the model's first (or only) GGUF file, which
// gguf.Open reads the other parts from; an incomplete split is an error.
func (c Catalog) Path(name string) (string, error) {
	m, err := c.Find(name)
	if err != nil {
		return "", err
	}
	if m.Holding != nil {
		return "", fmt.Errorf("%w: %q (%s, in %s)", ErrPartial, name, m.Holding, m.Where)
	}
	if !m.Complete {
		return "", fmt.Errorf("model %q has %d of its %d parts (in %s)", name, len(m.Paths), m.Parts, m.Where)
	}
	return m.Paths[0], nil
}

// Remove deletes the model called name: its files in a --models
// directory, or its files (snapshot links and the blobs no other link
// uses) in the Hugging Face cache. Models of Ollama and LM Studio are
// theirs to remove.
func (c Catalog) Remove(name string) (Model, error) {
	m, err := c.Find(name)
	if err != nil {
		return Model{}, err
	}
	if m.ReadOnly {
		return m, fmt.Errorf("%w: %q is in %s's store (%s); remove it with that tool", ErrReadOnly, name, m.Source, m.Where)
	}
	switch m.Source {
	case SourceHuggingFace:
		return m, removeHF(c.HFCache, m)
	case SourcePartial:
		return m, c.Partial.Remove(name)
	default:
		for _, p := range m.Paths {
			if err := os.Remove(p); err != nil {
				return m, err
			}
		}
	}
	return m, nil
}

// scanDir groups the GGUF files of dir (and its subdirectories when
// deep) into models: a plain file is a model, split parts with one name in
// one directory are one.
func scanDir(dir string, deep bool) ([]Model, error) {
	var files []string
	if deep {
		root := filepath.Clean(dir)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == root {
					return err
				}
				return nil
			}
			if d.IsDir() && p != root && strings.Count(p[len(root):], string(filepath.Separator)) > 4 {
				return filepath.SkipDir
			}
			if !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return group(files), nil
}

// group turns file paths into models: .gguf regular files (symlinks
// followed), split parts joined, projector files (mmproj, for vision
// models) left out.
func group(files []string) []Model {
	type key struct{ dir, name string }
	byKey := map[key]*Model{}
	parts := map[key]map[int]string{}
	var order []key
	for _, p := range files {
		base := filepath.Base(p)
		if !strings.EqualFold(filepath.Ext(base), ".gguf") || strings.Contains(strings.ToLower(base), "mmproj") {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		k := key{filepath.Dir(p), Name(p)}
		m, ok := byKey[k]
		if !ok {
			m = &Model{Name: k.name, Parts: 1}
			byKey[k] = m
			parts[k] = map[int]string{}
			order = append(order, k)
		}
		n, count, split := Split(p)
		if !split {
			n, count = 1, 1
		}
		if _, dup := parts[k][n]; dup || (len(parts[k]) > 0 && m.Parts != count) {
			continue // NAME.gguf beside NAME-00001-of-00002.gguf: keep the first
		}
		m.Parts = count
		parts[k][n] = p
		m.Size += fi.Size()
		if fi.ModTime().After(m.ModTime) {
			m.ModTime = fi.ModTime()
		}
	}
	out := make([]Model, 0, len(order))
	for _, k := range order {
		m := byKey[k]
		for n := 1; n <= m.Parts; n++ {
			if p, ok := parts[k][n]; ok {
				m.Paths = append(m.Paths, p)
			}
		}
		m.Complete = len(m.Paths) == m.Parts
		out = append(out, *m)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

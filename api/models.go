package api

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/modelinfo"
	"strata/runtime/tokenizer"
)

// ModelInfo describes one model the API can serve. The JSON form is an
// OpenAI model object with strata's extra fields (which OpenAI clients
// ignore).
type ModelInfo struct {
	ID            string `json:"id"`
	Object        string `json:"object"` // "model"
	Created       int64  `json:"created"`
	OwnedBy       string `json:"owned_by"`
	Architecture  string `json:"architecture,omitempty"`
	Layers        int    `json:"layers,omitempty"`
	ContextLength int    `json:"context_length,omitempty"` // most positions (prompt + generated) one request may use
	SizeBytes     uint64 `json:"size_bytes,omitempty"`     // weight bytes of the whole model
	ChatTemplate  bool   `json:"chat_template"`            // the GGUF carries tokenizer.chat_template
}

// Models is what the API needs to know about models beyond running them:
// which exist, and each one's tokenizer (to render chat templates, count
// and bound prompt tokens). Implementations are safe for concurrent use.
type Models interface {
	// List returns the models that can be served now, sorted by ID.
	List() []ModelInfo
	// Lookup returns a model's description and tokenizer; an unknown name
	// gives an error wrapping ErrModelNotFound.
	Lookup(name string) (ModelInfo, *tokenizer.Tokenizer, error)
}

// infoOf is the API's view of a model the node describes (in), whose
// file is at path.
func infoOf(name string, in *modelinfo.Info, path string, ctxCap int) ModelInfo {
	info := ModelInfo{ID: name, Object: "model", OwnedBy: "strata", Architecture: in.Arch,
		Layers: in.Config.Layers, ContextLength: in.Config.Context, SizeBytes: in.SizeBytes, ChatTemplate: in.Tokenizer.ChatTemplate() != ""}
	if ctxCap > 0 && (info.ContextLength <= 0 || ctxCap < info.ContextLength) {
		info.ContextLength = ctxCap
	}
	if st, err := os.Stat(path); err == nil {
		info.Created = st.ModTime().Unix()
	}
	return info
}

// Local serves one model on this machine through the single-node engine:
// it is a Generator, a Models and a cluster status source, for tests and
// for `strata chat` without a cluster.
type Local struct {
	name string
	e    *engine.Engine
	info ModelInfo
}

var (
	_ Generator = (*Local)(nil)
	_ Models    = (*Local)(nil)
)

// NewLocal serves e under the model name (catalog.Name of its path
// when name is ""). The caller keeps ownership of e.
func NewLocal(e *engine.Engine, name string) (*Local, error) {
	if name == "" {
		name = catalog.Name(e.File.Paths()[0])
	}
	return &Local{name: name, e: e, info: infoOf(name, e.Info, e.File.Paths()[0], e.ContextLength())}, nil
}

// Generate implements Generator on the engine.
func (l *Local) Generate(ctx context.Context, req engine.Request, onToken func(engine.Token) error) (engine.Result, error) {
	if req.Model != l.name {
		return engine.Result{}, fmt.Errorf("%w: %q (this node serves %q)", ErrModelNotFound, req.Model, l.name)
	}
	return l.e.Generate(ctx, req, onToken)
}

// List implements Models.
func (l *Local) List() []ModelInfo { return []ModelInfo{l.info} }

// Lookup implements Models.
func (l *Local) Lookup(name string) (ModelInfo, *tokenizer.Tokenizer, error) {
	if name != l.name {
		return ModelInfo{}, nil, fmt.Errorf("%w: %q", ErrModelNotFound, name)
	}
	return l.info, l.e.Tokenizer, nil
}

// Status describes this machine as a one-node cluster holding every layer.
func (l *Local) Status() ClusterStatus {
	return ClusterStatus{Self: "local", Members: []MemberStatus{{
		PeerID: "local", MemoryBytes: l.info.SizeBytes, Models: []string{l.name},
		Shards: []ShardStatus{{Model: l.name, Layers: [2]int{0, l.info.Layers}}},
	}}}
}

// FileModels is a Models over GGUF files found through an
// catalog.Finder, for a node whose Generator is an origin.Origin: the
// origin node has the model file (it tokenizes), so the API takes the
// tokenizer and shape from the node's description of it (Info). Without
// one, a file is opened, read and closed on first use; what was read is
// kept, by the file's resolved path (names that reach one file share
// it), for the few models used last.
type FileModels struct {
	// Info, when set, describes a model from a file someone else keeps
	// (the node's stage.Host.Info): the API then tokenizes with the very
	// tokenizer the node's sessions use. Nil: FileModels reads the file
	// itself.
	Info func(name string) (*modelinfo.Info, error)

	store   catalog.Finder
	names   func() []string
	context int
	max     int

	mu     sync.Mutex
	byPath map[string]*fileModel
	clock  uint64 // counts lookups, for least-recently-used eviction
}

// fileModel is what was read from one file, and the file's identity then.
type fileModel struct {
	info ModelInfo
	tok  *tokenizer.Tokenizer
	size int64
	mod  time.Time
	used uint64
}

// maxFileModels is how many models' tokenizers FileModels keeps.
const maxFileModels = 8

var _ Models = (*FileModels)(nil)

// NewFileModels lists the models names returns (e.g. the union of the
// models the members hold) and reads them through store. contextCap
// bounds each model's context length as the cluster does
// (origin.Options.PlanContext; 0 = the model's, at most model.DefaultContext).
func NewFileModels(store catalog.Finder, names func() []string, contextCap int) *FileModels {
	if contextCap <= 0 {
		contextCap = model.DefaultContext
	}
	return &FileModels{store: store, names: names, context: contextCap, max: maxFileModels, byPath: map[string]*fileModel{}}
}

// List implements Models: the names that can be read, sorted.
func (m *FileModels) List() []ModelInfo {
	names := m.names()
	sort.Strings(names)
	var out []ModelInfo
	for i, n := range names {
		if i > 0 && names[i-1] == n {
			continue
		}
		if info, _, err := m.Lookup(n); err == nil {
			out = append(out, info)
		}
	}
	return out
}

// Lookup implements Models. The name is resolved on every call (no lock
// is held meanwhile: a store may fetch headers from a peer); the file is
// read only when its path is new or the file changed.
func (m *FileModels) Lookup(name string) (ModelInfo, *tokenizer.Tokenizer, error) {
	if err := catalog.ValidName(name); err != nil {
		return ModelInfo{}, nil, fmt.Errorf("%w: %v", ErrModelNotFound, err)
	}
	path, err := m.store.Path(name)
	if errors.Is(err, catalog.ErrDiskBudget) {
		// The model is in the cluster, but this node has no room for
		// even its header: not a 404, another node can serve it.
		return ModelInfo{}, nil, fmt.Errorf("%w: %v", ErrNoRoom, err)
	}
	if err != nil {
		return ModelInfo{}, nil, fmt.Errorf("%w: %v", ErrModelNotFound, err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	st, err := os.Stat(path)
	if err != nil {
		return ModelInfo{}, nil, fmt.Errorf("%w: %v", ErrModelNotFound, err)
	}
	if m.Info != nil {
		in, err := m.Info(name)
		if err != nil {
			return ModelInfo{}, nil, err
		}
		return infoOf(name, in, path, m.context), in.Tokenizer, nil
	}
	m.mu.Lock()
	m.clock++
	if fm, ok := m.byPath[path]; ok && fm.size == st.Size() && fm.mod.Equal(st.ModTime()) {
		fm.used = m.clock
		info := fm.info
		m.mu.Unlock()
		info.ID = name
		return info, fm.tok, nil
	}
	m.mu.Unlock()

	f, err := gguf.Open(path)
	if err != nil {
		return ModelInfo{}, nil, err
	}
	in, err := modelinfo.Read(f)
	f.Close() // the description holds copies of what it needs
	if err != nil {
		return ModelInfo{}, nil, err
	}
	info, tok := infoOf(name, in, path, m.context), in.Tokenizer
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clock++
	m.byPath[path] = &fileModel{info: info, tok: tok, size: st.Size(), mod: st.ModTime(), used: m.clock}
	for len(m.byPath) > m.max {
		var oldest string
		for p, fm := range m.byPath {
			if oldest == "" || fm.used < m.byPath[oldest].used {
				oldest = p
			}
		}
		delete(m.byPath, oldest)
	}
	return info, tok, nil
}

// held is how many models' tokenizers are kept now.
func (m *FileModels) held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byPath)
}

// Close forgets what Lookup read (it holds no files open).
func (m *FileModels) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byPath = map[string]*fileModel{}
	return nil
}

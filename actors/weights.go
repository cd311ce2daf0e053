package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"strata/actors/origin"
	"strata/messages"
	"strata/peers"
	"strata/peers/weights"
	"strata/runtime/catalog"
)

// fetchBatch bounds the bytes of ranges held in memory at once while
// fetching: they are fetched, checked and written a batch at a time.
const fetchBatch = 64 << 20

// headerTimeout bounds fetching a model's manifest and headers when a
// caller without a context (catalog.Finder.Path) needs them.
const headerTimeout = 2 * time.Minute

// Weights finds the bytes of models for one node: the catalogue's
// complete files, else the ranges kept in the node's partial store,
// fetched from peers that hold them (and checked against the digests of a
// holder's manifest) when a shard or a session needs them. It is the
// node's catalog.Finder and what it serves over weights.Protocol.
type Weights struct {
	cat   catalog.Catalog // cat.Partial is store
	store *catalog.Store  // nil: this node fetches nothing
	log   *slog.Logger

	// Set once the peer is up.
	peers *peers.Node
	dir   origin.Directory
	// busy reports models the node uses now (not to be dropped for room).
	busy func(model string) bool
	// hub, when set, reads ranges no peer holds from the Hugging Face hub
	// (for models whose manifest names their repository).
	hub HubReader
	// hubBytes counts the bytes read from the hub.
	hubBytes atomic.Int64

	// progress, when set, hears each fetch's bytes done of total (after
	// every batch).
	progress func(model string, done, total int64)

	mu        sync.Mutex
	fetches   map[string]*FetchProgress // fetches in flight, by model
	manifests map[string]*manifestOnce  // of complete models, by name, path, size and mtime
	locks     map[string]*modelLock     // one fetch per model at a time; only while one is wanted
}

var (
	_ catalog.Finder = (*Weights)(nil)
	_ weights.Source = (*Weights)(nil)
)

func newWeights(cat catalog.Catalog, log *slog.Logger) *Weights {
	return &Weights{cat: cat, store: cat.Partial, log: log, manifests: map[string]*manifestOnce{}, locks: map[string]*modelLock{}, fetches: map[string]*FetchProgress{}}
}

// FetchProgress is a fetch of a model's layers from peers in flight.
type FetchProgress struct {
	Model       string
	Done, Total int64
	Started     time.Time
}

// Fetching lists the fetches in flight, by model name.
func (w *Weights) Fetching() []FetchProgress {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]FetchProgress, 0, len(w.fetches))
	for _, f := range w.fetches {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b FetchProgress) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// tracked registers a fetch of total bytes of model and returns the
// function that reports bytes done (and, with total, its end).
func (w *Weights) tracked(model string, total int64) (advance func(n int64), end func()) {
	w.mu.Lock()
	f := &FetchProgress{Model: model, Total: total, Started: time.Now()}
	w.fetches[model] = f // one fetch per model at a time (the model's lock)
	w.mu.Unlock()
	report := func(done int64) {
		if w.progress != nil {
			w.progress(model, done, total)
		}
	}
	report(0)
	return func(n int64) {
			w.mu.Lock()
			f.Done += n
			done := f.Done
			w.mu.Unlock()
			report(done)
		}, func() {
			w.mu.Lock()
			delete(w.fetches, model)
			w.mu.Unlock()
		}
}

// HubReader reads a byte range of a file of a Hugging Face repository at
// a revision (hfhub.Client is one).
type HubReader interface {
	ReadRange(ctx context.Context, repo, revision, file string, off int64, dst []byte) error
}

// HubFetched is the bytes of weights this node read from the hub.
func (w *Weights) HubFetched() int64 { return w.hubBytes.Load() }

// Store is the node's partial store (nil when it keeps no fetched ranges).
func (w *Weights) Store() *catalog.Store { return w.store }

// Path implements catalog.Finder: a complete file's path, else the partial
// store's, after fetching the model's headers (metadata, tokenizer and
// tensor table: what a session's origin and the loader read) from a peer.
func (w *Weights) Path(name string) (string, error) {
	p, _, err := w.PathVersion(name)
	return p, err
}

func (w *Weights) PathVersion(name string) (string, int, error) {
	p, err := w.cat.Path(name)
	if err == nil {
		return p, 0, nil
	}
	if w.store == nil || w.peers == nil || !errors.Is(err, catalog.ErrNotFound) && !errors.Is(err, catalog.ErrPartial) {
		return "", 0, err
	}
	if _, _, serr := w.store.Path(name); serr != nil {
		ctx, cancel := context.WithTimeout(context.Background(), headerTimeout)
		defer cancel()
		if ferr := w.ensure(ctx, name, nil); ferr != nil {
			if errors.Is(ferr, errNoSource) {
				return "", 0, err
			}
			return "", 0, ferr
		}
	}
	return w.store.Path(name)
}

// errNoSource says no peer announces the model at all.
var errNoSource = errors.New("no peer holds the model")

// Ensure makes sure the node has what a shard of layers [first, end) of
// a model of layers layers needs, fetching the missing ranges from peers.
// It returns the bytes fetched.
func (w *Weights) Ensure(ctx context.Context, name string, first, end, layers int) (int64, error) {
	if _, err := w.cat.Path(name); err == nil {
		return 0, nil // the complete file is here
	}
	if w.store == nil || w.peers == nil {
		return 0, fmt.Errorf("model %q is not on this node, which keeps no fetched weights (no data directory)", name)
	}
	var fetched int64
	err := w.ensureWith(ctx, name, func(man *catalog.Manifest) ([]catalog.Range, error) {
		return man.Needed(first, end, layers)
	}, &fetched)
	return fetched, err
}

func (w *Weights) ensure(ctx context.Context, name string, fetched *int64) error {
	return w.ensureWith(ctx, name, func(man *catalog.Manifest) ([]catalog.Range, error) {
		var out []catalog.Range
		for i, p := range man.Parts {
			out = append(out, catalog.Range{Part: i, Size: p.HeaderBytes, SHA256: p.HeaderSHA256, What: "header"})
		}
		return out, nil
	}, fetched)
}

// modelLock is one model's fetch lock and how many hold or wait for it.
type modelLock struct {
	sync.Mutex
	users int
}

// lock takes the model's fetch lock; the entry is dropped when its last
// user unlocks, so names that came and went keep no memory.
func (w *Weights) lock(name string) func() {
	w.mu.Lock()
	l, ok := w.locks[name]
	if !ok {
		l = &modelLock{}
		w.locks[name] = l
	}
	l.users++
	w.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		w.mu.Lock()
		if l.users--; l.users == 0 {
			delete(w.locks, name)
		}
		w.mu.Unlock()
	}
}

func (w *Weights) ensureWith(ctx context.Context, name string, needed func(*catalog.Manifest) ([]catalog.Range, error), fetched *int64) error {
	if err := catalog.ValidName(name); err != nil {
		return err
	}
	defer w.lock(name)()
	members := w.others()
	man, err := w.manifest(ctx, name, members)
	if err != nil {
		return err
	}
	need, err := needed(man)
	if err != nil {
		return err
	}
	missing := w.store.Missing(name, need)
	if len(missing) == 0 {
		return nil
	}
	var total int64
	for _, r := range missing {
		total += r.Size
	}
	if err := w.store.Reserve(name, total, w.busy); err != nil {
		return err
	}
	// Ranges go to the peers that hold them; ranges with the same holders
	// are fetched together, a batch at a time.
	groups := map[string][]catalog.Range{}
	holdersOf := map[string][]peer.ID{}
	var keys []string
	var fromHub []catalog.Range
	for _, r := range missing {
		hs := rangeHolders(name, r, members)
		if len(hs) == 0 && man.Hub != nil && w.hub != nil {
			fromHub = append(fromHub, r)
			continue
		}
		if len(hs) == 0 {
			hint := ""
			if man.Hub == nil {
				hint = " (and the model did not come from the Hugging Face hub, so it cannot be read from there)"
			}
			return fmt.Errorf("no peer holds %s of %s (part %d, %d bytes at %d): the nodes that had it are gone%s", r.What, name, r.Part+1, r.Size, r.Offset, hint)
		}
		var ids []string
		var pids []peer.ID
		for _, h := range hs {
			id, err := peer.Decode(h)
			if err != nil {
				continue
			}
			ids = append(ids, h)
			pids = append(pids, id)
		}
		k := strings.Join(ids, ",")
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
			holdersOf[k] = pids
		}
		groups[k] = append(groups[k], r)
	}
	advance, end := w.tracked(name, total)
	defer end()
	start := time.Now()
	for _, k := range keys {
		rs := groups[k]
		for len(rs) > 0 {
			n, bytes := 0, int64(0)
			for n < len(rs) && (n == 0 || bytes+rs[n].Size <= fetchBatch) {
				bytes += rs[n].Size
				n++
			}
			if err := w.fetch(ctx, name, holdersOf[k], rs[:n]); err != nil {
				return err
			}
			if fetched != nil {
				*fetched += bytes
			}
			advance(bytes)
			rs = rs[n:]
		}
	}
	for _, r := range fromHub {
		if err := w.fetchHub(ctx, man, r); err != nil {
			return err
		}
		if fetched != nil {
			*fetched += r.Size
		}
		advance(r.Size)
	}
	if w.log != nil {
		w.log.Info("fetched weights", "from_hub", len(fromHub), "model", name, "ranges", len(missing), "bytes", total, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// fetch gets ranges from holders (several at once), checks each against
// its digest and writes it to the store.
func (w *Weights) fetch(ctx context.Context, name string, holders []peer.ID, rs []catalog.Range) error {
	wr := make([]weights.Range, len(rs))
	data := make([][]byte, len(rs))
	for i, r := range rs {
		data[i] = make([]byte, r.Size)
		wr[i] = weights.Range{Part: r.Part, Offset: r.Offset, Data: data[i]}
	}
	if err := w.peers.Weights().Fetch(ctx, holders, name, wr, func(i int) error { return rs[i].Check(data[i]) }); err != nil {
		return fmt.Errorf("fetching %s: %w", name, err)
	}
	return w.store.Put(name, rs, data)
}

// fetchHub reads one range from the hub by HTTP Range, checks it and
// writes it to the store.
func (w *Weights) fetchHub(ctx context.Context, man *catalog.Manifest, r catalog.Range) error {
	h := man.Hub
	data := make([]byte, r.Size)
	if err := w.hub.ReadRange(ctx, h.Repo, h.Revision, h.Files[r.Part], r.Offset, data); err != nil {
		return fmt.Errorf("no peer holds %s of %s, and the hub (%s@%s) did not give it: %w", r.What, man.Name, h.Repo, h.Revision, err)
	}
	w.hubBytes.Add(r.Size)
	if err := w.store.Put(man.Name, []catalog.Range{r}, [][]byte{data}); err != nil {
		return fmt.Errorf("%s from the hub: %w", r.What, err)
	}
	return nil
}

// manifest returns the model's manifest: the store's, else one asked of a
// holder (complete holders first) and kept.
func (w *Weights) manifest(ctx context.Context, name string, members []origin.Member) (*catalog.Manifest, error) {
	if man, ok := w.store.Manifest(name); ok {
		return man, nil
	}
	var complete, partial []string
	for _, m := range members {
		if slices.Contains(m.Models, name) {
			complete = append(complete, m.ID)
		} else if _, ok := m.Partial[name]; ok {
			partial = append(partial, m.ID)
		}
	}
	if len(complete)+len(partial) == 0 {
		return nil, fmt.Errorf("%w: %q", errNoSource, name)
	}
	var errs []error
	for _, h := range append(complete, partial...) {
		id, err := peer.Decode(h)
		if err != nil {
			continue
		}
		b, err := w.peers.Weights().Manifest(ctx, id, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var man catalog.Manifest
		if err := json.Unmarshal(b, &man); err != nil {
			errs = append(errs, fmt.Errorf("manifest of %s from %s: %w", name, h, err))
			continue
		}
		if err := man.Validate(); err != nil || man.Name != name {
			errs = append(errs, fmt.Errorf("manifest of %s from %s: %v", name, h, err))
			continue
		}
		if err := w.store.Begin(&man); err != nil {
			return nil, err
		}
		return &man, nil
	}
	return nil, fmt.Errorf("no peer gave the manifest of %s: %w", name, errors.Join(errs...))
}

// others are the members of the view other than this node.
func (w *Weights) others() []origin.Member {
	if w.dir == nil {
		return nil
	}
	self := w.peers.ID().String()
	var out []origin.Member
	for _, m := range w.dir.Members() {
		if m.ID != self {
			out = append(out, m)
		}
	}
	return out
}

// rangeHolders are the members that announce a range of model: those
// with the complete model, and those holding in part the layer (or the
// embedding, or head) the range belongs to; headers and tensors outside
// blocks every partial holder has. Complete holders come first.
func rangeHolders(model string, r catalog.Range, members []origin.Member) []string {
	var complete, partial []string
	for _, m := range members {
		if slices.Contains(m.Models, model) {
			complete = append(complete, m.ID)
			continue
		}
		h, ok := m.Partial[model]
		if !ok {
			continue
		}
		var has bool
		switch {
		case r.What == "header":
			has = true
		case strings.HasPrefix(r.What, "blk."):
			n, err := strconv.Atoi(strings.SplitN(r.What[4:], ".", 2)[0])
			_, found := slices.BinarySearch(h.Held, n)
			has = err == nil && found
		case r.What == "token_embd.weight":
			has = h.Embed
		case r.What == "output_norm.weight", r.What == "output.weight":
			has = h.Head
		default:
			has = true
		}
		if has {
			partial = append(partial, m.ID)
		}
	}
	sort.Strings(complete)
	sort.Strings(partial)
	return append(complete, partial...)
}

// WeightFile implements weights.Source: complete files, and the
// verified ranges of the partial store.
func (w *Weights) WeightFile(model string, part int, off, size int64) (string, error) {
	if m, err := w.cat.Find(model); err == nil && m.Complete && m.Holding == nil {
		if part < 0 || part >= len(m.Paths) {
			return "", fmt.Errorf("model %q has %d parts, not %d", model, len(m.Paths), part+1)
		}
		return m.Paths[part], nil
	}
	if w.store != nil && w.store.Has(model, part, off, size) {
		if p, ok := w.store.PartPath(model, part); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("part %d of %q, %d bytes at %d, is not held here", part+1, model, size, off)
}

// WeightManifest implements weights.Source: for a complete model,
// computed on first request (one full read) and kept; for a partial one,
// the manifest its ranges were checked against.
func (w *Weights) WeightManifest(model string) ([]byte, error) {
	m, err := w.cat.Find(model)
	if err == nil && m.Holding != nil {
		man, ok := w.store.Manifest(model)
		if !ok {
			return nil, fmt.Errorf("no manifest of %q here", model)
		}
		return json.Marshal(man)
	}
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d", model, m.Paths[0], m.Size, m.ModTime.UnixNano())
	w.mu.Lock()
	e, ok := w.manifests[key]
	if !ok {
		e = &manifestOnce{}
		w.manifests[key] = e
	}
	w.mu.Unlock()
	// One full read however many peers ask at once: the others wait for it
	// (a peer must not be able to make the node hash a model N times).
	e.once.Do(func() {
		man, err := catalog.ManifestOf(m) // reads the whole model: not under w.mu
		if err == nil {
			e.b, err = json.Marshal(man)
		}
		e.err = err
	})
	if e.err != nil {
		w.mu.Lock()
		if w.manifests[key] == e {
			delete(w.manifests, key) // a failed read is tried again by the next request
		}
		w.mu.Unlock()
	}
	return e.b, e.err
}

// manifestOnce is one complete model's manifest, computed once.
type manifestOnce struct {
	once sync.Once
	b    []byte
	err  error
}

// announcer lists the models of a catalogue for the node's heartbeat:
// one entry per name (a split model is one), complete ones with digests
// computed once per file version, partial ones with the layers held.
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
			if m.Shadowed {
				continue
			}
			if h := m.Holding; h != nil {
				mi := &messages.ModelInfo{Name: m.Name, SizeBytes: uint64(h.Bytes), Partial: true, Embedding: h.Embed, Head: h.Head}
				for _, l := range h.Held {
					mi.Layers = append(mi.Layers, uint32(l))
				}
				out = append(out, mi)
				continue
			}
			if !m.Complete {
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

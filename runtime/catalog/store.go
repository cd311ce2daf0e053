package catalog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SourcePartial is a model a node holds only in part, in its Store.
const SourcePartial = "partial"

// ErrDiskBudget is returned when fetched ranges would exceed a Store's budget.
var ErrDiskBudget = errors.New("catalog: disk budget")

// Store keeps the parts of models that a node fetched range by range
// (from peers or the hub) because a plan gave it some of their layers.
//
// Each model is a folder DIR/NAME holding its part files with the names
// and sizes of the originals, written sparse: only the fetched ranges
// take disk space, and every byte sits at its offset in the original
// file, so gguf.Open reads the header and model.Load maps the layers
// present exactly as from a complete file (the holes read as zeros and
// are never touched by a stage that does not own them). Beside them,
// manifest.json is the manifest the ranges were checked against and
// "present" lists the ranges written and verified, one "PART OFFSET
// SIZE" line each, appended only after the bytes are synced: a range
// cut by a crash is not listed and is fetched again.
//
// The bytes listed count against Budget; to make room, Reserve drops the
// least recently used other models whole.
type Store struct {
	dir    string
	budget int64

	mu     sync.Mutex
	models map[string]*held
}

// held is one model's state in the store.
type held struct {
	man     *Manifest
	spans   [][]span // per part: verified byte ranges, sorted, merged
	bytes   int64    // bytes of verified ranges
	used    time.Time
	version int // counts re-creations of the part files
}

type span struct{ off, end int64 }

// Holding says which parts of a model a store holds.
type Holding struct {
	Layers      int   // the model's layers
	Held        []int // layers whose every tensor is present, ascending
	Embed, Head bool  // token embedding / output norm and head present
	Bytes       int64 // bytes present
}

// String renders the holding as "layers 0-3,7 +embedding +head".
func (h Holding) String() string {
	s := "layers " + FormatLayers(h.Held)
	if len(h.Held) == 0 {
		s = "no layers"
	}
	if h.Embed {
		s += " +embedding"
	}
	if h.Head {
		s += " +head"
	}
	return s
}

// FormatLayers renders ascending layer numbers as ranges: "0-3,7".
func FormatLayers(ls []int) string {
	var b strings.Builder
	for i := 0; i < len(ls); {
		j := i
		for j+1 < len(ls) && ls[j+1] == ls[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ls[i], ls[j])
		} else {
			fmt.Fprintf(&b, "%d", ls[i])
		}
		i = j + 1
	}
	return b.String()
}

// OpenStore opens (creating) the store in dir with a budget in bytes (0 =
// no cap), reading back the models already there.
func OpenStore(dir string, budget int64) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, budget: budget, models: map[string]*held{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() || ValidName(e.Name()) != nil {
			continue
		}
		h, err := s.read(e.Name())
		if err != nil {
			continue // a folder cut short before its manifest: Begin rewrites it
		}
		s.models[e.Name()] = h
	}
	return s, nil
}

// Dir is the store's folder.
func (s *Store) Dir() string { return s.dir }

// Budget is the most bytes the store keeps; 0 = no cap.
func (s *Store) Budget() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.budget
}

// SetBudget changes the most bytes the store keeps (0 = no cap); what it
// holds beyond it goes as Reserve makes room.
func (s *Store) SetBudget(b int64) {
	s.mu.Lock()
	s.budget = b
	s.mu.Unlock()
}

func (s *Store) read(name string) (*held, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, name, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var man Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, err
	}
	if err := man.Validate(); err != nil || man.Name != name {
		return nil, fmt.Errorf("catalog: %s: bad manifest: %v", name, err)
	}
	h := &held{man: &man, spans: make([][]span, len(man.Parts))}
	for i, p := range man.Parts {
		fi, err := os.Stat(filepath.Join(s.dir, name, partFile(name, i, len(man.Parts))))
		if err != nil || fi.Size() != p.Size {
			return nil, fmt.Errorf("catalog: %s: part %d missing or resized", name, i)
		}
		h.used = fi.ModTime()
	}
	f, err := os.Open(filepath.Join(s.dir, name, "present"))
	if err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var part int
			var off, size int64
			if _, err := fmt.Sscanf(sc.Text(), "%d %d %d", &part, &off, &size); err != nil {
				continue
			}
			if part < 0 || part >= len(man.Parts) || off < 0 || size <= 0 || off+size > man.Parts[part].Size {
				continue
			}
			h.add(part, off, off+size)
		}
		f.Close()
		if fi, err := os.Stat(f.Name()); err == nil {
			h.used = fi.ModTime()
		}
	}
	return h, nil
}

// partFile is the file name of part i of count of model name, as the
// original was called (catalog.Name reads it back as name).
func partFile(name string, i, count int) string {
	if count == 1 {
		return name + ".gguf"
	}
	return PartName(name, i+1, count)
}

// add marks [off, end) of part present and recounts the bytes.
func (h *held) add(part int, off, end int64) {
	sp := append(h.spans[part], span{off, end})
	sort.Slice(sp, func(i, j int) bool { return sp[i].off < sp[j].off })
	out := sp[:1]
	for _, x := range sp[1:] {
		last := &out[len(out)-1]
		if x.off <= last.end {
			last.end = max(last.end, x.end)
		} else {
			out = append(out, x)
		}
	}
	h.spans[part] = out
	h.bytes = 0
	for _, p := range h.spans {
		for _, x := range p {
			h.bytes += x.end - x.off
		}
	}
}

// has reports whether [off, end) of part is all present.
func (h *held) has(part int, off, end int64) bool {
	if part < 0 || part >= len(h.spans) {
		return false
	}
	for _, x := range h.spans[part] {
		if x.off <= off && end <= x.end {
			return true
		}
	}
	return false
}

// Validate checks a manifest from a peer before anything trusts it: a
// valid name, parts and tensors inside the part sizes, headers first.
func (man *Manifest) Validate() error {
	if err := ValidName(man.Name); err != nil {
		return err
	}
	if len(man.Parts) == 0 || len(man.Parts) > 9999 {
		return fmt.Errorf("catalog: manifest of %s has %d parts", man.Name, len(man.Parts))
	}
	for i, p := range man.Parts {
		if p.Size <= 0 || p.HeaderBytes <= 0 || p.HeaderBytes > p.Size || len(p.HeaderSHA256) != 64 {
			return fmt.Errorf("catalog: manifest of %s: part %d: size %d, header %d", man.Name, i, p.Size, p.HeaderBytes)
		}
	}
	if h := man.Hub; h != nil {
		if len(h.Files) != len(man.Parts) || h.Repo == "" || h.Revision == "" || strings.ContainsAny(h.Revision, "/\\") {
			return fmt.Errorf("catalog: manifest of %s: hub source %+v", man.Name, *h)
		}
		for _, f := range h.Files {
			if f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, "..") {
				return fmt.Errorf("catalog: manifest of %s: hub file %q", man.Name, f)
			}
		}
	}
	for _, t := range man.Tensors {
		// Offset and Size are compared, never summed: a sum could wrap.
		if t.Part < 0 || t.Part >= len(man.Parts) || t.Offset < man.Parts[t.Part].HeaderBytes || t.Size < 0 ||
			t.Offset > man.Parts[t.Part].Size || t.Size > man.Parts[t.Part].Size-t.Offset ||
			len(t.SHA256) != 64 {
			return fmt.Errorf("catalog: manifest of %s: tensor %q at %d+%d outside part %d", man.Name, t.Name, t.Offset, t.Size, t.Part)
		}
	}
	return nil
}

// Begin makes room for a model described by man: its part files are
// created sparse at their full sizes, unless the store already holds the
// same model (same parts and headers), whose ranges are kept.
func (s *Store) Begin(man *Manifest) error {
	if err := man.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.models[man.Name]; ok && sameParts(h.man, man) {
		return nil
	}
	dir := filepath.Join(s.dir, man.Name)
	version := 0
	if h, ok := s.models[man.Name]; ok {
		version = h.version + 1
	}
	// A different model under this name: start over. Files still mapped
	// by a loaded shard stay valid (the mapping holds the old inode).
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	delete(s.models, man.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, p := range man.Parts {
		f, err := os.Create(filepath.Join(dir, partFile(man.Name, i, len(man.Parts))))
		if err != nil {
			return err
		}
		err = f.Truncate(p.Size) // sparse: no blocks until written
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	b, err := json.Marshal(man)
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(dir, "manifest.json"), b); err != nil {
		return err
	}
	s.models[man.Name] = &held{man: man, spans: make([][]span, len(man.Parts)), used: time.Now(), version: version}
	return nil
}

func sameParts(a, b *Manifest) bool {
	if len(a.Parts) != len(b.Parts) || len(a.Tensors) != len(b.Tensors) {
		return false
	}
	for i := range a.Parts {
		if a.Parts[i] != b.Parts[i] {
			return false
		}
	}
	for i := range a.Tensors {
		if a.Tensors[i] != b.Tensors[i] {
			return false
		}
	}
	return true
}

func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// Manifest returns the manifest of a model the store holds (in part).
func (s *Store) Manifest(name string) (*Manifest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.models[name]
	if !ok {
		return nil, false
	}
	return h.man, true
}

// Missing returns the ranges of need the store does not hold.
func (s *Store) Missing(name string, need []Range) []Range {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.models[name]
	if !ok {
		return need
	}
	var out []Range
	for _, r := range need {
		if !h.has(r.Part, r.Offset, r.Offset+r.Size) {
			out = append(out, r)
		}
	}
	return out
}

// Has reports whether bytes [off, off+size) of part are present and verified.
func (s *Store) Has(name string, part int, off, size int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.models[name]
	return ok && size >= 0 && h.has(part, off, off+size)
}

// PartPath is the path of part (0-based) of a model in the store.
func (s *Store) PartPath(name string, part int) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.models[name]
	if !ok || part < 0 || part >= len(h.man.Parts) {
		return "", false
	}
	return filepath.Join(s.dir, name, partFile(name, part, len(h.man.Parts))), true
}

// Path returns the path of the model's first part, which gguf.Open reads
// (the other parts beside it) once every part's header is present, and a
// version that changes whenever the files are re-created.
func (s *Store) Path(name string) (string, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.models[name]
	if !ok {
		return "", 0, fmt.Errorf("%w: %q is not in the partial store", ErrNotFound, name)
	}
	for i, p := range h.man.Parts {
		if !h.has(i, 0, p.HeaderBytes) {
			return "", 0, fmt.Errorf("catalog: %s: the header of part %d is not fetched yet", name, i+1)
		}
	}
	return filepath.Join(s.dir, name, partFile(name, 0, len(h.man.Parts))), h.version, nil
}

// Reserve makes room for n more bytes of model name within the budget,
// dropping whole other models, least recently used first, that busy (may
// be nil) does not report in use.
func (s *Store) Reserve(name string, n int64, busy func(model string) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.budget <= 0 {
		return nil
	}
	total := s.totalLocked()
	if total+n <= s.budget {
		return nil
	}
	var victims []string
	for m := range s.models {
		if m != name && (busy == nil || !busy(m)) {
			victims = append(victims, m)
		}
	}
	sort.Slice(victims, func(i, j int) bool { return s.models[victims[i]].used.Before(s.models[victims[j]].used) })
	for _, m := range victims {
		if total+n <= s.budget {
			break
		}
		total -= s.models[m].bytes
		os.RemoveAll(filepath.Join(s.dir, m))
		delete(s.models, m)
	}
	if total+n > s.budget {
		return fmt.Errorf("%w: %s needs %d more bytes, but %d of the %d-byte budget (--disk) are held by models in use",
			ErrDiskBudget, name, n, total, s.budget)
	}
	return nil
}

func (s *Store) totalLocked() int64 {
	var t int64
	for _, h := range s.models {
		t += h.bytes
	}
	return t
}

// Used is the bytes of verified ranges the store holds.
func (s *Store) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totalLocked()
}

// Put checks each range's bytes against its digest, writes them at their
// offsets, syncs, and only then records them present. data[i] holds
// rs[i]'s bytes. Ranges that fail their check are not written; the error
// names them.
func (s *Store) Put(name string, rs []Range, data [][]byte) error {
	s.mu.Lock()
	h, ok := s.models[name]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q is not in the partial store (Begin first)", ErrNotFound, name)
	}
	files := make([]*os.File, len(h.man.Parts))
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	var errs []error
	var done []Range
	for i, r := range rs {
		if r.Part < 0 || r.Part >= len(files) || r.Offset < 0 || r.Offset+r.Size > h.man.Parts[r.Part].Size {
			errs = append(errs, fmt.Errorf("catalog: %s: range %s outside the model", name, r.What))
			continue
		}
		if err := r.Check(data[i]); err != nil {
			errs = append(errs, err)
			continue
		}
		if files[r.Part] == nil {
			f, err := os.OpenFile(filepath.Join(s.dir, name, partFile(name, r.Part, len(files))), os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			files[r.Part] = f
		}
		if _, err := files[r.Part].WriteAt(data[i], r.Offset); err != nil {
			return err
		}
		done = append(done, r)
	}
	for _, f := range files {
		if f != nil {
			if err := f.Sync(); err != nil {
				return err
			}
		}
	}
	var log strings.Builder
	for _, r := range done {
		log.WriteString(strconv.Itoa(r.Part) + " " + strconv.FormatInt(r.Offset, 10) + " " + strconv.FormatInt(r.Size, 10) + "\n")
	}
	if len(done) > 0 {
		f, err := os.OpenFile(filepath.Join(s.dir, name, "present"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(log.String())
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	s.mu.Lock()
	if s.models[name] == h {
		for _, r := range done {
			h.add(r.Part, r.Offset, r.Offset+r.Size)
		}
		h.used = time.Now()
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

// Holding says which layers of a model the store holds, from the manifest
// (the layer count is the highest blk.N plus one).
func (s *Store) Holding(name string) (Holding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.models[name]
	if !ok {
		return Holding{}, false
	}
	return h.holding(), true
}

func (h *held) holding() Holding {
	out := Holding{Bytes: h.bytes}
	missing := map[int]bool{}
	seen := map[int]bool{}
	tied := true
	embed, norm, output := false, false, false
	for _, t := range h.man.Tensors {
		have := h.has(t.Part, t.Offset, t.Offset+t.Size)
		switch {
		case strings.HasPrefix(t.Name, "blk."):
			n, err := strconv.Atoi(strings.SplitN(t.Name[4:], ".", 2)[0])
			if err != nil || n < 0 || n > 1<<16 {
				continue
			}
			seen[n] = true
			if !have {
				missing[n] = true
			}
			out.Layers = max(out.Layers, n+1)
		case t.Name == "token_embd.weight":
			embed = have
		case t.Name == "output_norm.weight":
			norm = have
		case t.Name == "output.weight":
			tied, output = false, have
		}
	}
	for l := 0; l < out.Layers; l++ {
		if seen[l] && !missing[l] {
			out.Held = append(out.Held, l)
		}
	}
	out.Embed = embed
	out.Head = norm && (output || (tied && embed))
	return out
}

// List returns the models the store holds, as catalogue entries (never
// Complete; Holding says what is there).
func (s *Store) List() []Model {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Model
	for name, h := range s.models {
		m := Model{Name: name, Source: SourcePartial, Where: filepath.Join(s.dir, name), Parts: len(h.man.Parts), Size: h.bytes, ModTime: h.used}
		for i := range h.man.Parts {
			m.Paths = append(m.Paths, filepath.Join(s.dir, name, partFile(name, i, len(h.man.Parts))))
		}
		hold := h.holding()
		m.Holding = &hold
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Remove deletes a model from the store.
func (s *Store) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.models[name]; !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	delete(s.models, name)
	return os.RemoveAll(filepath.Join(s.dir, name))
}

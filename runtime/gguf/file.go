package gguf

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// Keys llama.cpp's gguf-split writes into every part of a split model.
const (
	KeySplitNo      = "split.no"
	KeySplitCount   = "split.count"
	KeySplitTensors = "split.tensors.count"
)

// maxSplits bounds how many part files a split model may claim.
const maxSplits = 9999

var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// SplitPath returns the path of part n (0-based) of count for a split
// model whose parts share prefix, as llama.cpp names them:
// PREFIX-00001-of-00003.gguf.
func SplitPath(prefix string, n, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, n+1, count)
}

// File is an open GGUF model: one file, or every part of a split model.
type File struct {
	paths   []string
	maps    []mapping
	version uint32
	md      *Metadata
	tensors []Tensor
	byName  map[string]int
	align   uint64
}

// Open memory-maps the GGUF file at path. When the file is one part of a
// split model (it has split.count > 1), every part is opened and the
// result presents all their tensors as one model; path may name any part.
func Open(path string) (*File, error) {
	f := &File{byName: map[string]int{}}
	h, m, err := openOne(path)
	if err != nil {
		return nil, err
	}
	count, _ := h.md.Uint(KeySplitCount)
	if count <= 1 {
		f.add(path, m, h)
		return f, nil
	}
	m.close()
	parts := splitName.FindStringSubmatch(filepath.Base(path))
	if parts == nil {
		return nil, fmt.Errorf("gguf: %s: metadata says split.count=%d but the name does not follow NAME-00001-of-%05d.gguf", path, count, count)
	}
	if count > maxSplits {
		return nil, fmt.Errorf("gguf: %s: split.count=%d is more than %d", path, count, maxSplits)
	}
	if n, _ := strconv.Atoi(parts[3]); uint64(n) != count {
		return nil, fmt.Errorf("gguf: %s: file name says %d parts, metadata split.count says %d", path, n, count)
	}
	prefix := filepath.Join(filepath.Dir(path), parts[1])
	for i := 0; i < int(count); i++ {
		p := SplitPath(prefix, i, int(count))
		h, m, err := openOne(p)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("gguf: split part %d of %d: %w", i+1, count, err)
		}
		no, okNo := h.md.Uint(KeySplitNo)
		c, _ := h.md.Uint(KeySplitCount)
		if !okNo || no != uint64(i) || c != count {
			m.close()
			f.Close()
			return nil, fmt.Errorf("gguf: %s: split.no=%d split.count=%d, expected part %d of %d", p, no, c, i, count)
		}
		if err := f.add(p, m, h); err != nil {
			f.Close()
			return nil, err
		}
	}
	if want, ok := f.md.Uint(KeySplitTensors); ok && want != uint64(len(f.tensors)) {
		f.Close()
		return nil, fmt.Errorf("gguf: %s: split.tensors.count=%d, but the %d parts hold %d tensors", path, want, count, len(f.tensors))
	}
	return f, nil
}

// Parse reads a GGUF image held in memory (name is used in errors). The
// returned File references data; Close is a no-op for it.
func Parse(name string, data []byte) (*File, error) {
	h, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	f := &File{byName: map[string]int{}}
	f.add(name, mapping{data: data}, h)
	return f, nil
}

func openOne(path string) (*header, mapping, error) {
	m, err := mapFile(path)
	if err != nil {
		return nil, mapping{}, fmt.Errorf("gguf: %w", err)
	}
	h, err := parse(path, m.data)
	if err != nil {
		m.close()
		return nil, mapping{}, err
	}
	return h, m, nil
}

// add appends one parsed part; the first part's metadata is the model's.
func (f *File) add(path string, m mapping, h *header) error {
	split := len(f.paths)
	f.paths = append(f.paths, path)
	f.maps = append(f.maps, m)
	if split == 0 {
		f.version, f.md, f.align = h.version, h.md, h.alignment
	}
	for _, t := range h.tensors {
		if _, dup := f.byName[t.Name]; dup {
			return fmt.Errorf("gguf: %s: tensor %q also appears in an earlier part", path, t.Name)
		}
		t.Split = split
		f.byName[t.Name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
	}
	return nil
}

// Close unmaps the file(s). Tensor data views become invalid; Metadata stays valid.
func (f *File) Close() error {
	var first error
	for i := range f.maps {
		if err := f.maps[i].close(); err != nil && first == nil {
			first = err
		}
	}
	f.maps = nil
	return first
}

// Version returns the GGUF version of the (first) file: 2 or 3.
func (f *File) Version() uint32 { return f.version }

// Metadata returns the model's key-value metadata (of the first part when split).
func (f *File) Metadata() *Metadata { return f.md }

// Alignment returns the tensor data alignment of the (first) file.
func (f *File) Alignment() uint64 { return f.align }

// Paths returns the file paths, one per part.
func (f *File) Paths() []string { return f.paths }

// Tensors returns every tensor in file order (part by part). The slice is shared.
func (f *File) Tensors() []Tensor { return f.tensors }

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.tensors[i], true
}

// Data returns a zero-copy view of the tensor's bytes, valid until Close.
// t must come from this File.
func (f *File) Data(t Tensor) []byte {
	return f.maps[t.Split].data[t.Offset : t.Offset+t.Size : t.Offset+t.Size]
}

// TensorData returns the bytes of the named tensor.
func (f *File) TensorData(name string) (Tensor, []byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return Tensor{}, nil, fmt.Errorf("%w: %q in %s", ErrUnknownTensor, name, f.paths[0])
	}
	return t, f.Data(t), nil
}

// mapFile maps path read-only; an empty file maps to an empty slice.
func mapFile(path string) (mapping, error) {
	fd, err := os.Open(path)
	if err != nil {
		return mapping{}, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return mapping{}, err
	}
	if !st.Mode().IsRegular() {
		return mapping{}, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() == 0 {
		return mapping{}, nil
	}
	return mapRegion(fd, st.Size())
}

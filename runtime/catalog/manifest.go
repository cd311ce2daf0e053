package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"strata/runtime/gguf"
)

// Manifest describes where every tensor of a model lies and what its
// bytes hash to, as computed by a holder of the complete file; a node
// holding only some layers fetches their ranges and checks them against
// it. It is JSON-encoded on the wire.
type Manifest struct {
	Name  string         `json:"name"`
	Parts []ManifestPart `json:"parts"`
	// Tensors in file order.
	Tensors []ManifestTensor `json:"tensors"`
	// Hub, when the holder has the model from the Hugging Face cache,
	// says where the hub serves its files: a node that needs a range no
	// peer holds can read it from there.
	Hub *HubSource `json:"hub,omitempty"`
}

// HubSource is a model's files on the Hugging Face hub.
type HubSource struct {
	Repo     string   `json:"repo"`     // "ORG/NAME"
	Revision string   `json:"revision"` // the snapshot's commit
	Files    []string `json:"files"`    // path in the repository of each part
}

// hubSourceOf reads repository, revision and file paths back from the
// snapshot paths of a model in the Hugging Face cache
// (.../models--ORG--NAME/snapshots/REVISION/FILE); nil when they do not
// have that shape.
func hubSourceOf(paths []string) *HubSource {
	var h HubSource
	for _, p := range paths {
		p = filepath.ToSlash(p)
		i := strings.LastIndex(p, "/models--")
		if i < 0 {
			return nil
		}
		rest := p[i+len("/models--"):]
		repoDir, rest, ok := strings.Cut(rest, "/snapshots/")
		if !ok {
			return nil
		}
		rev, file, ok := strings.Cut(rest, "/")
		if !ok || rev == "" || file == "" {
			return nil
		}
		repo := strings.ReplaceAll(repoDir, "--", "/")
		if h.Repo != "" && (h.Repo != repo || h.Revision != rev) {
			return nil
		}
		h.Repo, h.Revision = repo, rev
		h.Files = append(h.Files, file)
	}
	return &h
}

// ManifestPart is one file of the model.
type ManifestPart struct {
	Size int64 `json:"size"`
	// HeaderBytes is the length of the part's header (metadata and tensor
	// table, up to the first tensor's data): every node needs it.
	HeaderBytes int64 `json:"header_bytes"`
	// HeaderSHA256 is the hex SHA-256 of those bytes.
	HeaderSHA256 string `json:"header_sha256"`
}

// ManifestTensor is one tensor's byte range and digest.
type ManifestTensor struct {
	Name   string `json:"name"`
	Part   int    `json:"part"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ManifestOf reads every byte of a complete model once and returns its
// manifest.
func ManifestOf(m Model) (*Manifest, error) {
	if !m.Complete {
		return nil, fmt.Errorf("catalog: %s: a manifest needs the complete model", m.Name)
	}
	f, err := gguf.Open(m.Paths[0])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	man := &Manifest{Name: m.Name, Parts: make([]ManifestPart, len(f.Paths()))}
	if m.Source == SourceHuggingFace {
		man.Hub = hubSourceOf(m.Paths)
	}
	first := make([]uint64, len(f.Paths()))
	for i := range first {
		first[i] = ^uint64(0)
	}
	for _, t := range f.Tensors() {
		d := sha256.Sum256(f.Data(t))
		man.Tensors = append(man.Tensors, ManifestTensor{Name: t.Name, Part: t.Split, Offset: int64(t.Offset), Size: int64(t.Size), SHA256: hex.EncodeToString(d[:])})
		first[t.Split] = min(first[t.Split], t.Offset)
	}
	for i, p := range f.Paths() {
		data, err := readHead(p, first[i])
		if err != nil {
			return nil, err
		}
		d := sha256.Sum256(data.head)
		man.Parts[i] = ManifestPart{Size: data.size, HeaderBytes: int64(len(data.head)), HeaderSHA256: hex.EncodeToString(d[:])}
	}
	return man, nil
}

// Range is a byte range of one part of a model.
type Range struct {
	Part   int
	Offset int64
	Size   int64
	// SHA256 is the digest of exactly these bytes (a tensor's, or a header's).
	SHA256 string
	// What is in it: "header" or the tensor's name.
	What string
}

// Needed lists the ranges a node needs to run layers [first, end) of a
// model of layers layers: every part's header, the tensors of those
// blocks (blk.N.*), the token embedding when first is 0, and the output
// norm and head when end is layers (the embedding too when the model ties
// its output to it, i.e. has no output.weight). Ranges are sorted by part
// and offset.
func (man *Manifest) Needed(first, end, layers int) ([]Range, error) {
	if first < 0 || end > layers || first >= end {
		return nil, fmt.Errorf("catalog: layers [%d, %d) of %d", first, end, layers)
	}
	var out []Range
	for i, p := range man.Parts {
		out = append(out, Range{Part: i, Offset: 0, Size: p.HeaderBytes, SHA256: p.HeaderSHA256, What: "header"})
	}
	tied := true
	for _, t := range man.Tensors {
		if t.Name == "output.weight" {
			tied = false
		}
	}
	last := end == layers
	for _, t := range man.Tensors {
		want := false
		switch {
		case strings.HasPrefix(t.Name, "blk."):
			n, err := strconv.Atoi(strings.SplitN(t.Name[4:], ".", 2)[0])
			want = err == nil && n >= first && n < end
		case t.Name == "token_embd.weight":
			want = first == 0 || (last && tied)
		case t.Name == "output_norm.weight", t.Name == "output.weight":
			want = last
		default:
			want = true // small tensors outside blocks (rope factors): everyone takes them
		}
		if want {
			out = append(out, Range{Part: t.Part, Offset: t.Offset, Size: t.Size, SHA256: t.SHA256, What: t.Name})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Part != out[j].Part {
			return out[i].Part < out[j].Part
		}
		return out[i].Offset < out[j].Offset
	})
	return out, nil
}

// Check verifies that data is the range's bytes.
func (r Range) Check(data []byte) error {
	if int64(len(data)) != r.Size {
		return fmt.Errorf("catalog: %s: %d bytes, expected %d", r.What, len(data), r.Size)
	}
	d := sha256.Sum256(data)
	if hex.EncodeToString(d[:]) != r.SHA256 {
		return fmt.Errorf("catalog: %s (part %d at %d): digest mismatch", r.What, r.Part, r.Offset)
	}
	return nil
}

package peers

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"strata/messages"
)

// digestSpan is how much of each end of a model file ModelDigest hashes.
const digestSpan = 1 << 20

// ModelDigest returns "sha256-fl:" + the hex SHA-256 of a file's first MiB,
// its last MiB and its size (8 bytes, little-endian). It reads at most
// 2 MiB, so a node can announce digests of 100 GB models every start; it
// tells different files apart, but is not a full-file checksum.
func ModelDigest(f io.ReaderAt, size int64) (string, error) {
	h := sha256.New()
	head := min(size, digestSpan)
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, head)); err != nil {
		return "", err
	}
	tail := max(head, size-digestSpan)
	if _, err := io.Copy(h, io.NewSectionReader(f, tail, size-tail)); err != nil {
		return "", err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	h.Write(n[:])
	return "sha256-fl:" + hex.EncodeToString(h.Sum(nil)), nil
}

// modelScanner lists the GGUF files in a directory, caching digests by
// (name, size, modification time).
type modelScanner struct {
	dir string
	log *slog.Logger

	mu     sync.Mutex
	cache  map[string]cachedModel
	warned bool
}

type cachedModel struct {
	size  int64
	mtime time.Time
	info  *messages.ModelInfo
}

// scan returns the models in the directory, sorted by file name.
func (s *modelScanner) scan() []*messages.ModelInfo {
	if s.dir == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		if !s.warned {
			s.log.Warn("peers: cannot read models directory", "err", err)
			s.warned = true
		}
		return nil
	}
	s.warned = false
	next := make(map[string]cachedModel)
	var out []*messages.ModelInfo
	for _, e := range entries {
		name := e.Name()
		if !strings.EqualFold(filepath.Ext(name), ".gguf") || e.IsDir() {
			continue
		}
		fi, err := os.Stat(filepath.Join(s.dir, name))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		c, ok := s.cache[name]
		if !ok || c.size != fi.Size() || !c.mtime.Equal(fi.ModTime()) {
			d, err := digestFile(filepath.Join(s.dir, name), fi.Size())
			if err != nil {
				s.log.Warn("peers: cannot digest model", "file", name, "err", err)
				continue
			}
			c = cachedModel{size: fi.Size(), mtime: fi.ModTime(), info: &messages.ModelInfo{
				Name: strings.TrimSuffix(name, filepath.Ext(name)), SizeBytes: uint64(fi.Size()), Digest: d,
			}}
		}
		next[name] = c
		out = append(out, c.info)
	}
	s.cache = next
	return out
}

func digestFile(path string, size int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return ModelDigest(f, size)
}

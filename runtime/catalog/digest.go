package catalog

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"sync"
	"time"
)

// digestSpan is how much of each end of a file Digest hashes.
const digestSpan = 1 << 20

// FileDigest returns "sha256-fl:" + the hex SHA-256 of a file's first MiB,
// its last MiB and its size (8 bytes, little-endian). It reads at most
// 2 MiB, so a node can announce digests of 100 GB models every start; it
// tells different files apart, but is not a full-file checksum.
func FileDigest(f io.ReaderAt, size int64) (string, error) {
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

// Digests computes model digests and remembers them by (path, size,
// modification time), so a node can ask every heartbeat. The zero value
// is ready to use.
type Digests struct {
	mu    sync.Mutex
	cache map[string]cachedDigest
}

type cachedDigest struct {
	size   int64
	mtime  time.Time
	digest string
}

// Of returns the model's digest: FileDigest of its file, or for a split
// model "sha256-fl:" + SHA-256 of its parts' digests in order.
func (d *Digests) Of(m Model) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cache == nil {
		d.cache = map[string]cachedDigest{}
	}
	var parts []string
	for _, p := range m.Paths {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		c, ok := d.cache[p]
		if !ok || c.size != fi.Size() || !c.mtime.Equal(fi.ModTime()) {
			f, err := os.Open(p)
			if err != nil {
				return "", err
			}
			dg, err := FileDigest(f, fi.Size())
			f.Close()
			if err != nil {
				return "", err
			}
			c = cachedDigest{size: fi.Size(), mtime: fi.ModTime(), digest: dg}
			d.cache[p] = c
		}
		parts = append(parts, c.digest)
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	h := sha256.New()
	for _, p := range parts {
		io.WriteString(h, p)
	}
	return "sha256-fl:" + hex.EncodeToString(h.Sum(nil)), nil
}

type head struct {
	head []byte
	size int64
}

// readHead reads the first n bytes of a file (all of it when shorter) and its size.
func readHead(path string, n uint64) (head, error) {
	f, err := os.Open(path)
	if err != nil {
		return head{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return head{}, err
	}
	n = min(n, uint64(fi.Size()))
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return head{}, err
	}
	return head{head: b, size: fi.Size()}, nil
}

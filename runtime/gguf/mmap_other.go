//go:build !unix

package gguf

import (
	"io"
	"os"
)

// mapping holds the file's bytes; without mmap they are read into memory.
type mapping struct {
	data   []byte
	mapped bool
}

func mapRegion(fd *os.File, size int64) (mapping, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(fd, b); err != nil {
		return mapping{}, err
	}
	return mapping{data: b}, nil
}

func (m *mapping) close() error { m.data = nil; return nil }

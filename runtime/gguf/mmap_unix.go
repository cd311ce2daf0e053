//go:build unix

package gguf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapping is a read-only memory map (or, from Parse, borrowed bytes).
type mapping struct {
	data   []byte
	mapped bool
}

func mapRegion(fd *os.File, size int64) (mapping, error) {
	if int64(int(size)) != size {
		return mapping{}, fmt.Errorf("%s: %d bytes do not fit in the address space", fd.Name(), size)
	}
	b, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return mapping{}, fmt.Errorf("mmap %s: %w", fd.Name(), err)
	}
	return mapping{data: b, mapped: true}, nil
}

func (m *mapping) close() error {
	if !m.mapped {
		return nil
	}
	m.mapped = false
	b := m.data
	m.data = nil
	return unix.Munmap(b)
}

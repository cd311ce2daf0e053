// Package readgrow reads a length-prefixed body from a peer's stream
// into a buffer that grows as the bytes arrive, so that a length
// announced but never sent costs nothing: the side channel's control
// messages and the all-reduce frames share it.
package readgrow

import (
	"errors"
	"io"
)

// Chunk is the first buffer a body is read into; it doubles as bytes
// arrive.
const Chunk = 64 << 10

// Read reads n bytes into b (reused when it has room), growing it
// as the bytes arrive: from 64 KiB, doubling, never past n. With hold,
// every growth is first counted (and on an error, what was counted is
// given back); the caller gives back cap of the result when done. A b
// with room is reused only without hold.
func Read(r io.Reader, b []byte, n int, hold func(n int) error) ([]byte, error) {
	if hold != nil {
		b = nil
	}
	b = b[:0]
	held := 0
	for len(b) < n {
		if len(b) == cap(b) {
			grow := min(n, max(2*cap(b), Chunk))
			if hold != nil {
				if err := hold(grow - held); err != nil {
					hold(-held)
					return nil, err
				}
				held = grow
			}
			nb := make([]byte, len(b), grow)
			copy(nb, b)
			b = nb
		}
		k, err := r.Read(b[len(b):min(cap(b), n)])
		b = b[:len(b)+k]
		if err != nil && len(b) < n {
			if hold != nil {
				hold(-held)
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

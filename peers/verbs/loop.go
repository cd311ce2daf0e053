package verbs

import (
	"crypto/rand"
	"unsafe"
)

// Loop returns two connected Conns in one process, over a ring in Go
// memory: the reference backend, and the one tests build on.
func Loop(c Caps) (a, b Conn, err error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	mem := alignedBytes(ringBytes(c))
	token := make([]byte, tokenBytes)
	rand.Read(token)
	var flags uint32
	if c.EqualSizes {
		flags |= flagApple
	}
	initRing(mem, c, flags, token)
	w := newChanWaker()
	ra, err := newRing(mem, 0, w)
	if err != nil {
		return nil, nil, err
	}
	rb, err := newRing(mem, 1, w)
	if err != nil {
		return nil, nil, err
	}
	return ra, rb, nil
}

// alignedBytes returns n zero bytes starting on a 64-byte boundary, so
// the ring's atomic words are aligned as they are in a mapping.
func alignedBytes(n int) []byte {
	buf := make([]byte, n+64)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) & 63)
	return buf[off : off+n : off+n]
}

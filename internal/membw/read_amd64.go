//go:build !purego

package membw

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2 streaming kernel; tests flip it.
var useAVX2 = cpu.X86.HasAVX2

// readAVX2 is readGeneric over n bytes (n a positive multiple of 256),
// with eight 32-byte loads per 256 bytes.
//
//go:noescape
func readAVX2(p *byte, n int) uint64

func read(b []byte) uint64 {
	if !useAVX2 {
		return readGeneric(b)
	}
	return readAVX2(unsafe.SliceData(b), len(b))
}

//go:build purego || !amd64

package membw

// Without assembly (purego, or arm64 for now) the Go loop reads; it may
// not saturate memory on every machine, so the bandwidth it reports is a
// lower bound.

var useAVX2 = false

func read(b []byte) uint64 { return readGeneric(b) }

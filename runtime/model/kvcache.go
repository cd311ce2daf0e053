package model

import (
	"fmt"
	"strings"
	"unsafe"

	"strata/runtime/tensor"
)

// KVType is the element type of a KV cache. The zero value is KVF16, the
// default (llama.cpp's too): half the memory and memory traffic of f32,
// and the keys and values it rounds are already the products of quantized
// weights. KVQ8_0 halves it again (ggml's Q8_0 blocks: 32 int8 values and
// one f16 scale, 34 bytes); KVF32 keeps every bit.
type KVType uint8

// The KV cache types.
const (
	KVF16 KVType = iota
	KVQ8_0
	KVF32
)

// KVTypes lists the KV cache types by name, for flags and errors.
const KVTypes = "f16, q8_0, f32"

// ParseKVType returns the KVType named s (any case: f16, q8_0, f32).
func ParseKVType(s string) (KVType, error) {
	switch strings.ToLower(s) {
	case "f16", "":
		return KVF16, nil
	case "q8_0":
		return KVQ8_0, nil
	case "f32":
		return KVF32, nil
	}
	return 0, fmt.Errorf("model: KV cache type %q: want one of %s", s, KVTypes)
}

// String returns the type's name as ParseKVType reads it.
func (t KVType) String() string {
	switch t {
	case KVF16:
		return "f16"
	case KVQ8_0:
		return "q8_0"
	case KVF32:
		return "f32"
	}
	return fmt.Sprintf("kvtype(%d)", uint8(t))
}

// rowBytes is the size of a cached row of width elements (for Q8_0 a
// multiple of 32, which SetKVType checks).
func (t KVType) rowBytes(width int) int {
	switch t {
	case KVQ8_0:
		return width / 32 * 34
	case KVF32:
		return 4 * width
	}
	return 2 * width
}

// bytesFor is the size of n cached values, n a multiple of the block.
func (t KVType) bytesFor(n uint64) uint64 {
	switch t {
	case KVQ8_0:
		return n / 32 * 34
	case KVF32:
		return 4 * n
	}
	return 2 * n
}

// SetKVType sets the element type of the caches NewCache makes from now on
// (KVF16 unless set). KVQ8_0 needs cached rows whose width is a multiple
// of 32 (the head dimension; with multi-head latent attention the latent
// and rope key).
func (m *Model) SetKVType(t KVType) error {
	switch t {
	case KVF16, KVF32:
	case KVQ8_0:
		if _, w := m.kvShape(); w%32 != 0 {
			return fmt.Errorf("model: a q8_0 KV cache needs rows of a multiple of 32 values; this model's are %d wide", w)
		}
	default:
		return fmt.Errorf("model: KV cache type %d: want one of %s", t, KVTypes)
	}
	m.kvType = t
	return nil
}

// KVType is the element type of the caches NewCache makes.
func (m *Model) KVType() KVType { return m.kvType }

// kvShape is the cache's heads per layer and row width: KVHeads rows of
// HeadDim, or with multi-head latent attention one row of the latent and
// rope key.
func (m *Model) kvShape() (heads, width int) {
	if m.isMLA() {
		return 1, m.mlaCacheDim()
	}
	return m.KVHeads, m.HeadDim
}

// Cache is one sequence's KV cache for the layers of a shard,
// preallocated for Capacity positions, in the model's KVType. Each layer
// stores its keys and values head by head ([head][position][HeadDim]), so
// a run of positions of one head is contiguous: attention reads it a
// block at a time. With multi-head latent attention (deepseek2) there is
// one "head" whose rows are each position's latent and rope key, and no
// values: keys and values are both computed from the latent.
type Cache struct {
	Capacity int
	Len      int // positions filled; the next token goes at Len

	typ          KVType
	heads, width int
	rowBytes     int
	k, v         [][]byte // [layer-First]: heads × Capacity rows of rowBytes
	writes       []uint64 // [layer-First]: the host's stores into the layer (HostWrites)
}

// NewCache allocates a KV cache of capacity positions for m's layers, in
// m's KVType.
func (m *Model) NewCache(capacity int) *Cache {
	heads, width := m.kvShape()
	c := &Cache{Capacity: capacity, typ: m.kvType, heads: heads, width: width, rowBytes: m.kvType.rowBytes(width),
		k: make([][]byte, len(m.Blocks)), v: make([][]byte, len(m.Blocks)), writes: make([]uint64, len(m.Blocks))}
	size := heads * capacity * c.rowBytes
	for i := range m.Blocks {
		c.k[i] = alignedBytes(size)
		if !m.isMLA() {
			c.v[i] = alignedBytes(size)
		}
	}
	return c
}

// alignedBytes allocates n bytes on a 4-byte boundary (backed by
// float32s), so f16 and f32 rows can be viewed in place.
func alignedBytes(n int) []byte {
	if n == 0 {
		return nil
	}
	f := make([]float32, (n+3)/4)
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), n)
}

// CacheBytes is the memory NewCache(capacity) takes.
func (m *Model) CacheBytes(capacity int) uint64 {
	heads, width := m.kvShape()
	per := uint64(heads * m.kvType.rowBytes(width))
	if !m.isMLA() {
		per *= 2
	}
	return uint64(capacity) * per * uint64(len(m.Blocks))
}

// Bytes is the memory the cache holds.
func (c *Cache) Bytes() int64 {
	var n int64
	for i := range c.k {
		n += int64(len(c.k[i]) + len(c.v[i]))
	}
	return n
}

// Type is the cache's element type.
func (c *Cache) Type() KVType { return c.typ }

// Layer is the memory of block l's keys and values (l an index into the
// shard's Blocks; v is nil with multi-head latent attention), laid out
// [head][position][row] with Capacity positions a head: for a device
// that reads and writes the cache where it lies.
func (c *Cache) Layer(l int) (k, v []byte) { return c.k[l], c.v[l] }

// Layout is how Layer's memory is laid out: heads runs of Capacity rows
// of rowBytes each.
func (c *Cache) Layout() (heads, rowBytes int) { return c.heads, c.rowBytes }

// HostWrites counts the stores the host (the State's CPU path) has made
// into block l's keys and values: a device that keeps its own copy of
// the layer (a discrete GPU, in its memory) loads it again when the
// count has moved. What a device writes into Layer's memory is not
// counted.
func (c *Cache) HostWrites(l int) uint64 { return c.writes[l] }

// row returns the bytes of head h's row at pos in a layer's store.
func (c *Cache) row(store []byte, h, pos int) []byte {
	off := (h*c.Capacity + pos) * c.rowBytes
	return store[off : off+c.rowBytes]
}

// put stores x (c.width values) as head h's row at pos. Its callers
// count a layer's stores in writes (HostWrites).
func (c *Cache) put(store []byte, h, pos int, x []float32) {
	b := c.row(store, h, pos)
	switch c.typ {
	case KVF16:
		tensor.EncodeF16(unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), c.width), x[:c.width])
	case KVQ8_0:
		tensor.EncodeQ8_0(b, x[:c.width])
	case KVF32:
		copy(unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), c.width), x)
	}
}

// rows returns head h's rows at positions [p0, p1) as float32, row after
// row (c.width apart): decoded into buf (at least (p1-p0)*c.width), or
// for an f32 cache the cache's own memory (read only).
func (c *Cache) rows(store []byte, h, p0, p1 int, buf []float32) []float32 {
	n := (p1 - p0) * c.width
	off := (h*c.Capacity + p0) * c.rowBytes
	b := store[off : off+(p1-p0)*c.rowBytes]
	switch c.typ {
	case KVF16:
		tensor.DecodeF16(buf[:n], unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n))
	case KVQ8_0:
		tensor.DecodeQ8_0(buf[:n], b)
	case KVF32:
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	return buf[:n]
}

package gguf

import (
	"fmt"
	"math"
)

// KV is one metadata key and its value (see TypeOf for the Go types used).
type KV struct {
	Key   string
	Value any
}

// Metadata is the ordered key-value header of a GGUF file. Order is kept
// so that a file written back lists its keys as the original did.
type Metadata struct {
	kvs   []KV
	index map[string]int
}

// NewMetadata returns an empty Metadata, for building files to write.
func NewMetadata() *Metadata {
	return &Metadata{index: map[string]int{}}
}

// Len returns the number of keys.
func (m *Metadata) Len() int { return len(m.kvs) }

// KVs returns the pairs in file order. The slice is shared; do not modify it.
func (m *Metadata) KVs() []KV { return m.kvs }

// Keys returns the keys in file order.
func (m *Metadata) Keys() []string {
	keys := make([]string, len(m.kvs))
	for i, kv := range m.kvs {
		keys[i] = kv.Key
	}
	return keys
}

// Set adds or replaces key. The value must be a GGUF-typed Go value (see
// TypeOf); Set returns an error otherwise.
func (m *Metadata) Set(key string, value any) error {
	if _, ok := TypeOf(value); !ok {
		return fmt.Errorf("gguf: metadata %q: unsupported value type %T", key, value)
	}
	if a, ok := value.(Array); ok {
		if t, ok := elemSliceType(a.Values); !ok || t != a.Type {
			return fmt.Errorf("gguf: metadata %q: array of %s holds %T", key, a.Type, a.Values)
		}
	}
	if i, ok := m.index[key]; ok {
		m.kvs[i].Value = value
		return nil
	}
	m.index[key] = len(m.kvs)
	m.kvs = append(m.kvs, KV{key, value})
	return nil
}

// Delete removes key if present.
func (m *Metadata) Delete(key string) {
	i, ok := m.index[key]
	if !ok {
		return
	}
	m.kvs = append(m.kvs[:i], m.kvs[i+1:]...)
	delete(m.index, key)
	for j := i; j < len(m.kvs); j++ {
		m.index[m.kvs[j].Key] = j
	}
}

// Get returns the raw value of key.
func (m *Metadata) Get(key string) (any, bool) {
	i, ok := m.index[key]
	if !ok {
		return nil, false
	}
	return m.kvs[i].Value, true
}

// String returns a string value.
func (m *Metadata) String(key string) (string, bool) {
	v, _ := m.Get(key)
	s, ok := v.(string)
	return s, ok
}

// Bool returns a bool value.
func (m *Metadata) Bool(key string) (bool, bool) {
	v, _ := m.Get(key)
	b, ok := v.(bool)
	return b, ok
}

// Uint returns an integer value of any integer type that is not negative.
func (m *Metadata) Uint(key string) (uint64, bool) {
	v, _ := m.Get(key)
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := m.Int(key); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// Int returns an integer value of any integer type that fits in int64.
func (m *Metadata) Int(key string) (int64, bool) {
	v, _ := m.Get(key)
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

// Float returns a float32 or float64 value as float64 (integers are not converted).
func (m *Metadata) Float(key string) (float64, bool) {
	v, _ := m.Get(key)
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Array returns an array value.
func (m *Metadata) Array(key string) (Array, bool) {
	v, _ := m.Get(key)
	a, ok := v.(Array)
	return a, ok
}

// Strings returns an array of strings.
func (m *Metadata) Strings(key string) ([]string, bool) {
	a, _ := m.Array(key)
	s, ok := a.Values.([]string)
	return s, ok
}

// Float32s returns an array of float32 (float64 arrays are converted).
func (m *Metadata) Float32s(key string) ([]float32, bool) {
	a, _ := m.Array(key)
	switch v := a.Values.(type) {
	case []float32:
		return v, true
	case []float64:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out, true
	}
	return nil, false
}

// Int32s returns an integer array as int32 values. Arrays of other integer
// types are converted when every element fits.
func (m *Metadata) Int32s(key string) ([]int32, bool) {
	a, _ := m.Array(key)
	if v, ok := a.Values.([]int32); ok {
		return v, true
	}
	out := make([]int32, 0, a.Len())
	add := func(x int64) bool {
		if x < math.MinInt32 || x > math.MaxInt32 {
			return false
		}
		out = append(out, int32(x))
		return true
	}
	switch v := a.Values.(type) {
	case []int8:
		for _, x := range v {
			add(int64(x))
		}
	case []uint8:
		for _, x := range v {
			add(int64(x))
		}
	case []int16:
		for _, x := range v {
			add(int64(x))
		}
	case []uint16:
		for _, x := range v {
			add(int64(x))
		}
	case []uint32:
		for _, x := range v {
			if !add(int64(x)) {
				return nil, false
			}
		}
	case []int64:
		for _, x := range v {
			if !add(x) {
				return nil, false
			}
		}
	case []uint64:
		for _, x := range v {
			if x > math.MaxInt32 || !add(int64(x)) {
				return nil, false
			}
		}
	default:
		return nil, false
	}
	return out, true
}

// Architecture returns general.architecture ("llama", "qwen3", ...), or "".
func (m *Metadata) Architecture() string {
	s, _ := m.String("general.architecture")
	return s
}

// ArchKey returns key prefixed with the architecture: ArchKey("block_count")
// is "llama.block_count" in a llama file.
func (m *Metadata) ArchKey(key string) string {
	return m.Architecture() + "." + key
}

// ArchUint returns the architecture-prefixed integer key, or def when absent.
func (m *Metadata) ArchUint(key string, def uint64) uint64 {
	if v, ok := m.Uint(m.ArchKey(key)); ok {
		return v
	}
	return def
}

// ArchFloat returns the architecture-prefixed float key, or def when absent.
func (m *Metadata) ArchFloat(key string, def float64) float64 {
	if v, ok := m.Float(m.ArchKey(key)); ok {
		return v
	}
	return def
}

// ArchString returns the architecture-prefixed string key, or def when absent.
func (m *Metadata) ArchString(key string, def string) string {
	if v, ok := m.String(m.ArchKey(key)); ok {
		return v
	}
	return def
}

// Clone returns a deep-enough copy: the pair list is new; values (which are
// never modified in place by this package) are shared.
func (m *Metadata) Clone() *Metadata {
	c := NewMetadata()
	for _, kv := range m.kvs {
		c.index[kv.Key] = len(c.kvs)
		c.kvs = append(c.kvs, kv)
	}
	return c
}

package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"unicode/utf8"

	"strata/runtime/tensor"
)

const (
	magic = 0x46554747 // "GGUF" little-endian

	// DefaultAlignment is the tensor data alignment when general.alignment is absent.
	DefaultAlignment = 32

	maxDims       = 4  // GGML_MAX_DIMS
	maxArrayDepth = 16 // nested arrays deeper than this are refused
	maxNameLen    = 1 << 16
)

// Tensor describes one tensor of a file.
type Tensor struct {
	Name string
	Type tensor.Type
	// Dims in ggml order: Dims[0] is the innermost (contiguous) dimension,
	// so a weight matrix of R rows by C columns has Dims = [C, R].
	Dims []uint64
	// Offset is the absolute byte offset of the data in its file, Size its length.
	Offset uint64
	Size   uint64
	// Split is the index of the file that holds the data (0 unless split).
	Split int
}

// Elements returns the number of elements.
func (t Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows returns the product of all dims but the first; Cols returns Dims[0].
func (t Tensor) Rows() uint64 {
	if len(t.Dims) == 0 {
		return 1
	}
	return t.Elements() / max(t.Dims[0], 1)
}

// Cols returns Dims[0], the contiguous dimension (1 for a scalar).
func (t Tensor) Cols() uint64 {
	if len(t.Dims) == 0 {
		return 1
	}
	return t.Dims[0]
}

// header is one parsed file, without any mapping.
type header struct {
	version    uint32
	md         *Metadata
	tensors    []Tensor
	alignment  uint64
	dataOffset uint64 // absolute offset of the tensor data section
}

// cursor reads little-endian values from a byte slice with bounds checks;
// every failure is a *FormatError naming the field.
type cursor struct {
	file string
	b    []byte
	off  int
}

func (c *cursor) errorf(sentinel error, field string, at int, format string, args ...any) error {
	return &FormatError{File: c.file, Field: field, Offset: int64(at), Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

func (c *cursor) left() int { return len(c.b) - c.off }

func (c *cursor) take(n int, field string) ([]byte, error) {
	if n < 0 || n > c.left() {
		return nil, c.errorf(ErrTruncated, field, c.off, "need %d bytes, %d left", n, c.left())
	}
	p := c.b[c.off : c.off+n]
	c.off += n
	return p, nil
}

func (c *cursor) u32(field string) (uint32, error) {
	p, err := c.take(4, field)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (c *cursor) u64(field string) (uint64, error) {
	p, err := c.take(8, field)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

// count reads a uint64 element count and checks that count elements of at
// least minSize bytes each fit in what is left of the file, so no caller
// allocates for elements that cannot exist.
func (c *cursor) count(field string, minSize int) (int, error) {
	at := c.off
	n, err := c.u64(field)
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(c.left()/minSize) {
		return 0, c.errorf(ErrTruncated, field, at, "count %d needs at least %d bytes each, %d bytes left", n, minSize, c.left())
	}
	return int(n), nil
}

func (c *cursor) str(field string) (string, error) {
	at := c.off
	n, err := c.u64(field + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(c.left()) {
		return "", c.errorf(ErrTruncated, field, at, "string length %d, %d bytes left", n, c.left())
	}
	p, _ := c.take(int(n), field)
	return string(p), nil
}

// parse reads the header of one GGUF file held in b.
func parse(file string, b []byte) (*header, error) {
	c := &cursor{file: file, b: b}
	m, err := c.u32("magic")
	if err != nil {
		return nil, &FormatError{File: file, Field: "magic", Err: ErrNotGGUF, Detail: fmt.Sprintf("file has %d bytes", len(b))}
	}
	if m != magic {
		return nil, c.errorf(ErrNotGGUF, "magic", 0, "found %q, expected \"GGUF\"", b[:4])
	}
	h := &header{alignment: DefaultAlignment}
	if h.version, err = c.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case h.version == 2 || h.version == 3:
	case h.version > 0xffff && h.version&0xffff == 0:
		return nil, c.errorf(ErrUnsupportedVersion, "version", 4, "version %#x looks big-endian; only little-endian files are supported", h.version)
	default:
		return nil, c.errorf(ErrUnsupportedVersion, "version", 4, "version %d, supported: 2, 3", h.version)
	}
	// A tensor info takes at least 24 bytes; a KV at least 8+4+1.
	nTensors, err := c.count("tensor count", 24)
	if err != nil {
		return nil, err
	}
	nKV, err := c.count("metadata count", 13)
	if err != nil {
		return nil, err
	}

	h.md = NewMetadata()
	for i := 0; i < nKV; i++ {
		at := c.off
		key, err := c.str(fmt.Sprintf("metadata key #%d", i))
		if err != nil {
			return nil, err
		}
		if key == "" || !utf8.ValidString(key) {
			return nil, c.errorf(ErrInvalid, fmt.Sprintf("metadata key #%d", i), at, "key %q is empty or not UTF-8", key)
		}
		if _, dup := h.md.index[key]; dup {
			return nil, c.errorf(ErrInvalid, fmt.Sprintf("metadata key %q", key), at, "duplicate key")
		}
		tat := c.off
		t, err := c.u32(fmt.Sprintf("metadata %q type", key))
		if err != nil {
			return nil, err
		}
		v, err := c.value(ValueType(t), fmt.Sprintf("metadata %q", key), tat, 0)
		if err != nil {
			return nil, err
		}
		h.md.index[key] = len(h.md.kvs)
		h.md.kvs = append(h.md.kvs, KV{key, v})
	}
	if v, ok := h.md.Get("general.alignment"); ok {
		a, isU32 := v.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			return nil, c.errorf(ErrInvalid, "metadata \"general.alignment\"", 0, "%v (%T): must be a power of two uint32", v, v)
		}
		h.alignment = uint64(a)
	}

	h.tensors = make([]Tensor, 0, nTensors)
	names := make(map[string]bool, nTensors)
	for i := 0; i < nTensors; i++ {
		at := c.off
		field := fmt.Sprintf("tensor #%d", i)
		name, err := c.str(field + " name")
		if err != nil {
			return nil, err
		}
		if len(name) > maxNameLen || !utf8.ValidString(name) {
			return nil, c.errorf(ErrInvalid, field+" name", at, "name of %d bytes is too long or not UTF-8", len(name))
		}
		if names[name] {
			return nil, c.errorf(ErrInvalid, fmt.Sprintf("tensor %q", name), at, "duplicate tensor name")
		}
		names[name] = true
		field = fmt.Sprintf("tensor %q", name)
		dat := c.off
		nd, err := c.u32(field + " dimension count")
		if err != nil {
			return nil, err
		}
		if nd > maxDims {
			return nil, c.errorf(ErrInvalid, field+" dimension count", dat, "%d dimensions, at most %d", nd, maxDims)
		}
		t := Tensor{Name: name, Dims: make([]uint64, nd)}
		elems := uint64(1)
		for d := range t.Dims {
			dat := c.off
			if t.Dims[d], err = c.u64(field + " dims"); err != nil {
				return nil, err
			}
			if t.Dims[d] == 0 || t.Dims[d] > 1<<62 || elems > (1<<62)/t.Dims[d] {
				return nil, c.errorf(ErrInvalid, field+" dims", dat, "dimension %d is %d (element count must be 1..2^62)", d, t.Dims[d])
			}
			elems *= t.Dims[d]
		}
		tat := c.off
		typ, err := c.u32(field + " type")
		if err != nil {
			return nil, err
		}
		t.Type = tensor.Type(typ)
		if !t.Type.Known() {
			return nil, c.errorf(ErrInvalid, field+" type", tat, "unknown tensor type %d", typ)
		}
		if bs := uint64(t.Type.BlockSize()); t.Cols()%bs != 0 {
			return nil, c.errorf(ErrInvalid, field+" dims", dat, "row of %d elements is not a whole number of %s blocks of %d", t.Cols(), t.Type, bs)
		}
		// elems may be up to 2^62 and a block up to hundreds of bytes: the
		// byte size is computed with its carry, so a huge tensor is refused
		// instead of wrapping to a small size that fits the file.
		hi, size := bits.Mul64(elems/uint64(t.Type.BlockSize()), uint64(t.Type.BlockBytes()))
		if hi != 0 || size > math.MaxInt64 {
			return nil, c.errorf(ErrInvalid, field+" dims", dat, "%d elements of %s do not fit in 2^63 bytes", elems, t.Type)
		}
		t.Size = size
		oat := c.off
		if t.Offset, err = c.u64(field + " offset"); err != nil {
			return nil, err
		}
		if t.Offset%h.alignment != 0 {
			return nil, c.errorf(ErrInvalid, field+" offset", oat, "offset %d is not a multiple of the alignment %d", t.Offset, h.alignment)
		}
		h.tensors = append(h.tensors, t)
	}

	h.dataOffset = alignUp(uint64(c.off), h.alignment)
	if len(h.tensors) > 0 && h.dataOffset > uint64(len(b)) {
		return nil, c.errorf(ErrTruncated, "tensor data", c.off, "data section would start at %d, file has %d bytes", h.dataOffset, len(b))
	}
	dataLen := uint64(len(b)) - min(h.dataOffset, uint64(len(b)))
	// Check every tensor lies inside the data section and none overlap.
	order := make([]int, len(h.tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return h.tensors[order[a]].Offset < h.tensors[order[b]].Offset })
	var end uint64
	var prev string
	for _, i := range order {
		t := &h.tensors[i]
		if t.Offset > dataLen || t.Size > dataLen-t.Offset {
			return nil, c.errorf(ErrTruncated, fmt.Sprintf("tensor %q data", t.Name), int(min(h.dataOffset+t.Offset, math.MaxInt64)),
				"%d bytes at data offset %d, but the data section has %d bytes", t.Size, t.Offset, dataLen)
		}
		if prev != "" && t.Offset < end {
			return nil, c.errorf(ErrInvalid, fmt.Sprintf("tensor %q data", t.Name), int(h.dataOffset+t.Offset),
				"overlaps tensor %q (which ends at data offset %d)", prev, end)
		}
		end, prev = t.Offset+t.Size, t.Name
		t.Offset += h.dataOffset
	}
	return h, nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// value reads one metadata value of type t.
func (c *cursor) value(t ValueType, field string, at, depth int) (any, error) {
	if t != TypeArray && t.fixedSize() == 0 && t != TypeString {
		return nil, c.errorf(ErrInvalid, field+" type", at, "unknown value type %d", uint32(t))
	}
	if t == TypeString {
		s, err := c.str(field)
		return s, err
	}
	if t == TypeArray {
		return c.array(field, depth)
	}
	p, err := c.take(t.fixedSize(), field)
	if err != nil {
		return nil, err
	}
	return scalar(t, p, func() error {
		return c.errorf(ErrInvalid, field, c.off-1, "bool byte is %d, expected 0 or 1", p[0])
	})
}

func scalar(t ValueType, p []byte, badBool func() error) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return p[0], nil
	case TypeInt8:
		return int8(p[0]), nil
	case TypeUint16:
		return le.Uint16(p), nil
	case TypeInt16:
		return int16(le.Uint16(p)), nil
	case TypeUint32:
		return le.Uint32(p), nil
	case TypeInt32:
		return int32(le.Uint32(p)), nil
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(p)), nil
	case TypeBool:
		if p[0] > 1 {
			return nil, badBool()
		}
		return p[0] == 1, nil
	case TypeUint64:
		return le.Uint64(p), nil
	case TypeInt64:
		return int64(le.Uint64(p)), nil
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(p)), nil
	}
	panic("gguf: scalar of non-scalar type")
}

func (c *cursor) array(field string, depth int) (Array, error) {
	if depth >= maxArrayDepth {
		return Array{}, c.errorf(ErrInvalid, field, c.off, "arrays nested deeper than %d", maxArrayDepth)
	}
	at := c.off
	et, err := c.u32(field + " element type")
	if err != nil {
		return Array{}, err
	}
	t := ValueType(et)
	if t.minSize() == 0 {
		return Array{}, c.errorf(ErrInvalid, field+" element type", at, "unknown value type %d", et)
	}
	n, err := c.count(field+" count", t.minSize())
	if err != nil {
		return Array{}, err
	}
	a := Array{Type: t}
	le := binary.LittleEndian
	if t.fixedSize() > 0 {
		p, _ := c.take(n*t.fixedSize(), field) // fits: checked by count
		switch t {
		case TypeUint8:
			a.Values = append([]uint8(nil), p...)
		case TypeInt8:
			v := make([]int8, n)
			for i := range v {
				v[i] = int8(p[i])
			}
			a.Values = v
		case TypeUint16:
			v := make([]uint16, n)
			for i := range v {
				v[i] = le.Uint16(p[2*i:])
			}
			a.Values = v
		case TypeInt16:
			v := make([]int16, n)
			for i := range v {
				v[i] = int16(le.Uint16(p[2*i:]))
			}
			a.Values = v
		case TypeUint32:
			v := make([]uint32, n)
			for i := range v {
				v[i] = le.Uint32(p[4*i:])
			}
			a.Values = v
		case TypeInt32:
			v := make([]int32, n)
			for i := range v {
				v[i] = int32(le.Uint32(p[4*i:]))
			}
			a.Values = v
		case TypeFloat32:
			v := make([]float32, n)
			for i := range v {
				v[i] = math.Float32frombits(le.Uint32(p[4*i:]))
			}
			a.Values = v
		case TypeBool:
			v := make([]bool, n)
			for i := range v {
				if p[i] > 1 {
					return Array{}, c.errorf(ErrInvalid, field, c.off-n+i, "bool byte is %d, expected 0 or 1", p[i])
				}
				v[i] = p[i] == 1
			}
			a.Values = v
		case TypeUint64:
			v := make([]uint64, n)
			for i := range v {
				v[i] = le.Uint64(p[8*i:])
			}
			a.Values = v
		case TypeInt64:
			v := make([]int64, n)
			for i := range v {
				v[i] = int64(le.Uint64(p[8*i:]))
			}
			a.Values = v
		case TypeFloat64:
			v := make([]float64, n)
			for i := range v {
				v[i] = math.Float64frombits(le.Uint64(p[8*i:]))
			}
			a.Values = v
		}
		return a, nil
	}
	if t == TypeString {
		v := make([]string, n)
		for i := range v {
			if v[i], err = c.str(field); err != nil {
				return Array{}, err
			}
		}
		a.Values = v
		return a, nil
	}
	v := make([]Array, n)
	for i := range v {
		if v[i], err = c.array(field, depth+1); err != nil {
			return Array{}, err
		}
	}
	a.Values = v
	return a, nil
}

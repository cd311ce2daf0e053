package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"strata/runtime/tensor"
)

// WriteTensor is one tensor to write. Dims are in ggml order (Dims[0] is
// the contiguous dimension). The bytes come from Data (exactly the
// tensor's size), else from WriteData (which must write exactly that
// many), else they are zeros — written as a hole when the destination is
// an io.WriteSeeker such as *os.File, so huge synthetic files take no disk.
type WriteTensor struct {
	Name      string
	Type      tensor.Type
	Dims      []uint64
	Data      []byte
	WriteData func(w io.Writer) error
}

// Write encodes a GGUF v3 file: header, metadata in order, tensor infos,
// and each tensor's data padded to the alignment (general.alignment from
// md, or 32), the layout llama.cpp's gguf writer produces.
func Write(w io.Writer, md *Metadata, tensors []WriteTensor) error {
	align := uint64(DefaultAlignment)
	if v, ok := md.Get("general.alignment"); ok {
		a, isU32 := v.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: write: general.alignment %v (%T) must be a power of two uint32", v, v)
		}
		align = uint64(a)
	}
	offsets := make([]uint64, len(tensors))
	sizes := make([]uint64, len(tensors))
	var next uint64
	seen := map[string]bool{}
	for i, t := range tensors {
		if seen[t.Name] {
			return fmt.Errorf("gguf: write: duplicate tensor %q", t.Name)
		}
		seen[t.Name] = true
		if len(t.Dims) == 0 || len(t.Dims) > maxDims {
			return fmt.Errorf("gguf: write: tensor %q has %d dims, want 1..%d", t.Name, len(t.Dims), maxDims)
		}
		n := int64(1)
		for _, d := range t.Dims {
			n *= int64(d)
		}
		size, err := t.Type.RowBytes(n)
		if err != nil {
			return fmt.Errorf("gguf: write: tensor %q: %w", t.Name, err)
		}
		if t.Data != nil && int64(len(t.Data)) != size {
			return fmt.Errorf("gguf: write: tensor %q: %d bytes of data, its shape needs %d", t.Name, len(t.Data), size)
		}
		sizes[i] = uint64(size)
		offsets[i] = next
		next = alignUp(next+uint64(size), align)
	}

	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.u32(magic)
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(md.Len()))
	for _, kv := range md.KVs() {
		e.str(kv.Key)
		t, ok := TypeOf(kv.Value)
		if !ok {
			return fmt.Errorf("gguf: write: metadata %q has unsupported type %T", kv.Key, kv.Value)
		}
		e.u32(uint32(t))
		if err := e.value(kv.Value); err != nil {
			return fmt.Errorf("gguf: write: metadata %q: %w", kv.Key, err)
		}
	}
	for i, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offsets[i])
	}
	e.pad(align)
	seeker, _ := w.(io.WriteSeeker)
	hole := false // the file so far ends in a hole
	for i, t := range tensors {
		switch {
		case t.Data != nil:
			e.bytes(t.Data)
			hole = false
		case t.WriteData != nil:
			start := e.n
			if err := t.WriteData(e); err != nil {
				return fmt.Errorf("gguf: write: tensor %q: %w", t.Name, err)
			}
			if e.err == nil && e.n-start != sizes[i] {
				return fmt.Errorf("gguf: write: tensor %q: wrote %d bytes, its shape needs %d", t.Name, e.n-start, sizes[i])
			}
			hole = false
		case seeker != nil:
			if e.err == nil {
				e.err = bw.Flush()
			}
			if e.err == nil {
				_, e.err = seeker.Seek(int64(sizes[i]), io.SeekCurrent)
			}
			e.n += sizes[i]
			hole = true
		default:
			var zero [4096]byte
			for left := sizes[i]; left > 0 && e.err == nil; left -= min(left, 4096) {
				e.bytes(zero[:min(left, 4096)])
			}
		}
		if pad := alignUp(e.n, align) - e.n; pad > 0 {
			e.pad(align)
			hole = false
		}
	}
	if hole && e.err == nil {
		// A file cannot end in a hole: write its last byte.
		if e.err = bw.Flush(); e.err == nil {
			if _, e.err = seeker.Seek(-1, io.SeekCurrent); e.err == nil {
				e.u8(0)
			}
			e.n--
		}
	}
	if e.err != nil {
		return fmt.Errorf("gguf: write: %w", e.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}

// encoder writes little-endian values, remembering the first error and
// the number of bytes written (for padding).
type encoder struct {
	w   io.Writer
	n   uint64
	err error
	buf [8]byte
}

// Write makes the encoder an io.Writer for WriteTensor.WriteData.
func (e *encoder) Write(p []byte) (int, error) {
	e.bytes(p)
	if e.err != nil {
		return 0, e.err
	}
	return len(p), nil
}

func (e *encoder) bytes(p []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(p)
	e.n += uint64(n)
	e.err = err
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.bytes(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.bytes(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.bytes(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.bytes(e.buf[:8])
}
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.bytes([]byte(s)) }

func (e *encoder) pad(align uint64) {
	var zero [64]byte
	for e.n%align != 0 && e.err == nil {
		e.bytes(zero[:min(align-e.n%align, 64)])
	}
}

func (e *encoder) value(v any) error {
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case Array:
		et, ok := elemSliceType(x.Values)
		if !ok || et != x.Type {
			return fmt.Errorf("array of %s holds %T", x.Type, x.Values)
		}
		e.u32(uint32(x.Type))
		e.u64(uint64(x.Len()))
		return e.elems(x.Values)
	default:
		return fmt.Errorf("unsupported type %T", v)
	}
	return nil
}

func (e *encoder) elems(values any) error {
	switch v := values.(type) {
	case []uint8:
		e.bytes(v)
	case []int8:
		for _, x := range v {
			e.u8(uint8(x))
		}
	case []uint16:
		for _, x := range v {
			e.u16(x)
		}
	case []int16:
		for _, x := range v {
			e.u16(uint16(x))
		}
	case []uint32:
		for _, x := range v {
			e.u32(x)
		}
	case []int32:
		for _, x := range v {
			e.u32(uint32(x))
		}
	case []float32:
		for _, x := range v {
			e.u32(math.Float32bits(x))
		}
	case []bool:
		for _, x := range v {
			e.value(x)
		}
	case []string:
		for _, x := range v {
			e.str(x)
		}
	case []uint64:
		for _, x := range v {
			e.u64(x)
		}
	case []int64:
		for _, x := range v {
			e.u64(uint64(x))
		}
	case []float64:
		for _, x := range v {
			e.u64(math.Float64bits(x))
		}
	case []Array:
		for _, x := range v {
			if err := e.value(x); err != nil {
				return err
			}
		}
	}
	return nil
}

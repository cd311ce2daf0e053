package gpu

import (
	"fmt"
	"unsafe"

	"strata/runtime/tensor"
)

// Matrix is a weight matrix held by a device, in its GGUF layout (the
// shaders dequantize as they read).
type Matrix struct {
	Type       tensor.Type
	Rows, Cols int
	buf        *Buffer
}

// Kernels holds the matrix-times-vectors kernel of each weight type this
// package has, with the activations' form it takes and the columns its
// blocks come in; other types stay on the CPU.
var kernelOf = map[tensor.Type]struct {
	name  string
	input inputForm
	block int
}{
	tensor.F32:  {"matmul_f32", floats, 1},
	tensor.F16:  {"matmul_f16", floats, 2},
	tensor.Q8_0: {"matmul_q8_0", quants32, 32},
	tensor.Q4_0: {"matmul_q4_0", quants32, 32},
	tensor.Q4_K: {"matmul_q4_k", quantsK, 256},
	tensor.Q6_K: {"matmul_q6_k", quantsK, 256},
}

// inputForm is how a kernel takes the vectors.
type inputForm int

const (
	floats   inputForm = iota // as they are
	quants32                  // quants and scales of blocks of 32 (tensor.QuantizeQ32)
	quantsK                   // Q8_K: quants, scales and 16-sums of blocks of 256 (tensor.QuantizeQ8K)
)

// Upload gives the device m: read in place where it can (Import), else
// copied into device memory.
func (d *Device) Upload(m tensor.Matrix) (*Matrix, error) {
	k, ok := kernelOf[m.Type]
	if !ok {
		return nil, fmt.Errorf("gpu: no kernel for %v weights yet", m.Type)
	}
	if m.Cols%k.block != 0 {
		return nil, fmt.Errorf("gpu: a %v matrix of %d columns (the kernel takes multiples of %d)", m.Type, m.Cols, k.block)
	}
	// In place where the device reads host memory (the mmap'd weights
	// are not copied: m.Data must stay mapped until Free), else a copy.
	b, err := d.Import(m.Data)
	if err != nil {
		if b, err = d.newLocalBuffer(len(m.Data)); err != nil {
			return nil, err
		}
		if err := d.fill(b, m.Data); err != nil {
			b.Free()
			return nil, err
		}
	}
	return &Matrix{Type: m.Type, Rows: m.Rows, Cols: m.Cols, buf: b}, nil
}

// stagingChunk is the most bytes fill copies through host-visible memory
// at a time.
const stagingChunk = 64 << 20

// fill copies data into b: directly where the host maps b, else through
// a host-visible staging buffer, a chunk at a time, by copy_blocks.
func (d *Device) fill(b *Buffer, data []byte) error {
	if !b.local {
		copy(b.Bytes(), data)
		return nil
	}
	staging, err := d.NewBuffer(min(len(data), stagingChunk))
	if err != nil {
		return err
	}
	defer staging.Free()
	for off := 0; off < len(data); off += stagingChunk {
		n := copy(staging.Bytes(), data[off:])
		words := uint32((n + 3) / 4)
		push := pushU32(1, 1, words, 0, 0, 0, uint32(off/4), 0, 0)
		if err := d.run(dispatch{name: "copy_blocks", buffers: []*Buffer{staging, b}, push: push, groups: elementGroups(int(words))}); err != nil {
			return err
		}
	}
	return nil
}

// Imported reports whether the device reads the matrix where it lies in
// host memory (no copy).
func (m *Matrix) Imported() bool { return m.buf.Imported() }

// Free releases the matrix's device memory.
func (m *Matrix) Free() { m.buf.Free() }

// MatMul computes out[v*Rows+r] = W[r] · x[v*Cols:(v+1)*Cols] for the n
// vectors of x, as tensor.MatMulAct does on the CPU: float weights take x
// as it is, quantized ones take x quantized the CPU's way (blocks of 32
// for Q8_0 and Q4_0, Q8_K for the K-quants), so every block's integer
// dot is the CPU's; the float sums of the blocks and of the row run in
// another order, so results agree within float rounding, not bit for bit.
func (d *Device) MatMul(out []float32, w *Matrix, x []float32, n int) error {
	if n < 1 || len(x) != n*w.Cols || len(out) != n*w.Rows {
		return fmt.Errorf("gpu: MatMul of %dx%d with %d floats for %d vectors into %d", w.Rows, w.Cols, len(x), n, len(out))
	}
	k := kernelOf[w.Type]
	d.productMu.Lock()
	defer d.productMu.Unlock()
	var s []*Buffer
	add := func(size int) (*Buffer, error) {
		b, err := d.productBuffer(len(s), size)
		if err == nil {
			s = append(s, b)
		}
		return b, err
	}
	switch k.input {
	case floats:
		xb, err := add(4 * len(x))
		if err != nil {
			return err
		}
		copy(xb.Float32s(), x)
	case quants32, quantsK:
		block := 32
		if k.input == quantsK {
			block = 256
		}
		q, err := add(len(x))
		if err != nil {
			return err
		}
		scales, err := add(4 * len(x) / block)
		if err != nil {
			return err
		}
		qs := unsafe.Slice((*int8)(unsafe.Pointer(&q.Bytes()[0])), len(x))
		if k.input == quants32 {
			tensor.QuantizeQ32(x, qs, scales.Float32s())
			break
		}
		sums, err := add(2 * len(x) / 16)
		if err != nil {
			return err
		}
		tensor.QuantizeQ8K(x, qs, scales.Float32s(), unsafe.Slice((*int16)(unsafe.Pointer(&sums.Bytes()[0])), len(x)/16))
	}
	y, err := add(4 * len(out))
	if err != nil {
		return err
	}
	if err := d.run(dispatch{name: k.name, buffers: append([]*Buffer{w.buf}, s...), push: pushU32(uint32(w.Rows), uint32(w.Cols), 0), groups: workgroups(w.Rows, n)}); err != nil {
		return err
	}
	copy(out, y.Float32s())
	return nil
}

// productMin is the smallest of MatMul's buffers.
const productMin = 4096

// productBuffer is MatMul's buffer i, of at least size bytes (a larger
// one does: the kernels read and write only what the shape says). Call
// with d.productMu held.
func (d *Device) productBuffer(i, size int) (*Buffer, error) {
	if b := d.product[i]; b != nil && b.size >= uint64(size) {
		return b, nil
	}
	if b := d.product[i]; b != nil {
		b.Free()
		d.product[i] = nil
	}
	b, err := d.NewBuffer(max(size, productMin))
	if err != nil {
		return nil, err
	}
	d.product[i] = b
	return b, nil
}

// maxGroups is the most workgroups a dispatch has in one dimension that
// every Vulkan device allows.
const maxGroups = 65535

// workgroups spreads rows over x and y (x*y ≥ rows; shaders skip the
// extra), and vectors over z.
func workgroups(rows, vectors int) [3]uint32 {
	gx := min(rows, maxGroups)
	return [3]uint32{uint32(gx), uint32((rows + gx - 1) / gx), uint32(vectors)}
}

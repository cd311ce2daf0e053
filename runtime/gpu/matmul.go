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

// kernelOf names the matrix-times-vectors kernel of each weight type this
// package has so far; other types stay on the CPU.
var kernelOf = map[tensor.Type]string{
	tensor.F32:  "matmul_f32",
	tensor.Q8_0: "matmul_q8_0",
}

// Supports reports whether the device multiplies weights of type t.
func Supports(t tensor.Type) bool {
	_, ok := kernelOf[t]
	return ok
}

// Upload copies m into device memory.
func (d *Device) Upload(m tensor.Matrix) (*Matrix, error) {
	if !Supports(m.Type) {
		return nil, fmt.Errorf("gpu: no kernel for %v weights yet", m.Type)
	}
	if m.Type == tensor.Q8_0 && m.Cols%32 != 0 {
		return nil, fmt.Errorf("gpu: a Q8_0 matrix of %d columns", m.Cols)
	}
	b, err := d.NewBuffer(len(m.Data))
	if err != nil {
		return nil, err
	}
	copy(b.Bytes(), m.Data)
	return &Matrix{Type: m.Type, Rows: m.Rows, Cols: m.Cols, buf: b}, nil
}

// Free releases the matrix's device memory.
func (m *Matrix) Free() { m.buf.Free() }

// MatMul computes out[v*Rows+r] = W[r] · x[v*Cols:(v+1)*Cols] for the n
// vectors of x, as tensor.MatMulAct does on the CPU: F32 weights take x
// as it is, Q8_0 weights take x quantized into 32-blocks the CPU's way
// (tensor.QuantizeQ32), so every block's integer dot is the CPU's; the
// float sums of the blocks and of the row run in another order, so
// results agree within float rounding, not bit for bit.
func (d *Device) MatMul(out []float32, w *Matrix, x []float32, n int) error {
	if n < 1 || len(x) != n*w.Cols || len(out) != n*w.Rows {
		return fmt.Errorf("gpu: MatMul of %dx%d with %d floats for %d vectors into %d", w.Rows, w.Cols, len(x), n, len(out))
	}
	y, err := d.NewBuffer(4 * len(out))
	if err != nil {
		return err
	}
	defer y.Free()
	groups := workgroups(w.Rows, n)
	push := pushU32(uint32(w.Rows), uint32(w.Cols))
	switch w.Type {
	case tensor.F32:
		xb, err := d.NewBuffer(4 * len(x))
		if err != nil {
			return err
		}
		defer xb.Free()
		copy(xb.Float32s(), x)
		err = d.run(dispatch{name: kernelOf[w.Type], buffers: []*Buffer{w.buf, xb, y}, push: push, groups: groups})
		if err != nil {
			return err
		}
	case tensor.Q8_0:
		q, err := d.NewBuffer(len(x))
		if err != nil {
			return err
		}
		defer q.Free()
		s, err := d.NewBuffer(4 * len(x) / 32)
		if err != nil {
			return err
		}
		defer s.Free()
		qs := unsafe.Slice((*int8)(unsafe.Pointer(&q.Bytes()[0])), len(x))
		tensor.QuantizeQ32(x, qs, s.Float32s()[:len(x)/32])
		err = d.run(dispatch{name: kernelOf[w.Type], buffers: []*Buffer{w.buf, q, s, y}, push: push, groups: groups})
		if err != nil {
			return err
		}
	}
	copy(out, y.Float32s())
	return nil
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

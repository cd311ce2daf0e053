package gpu

import (
	"fmt"
	"math"

	"strata/runtime/tensor"
)

// The other operations of a layer, as the CPU's tensor package computes
// them, each on host slices (a submission per call, like MatMul): the
// pieces a layer on the device will chain without leaving it.

// upload returns a device buffer holding v.
func (d *Device) upload(v []float32) (*Buffer, error) {
	b, err := d.NewBuffer(4 * max(len(v), 1))
	if err != nil {
		return nil, err
	}
	copy(b.Float32s(), v)
	return b, nil
}

// scratch holds a call's buffers, freed together.
type scratch []*Buffer

func (s *scratch) add(b *Buffer, err error) (*Buffer, error) {
	if err == nil {
		*s = append(*s, b)
	}
	return b, err
}

func (s scratch) free() {
	for _, b := range s {
		b.Free()
	}
}

// RMSNorm sets each of the rows of x (len(weight) elements each) to
// itself times weight over its root mean square, as tensor.RMSNorm.
func (d *Device) RMSNorm(out, x, weight []float32, eps float32) error {
	n := len(weight)
	if n == 0 || len(x)%n != 0 || len(out) != len(x) {
		return fmt.Errorf("gpu: RMSNorm of %d values by a weight of %d into %d", len(x), n, len(out))
	}
	var s scratch
	defer s.free()
	xb, err := s.add(d.upload(x))
	if err != nil {
		return err
	}
	wb, err := s.add(d.upload(weight))
	if err != nil {
		return err
	}
	yb, err := s.add(d.NewBuffer(4 * len(out)))
	if err != nil {
		return err
	}
	rows := len(x) / n
	push := append(pushU32(uint32(rows), uint32(n)), pushU32(math.Float32bits(eps))...)
	if err := d.run(dispatch{name: "rmsnorm", buffers: []*Buffer{xb, wb, yb}, push: push, groups: workgroups(rows, 1)}); err != nil {
		return err
	}
	copy(out, yb.Float32s())
	return nil
}

// SwiGLU sets out[i] = SiLU(gate[i]) * up[i], as tensor.SwiGLU.
func (d *Device) SwiGLU(out, gate, up []float32) error {
	if len(gate) != len(up) || len(out) != len(gate) || len(out) == 0 {
		return fmt.Errorf("gpu: SwiGLU of %d and %d into %d", len(gate), len(up), len(out))
	}
	var s scratch
	defer s.free()
	gb, err := s.add(d.upload(gate))
	if err != nil {
		return err
	}
	ub, err := s.add(d.upload(up))
	if err != nil {
		return err
	}
	yb, err := s.add(d.NewBuffer(4 * len(out)))
	if err != nil {
		return err
	}
	if err := d.run(dispatch{name: "swiglu", buffers: []*Buffer{gb, ub, yb}, push: pushU32(uint32(len(out))), groups: elementGroups(len(out))}); err != nil {
		return err
	}
	copy(out, yb.Float32s())
	return nil
}

// RoPE rotates, in place, the heads of each row of x (row r at position
// positions[r]), as tensor.RoPEFactors: the angles' cosines and sines come
// from tensor.RoPETable, the rotation runs on the device.
func (d *Device) RoPE(x []float32, heads, headDim, ropeDim int, positions []int, freqBase, freqScale float32, neox bool, factors []float32) error {
	rows := len(positions)
	if rows == 0 || ropeDim%2 != 0 || ropeDim > headDim || len(x) != rows*heads*headDim {
		return fmt.Errorf("gpu: RoPE of %d values, %d rows of %d heads of %d (%d rotated)", len(x), rows, heads, headDim, ropeDim)
	}
	half := ropeDim / 2
	table := make([]float32, 2*half*rows)
	for r, pos := range positions {
		tensor.RoPETable(table[2*half*r:2*half*(r+1)], ropeDim, pos, freqBase, freqScale, factors)
	}
	var s scratch
	defer s.free()
	xb, err := s.add(d.upload(x))
	if err != nil {
		return err
	}
	tb, err := s.add(d.upload(table))
	if err != nil {
		return err
	}
	nx := uint32(0)
	if neox {
		nx = 1
	}
	push := pushU32(uint32(rows), uint32(heads), uint32(headDim), uint32(ropeDim), nx)
	if err := d.run(dispatch{name: "rope", buffers: []*Buffer{xb, tb}, push: push, groups: elementGroups(rows * heads * half)}); err != nil {
		return err
	}
	copy(x, xb.Float32s())
	return nil
}

// elementGroups covers n elements with workgroups of 64, over x and then y.
func elementGroups(n int) [3]uint32 {
	groups := (n + 63) / 64
	gx := min(groups, maxGroups)
	return [3]uint32{uint32(gx), uint32((groups + gx - 1) / gx), 1}
}

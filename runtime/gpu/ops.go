package gpu

import (
	"fmt"
	"math"

	"strata/runtime/tensor"
)

// The other operations of a layer, as the CPU's tensor package computes
// them, each on host slices (a submission per call, like MatMul): the
// pieces a layer on the device will chain without leaving it.

// scratch holds a call's buffers, freed together. free has a pointer
// receiver so that `defer s.free()` frees what was added after the defer
// (a value receiver would free the empty list the defer saw).
type scratch []*Buffer

func (s *scratch) add(b *Buffer, err error) (*Buffer, error) {
	if err == nil {
		*s = append(*s, b)
	}
	return b, err
}

// make allocates a buffer of sizes[i] bytes into each *dsts[i], kept in
// s; on an error none is left allocated.
func (s *scratch) make(d *Device, sizes []int, dsts ...**Buffer) error {
	for i, dst := range dsts {
		buf, err := s.add(d.NewBuffer(sizes[i]))
		if err != nil {
			s.free()
			return err
		}
		*dst = buf
	}
	return nil
}

func (s *scratch) free() {
	for _, b := range *s {
		b.Free()
	}
	*s = nil
}

// runFloats runs kernel name with ins as its first bindings and, for
// outLen > 0, an output binding of outLen floats after them; then copies
// into dst the output, or with outLen 0 the first input (rewritten in
// place).
func (d *Device) runFloats(name string, dst []float32, ins [][]float32, outLen int, push []byte, groups [3]uint32) error {
	var s scratch
	defer s.free()
	for _, v := range append(ins, make([]float32, outLen)) {
		if len(v) == 0 {
			continue // no output binding
		}
		b, err := s.add(d.NewBuffer(4 * len(v)))
		if err != nil {
			return err
		}
		copy(b.Float32s(), v)
	}
	if err := d.run(dispatch{name: name, buffers: s, push: push, groups: groups}); err != nil {
		return err
	}
	result := s[0]
	if outLen > 0 {
		result = s[len(s)-1]
	}
	copy(dst, result.Float32s())
	return nil
}

// RMSNorm sets each of the rows of x (len(weight) elements each) to
// itself times weight over its root mean square, as tensor.RMSNorm.
func (d *Device) RMSNorm(out, x, weight []float32, eps float32) error {
	n := len(weight)
	if n == 0 || len(x)%n != 0 || len(out) != len(x) {
		return fmt.Errorf("gpu: RMSNorm of %d values by a weight of %d into %d", len(x), n, len(out))
	}
	rows := len(x) / n
	push := pushU32(uint32(rows), uint32(n), math.Float32bits(eps), uint32(n))
	return d.runFloats("rmsnorm", out, [][]float32{x, weight}, len(out), push, workgroups(rows, 1))
}

// SwiGLU sets out[i] = SiLU(gate[i]) * up[i], as tensor.SwiGLU.
func (d *Device) SwiGLU(out, gate, up []float32) error {
	if len(gate) != len(up) || len(out) != len(gate) || len(out) == 0 {
		return fmt.Errorf("gpu: SwiGLU of %d and %d into %d", len(gate), len(up), len(out))
	}
	return d.runFloats("swiglu", out, [][]float32{gate, up}, len(out), pushU32(uint32(len(out))), elementGroups(len(out)))
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
	nx := uint32(0)
	if neox {
		nx = 1
	}
	push := pushU32(uint32(rows), uint32(heads), uint32(headDim), uint32(ropeDim), nx, 0)
	return d.runFloats("rope", x, [][]float32{x, table}, 0, push, elementGroups(rows*heads*half))
}

// elementGroups covers n elements with workgroups of 64, over x and then y.
func elementGroups(n int) [3]uint32 {
	groups := (n + 63) / 64
	gx := min(groups, maxGroups)
	return [3]uint32{uint32(gx), uint32((groups + gx - 1) / gx), 1}
}

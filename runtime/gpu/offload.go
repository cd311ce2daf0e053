package gpu

import (
	"fmt"
	"sync"

	"strata/runtime/tensor"
)

// Offload holds a model's matrices on a device and computes their
// products there (model.Accelerator): a model's layers offloaded, one
// matrix product at a time, the rest of the layer on the CPU.
type Offload struct {
	d     *Device
	mu    sync.Mutex
	held  map[*byte]*Matrix // by the first byte of the matrix's data (its mmap'd weights)
	bytes int64
}

// Offload uploads the matrices of ws that the device has kernels for;
// the others stay on the CPU.
func (d *Device) Offload(ws []tensor.Matrix) (*Offload, error) {
	o := &Offload{d: d, held: map[*byte]*Matrix{}}
	for _, w := range ws {
		if !Supports(w.Type) || len(w.Data) == 0 || o.held[&w.Data[0]] != nil || w.Cols%kernelOf[w.Type].block != 0 {
			continue
		}
		m, err := d.Upload(w)
		if err != nil {
			o.Free()
			return nil, fmt.Errorf("gpu: offloading a %dx%d %v matrix: %w", w.Rows, w.Cols, w.Type, err)
		}
		o.held[&w.Data[0]] = m
		o.bytes += int64(len(w.Data))
	}
	return o, nil
}

// Held is how many matrices, and how many bytes of weights, the device
// holds.
func (o *Offload) Held() (int, int64) { return len(o.held), o.bytes }

// MatMul implements model.Accelerator.
func (o *Offload) MatMul(out []float32, w tensor.Matrix, x []float32, n int) (bool, error) {
	if len(w.Data) == 0 {
		return false, nil
	}
	o.mu.Lock()
	m := o.held[&w.Data[0]]
	o.mu.Unlock()
	if m == nil || m.Rows != w.Rows || m.Cols != w.Cols || m.Type != w.Type {
		return false, nil
	}
	return true, o.d.MatMul(out, m, x, n)
}

// Free releases the matrices.
func (o *Offload) Free() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, m := range o.held {
		m.Free()
		delete(o.held, k)
	}
	o.bytes = 0
}

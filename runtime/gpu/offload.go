package gpu

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"strata/runtime/model"
	"strata/runtime/tensor"
)

// Offload holds a model's matrices on a device and computes their
// products there (model.Accelerator): a model's layers offloaded, one
// matrix product at a time, the rest of the layer on the CPU.
type Offload struct {
	d     *Device
	mu    sync.RWMutex // held across a product: Free waits for it
	calls atomic.Int64
	held  map[*byte]*Matrix // by the first byte of the matrix's data (its mmap'd weights)
	bytes int64
	// copied is the bytes copied to the device (the rest is read in
	// place: imported host memory).
	copied int64
	// Set by Accelerate: it opened the device, for layers of of.
	own        bool
	layers, of int

	// Whole layers (layer.go), set by OffloadLayers: the model, the
	// blocks the device runs entire and their norms and biases (small),
	// the widest of their feed-forward networks, and the scratch of a
	// call (one call at a time: layerMu).
	m     *model.Model
	whole map[int]*wholeLayer
	// stacks are the held 3-D tensors (mixture-of-experts layers'
	// experts, latent attention's per-head matrices), whole, in which an
	// expert's or a head's matrix is a view.
	stacks     []stackedTensor
	expertRuns atomic.Int64 // Experts calls that ran
	layerRuns  atomic.Int64 // Layer calls that ran on the device (whole layers or attention halves)
	routedRuns atomic.Int64 // of them, mixture-of-experts layers routed on the device
	small      []*Buffer
	ffn        int
	layerMu    sync.Mutex // the scratch of layers and experts: one call at a time
	work       layerWork
	latent     latentWork
	moe        moeWork
	kv         kvImports // the KV caches' layers the device has imported (or, with VRAM, mirrors)
	kvBufs     []*Buffer // a call's list of them
	syncs      []kvSync  // a call's mirrors (VRAM)
	staging    *Buffer   // the mirrors' loads and stores pass through it (VRAM)
}

// Offload uploads the matrices of ws that the device has kernels for and
// can bind whole (its maxStorageBufferRange: 128 MB on some GPUs); the
// others stay on the CPU.
func (d *Device) Offload(ws []tensor.Matrix) (*Offload, error) {
	o := &Offload{d: d, held: map[*byte]*Matrix{}, whole: map[int]*wholeLayer{}}
	for _, w := range ws {
		k, ok := kernelOf[w.Type]
		if !ok || len(w.Data) == 0 || o.held[&w.Data[0]] != nil || w.Cols%k.block != 0 ||
			(d.maxRange > 0 && uint64(len(w.Data)) > d.maxRange) {
			continue
		}
		m, err := d.Upload(w)
		if err != nil {
			o.Free()
			return nil, fmt.Errorf("gpu: offloading a %dx%d %v matrix: %w", w.Rows, w.Cols, w.Type, err)
		}
		o.held[&w.Data[0]] = m
		o.bytes += int64(len(w.Data))
		if !m.Imported() {
			o.copied += int64(len(w.Data))
		}
	}
	return o, nil
}

// Held is how many matrices, and how many bytes of weights, the device
// holds.
func (o *Offload) Held() (int, int64) { return len(o.held), o.bytes }

// Copied is how many of the held bytes were copied into device memory
// (the others the device reads in place, in the mmap'd file).
func (o *Offload) Copied() int64 { return o.copied }

// MatMul implements model.Accelerator.
func (o *Offload) MatMul(out []float32, w tensor.Matrix, x []float32, n int) (bool, error) {
	if len(w.Data) == 0 {
		return false, nil
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	m := o.matrix(w)
	if m == nil {
		if m = o.stacked(w); m == nil {
			return false, nil
		}
	}
	o.calls.Add(1)
	return true, o.d.MatMul(out, m, x, n)
}

// Calls is how many products the device has computed.
func (o *Offload) Calls() int64 { return o.calls.Load() }

// Free releases the matrices.
func (o *Offload) Free() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, m := range o.held {
		m.Free()
		delete(o.held, k)
	}
	clear(o.whole)
	o.stacks = nil
	(*scratch)(&o.small).free() // and empties it
	o.layerMu.Lock()
	o.work.free()
	o.latent.free()
	o.moe.free()
	o.kv.free()
	if o.staging != nil {
		o.staging.Free()
		o.staging = nil
	}
	o.layerMu.Unlock()
	o.bytes, o.copied = 0, 0
}

// Device choices (--gpu): off, auto (the first GPU; none on a machine
// whose only Vulkan device is the CPU, such as lavapipe), or an index
// into Devices (any kind, lavapipe too).
const (
	DeviceOff  = "off"
	DeviceAuto = "auto"
)

// stackLimit, where set, holds 3-D tensors in parts of at most this many
// bytes (tests: the parts a tensor over the binding range is held in).
var stackLimit uint64

// AllLayers asks Accelerate for every layer and the output head.
const AllLayers = -1

// ParseLayers reads --gpu-layers: a count, or all ("" too).
func ParseLayers(s string) (int, error) {
	if s == "all" || s == "" {
		return AllLayers, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--gpu-layers %q: want a number of layers or all", s)
	}
	return n, nil
}

// OpenChoice opens the device that choice names (--gpu): nil for off,
// and for auto on a machine without a GPU (no Vulkan, or only a device
// on the CPU such as lavapipe, which is no faster than the CPU's own
// kernels).
func OpenChoice(choice string) (*Device, error) {
	if choice == "" || choice == DeviceOff {
		return nil, nil
	}
	index := -1
	if choice != DeviceAuto {
		i, err := strconv.Atoi(choice)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("--gpu %q: want auto, off or a device index (strata doctor lists them)", choice)
		}
		index = i
	}
	d, err := Open(index)
	if err != nil {
		if choice == DeviceAuto {
			return nil, nil // no Vulkan: the CPU it is
		}
		return nil, err
	}
	if choice == DeviceAuto && d.Kind == "CPU" {
		d.Close()
		return nil, nil
	}
	return d, nil
}

// OffloadLayers puts the matrix products of m's last layers on the
// device (AllLayers, or more than m has: every layer of the shard and its
// output head, as llama.cpp's -ngl counts them).
func (d *Device) OffloadLayers(m *model.Model, layers int) (*Offload, error) {
	n := len(m.Blocks)
	if layers == AllLayers || layers > n {
		layers = n
	}
	limit := d.maxRange
	if stackLimit > 0 && (limit == 0 || stackLimit < limit) {
		limit = stackLimit
	}
	stacks := stackedTensors(m, n-layers, n, limit)
	o, err := d.Offload(append(m.Products(n-layers, n, layers == n), stacks...))
	if err != nil {
		return nil, err
	}
	o.holdStacks(stacks)
	o.m = m
	if err := o.wholeLayers(m, n-layers, n); err != nil {
		o.Free()
		return nil, err
	}
	o.layers, o.of = layers, n
	return o, nil
}

// Accelerate opens the device that choice names and puts the matrix
// products of m's last layers there (OffloadLayers); nil for off, for
// auto on a machine without a GPU, or for 0 layers. Close releases the
// device too.
func Accelerate(m *model.Model, choice string, layers int) (*Offload, error) {
	if layers == 0 {
		return nil, nil
	}
	d, err := OpenChoice(choice)
	if d == nil || err != nil {
		return nil, err
	}
	o, err := d.OffloadLayers(m, layers)
	if err != nil {
		d.Close()
		return nil, err
	}
	o.own = true
	return o, nil
}

// String says where the products run, for logs and reports.
func (o *Offload) String() string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	held, bytes := o.Held()
	s := fmt.Sprintf("%s (%s): %d matrices, %.1f MB (%.1f MB copied, the rest read in place)", o.d.Name, o.d.Kind, held, float64(bytes)/1e6, float64(o.copied)/1e6)
	if o.d.vram {
		s = fmt.Sprintf("%s (%s): %d matrices, %.1f MB copied into its own memory (the KV caches mirrored there)", o.d.Name, o.d.Kind, held, float64(bytes)/1e6)
	}
	switch {
	case o.of > 0 && o.layers == o.of:
		s += fmt.Sprintf(", all %d layers and the output head", o.of)
	case o.of > 0:
		s += fmt.Sprintf(", the last %d of %d layers", o.layers, o.of)
	}
	if o.of > 0 {
		whole, attention := o.WholeLayers()
		s += fmt.Sprintf(" (%d whole, %d the attention half, the rest a matrix product at a time; %d stacked tensors of experts or heads)", whole, attention, len(o.stacks))
	}
	return s
}

// Close frees the matrices and, when Accelerate opened it, the device.
func (o *Offload) Close() {
	o.Free()
	if o.own {
		o.d.Close()
	}
}

// MemoryBytes is the device memory the Offload allocates, at most, when
// its calls carry up to rows rows: weights it copied, the layers' norms
// and biases, the scratch of whole layers and of the experts'
// submission, and MatMul's buffers (the Device's, shared by the Offloads
// on it, so counted whole for each: an upper bound). Host memory the
// device reads in place (mmap'd weights, KV caches) is not in it, nor,
// on a device with memory of its own, the KV caches' mirrors and the
// staging buffer their loads pass through (as large as the longest cache
// loaded at once). A node logs it per shard.
func (o *Offload) MemoryBytes(rows int) uint64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	total := o.scratchBytes(rows)
	if o.copied > 0 {
		total += uint64(o.copied) + o.d.allocAlign.Load()*uint64(len(o.held)) // each copy is an allocation
	}
	return total
}

// ScratchBytes is MemoryBytes less the copied weights: on a discrete GPU
// (whose weights lie in its own memory) the host-visible memory its
// calls use.
func (o *Offload) ScratchBytes(rows int) uint64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.scratchBytes(rows)
}

func (o *Offload) scratchBytes(rows int) uint64 {
	slack := o.d.allocAlign.Load() // what a driver adds to an allocation (seen here, with the weights' norms)
	var total uint64
	for _, b := range o.small {
		total += b.owned
	}
	add := func(sizes []int) {
		for _, s := range sizes {
			total += uint64(s+3)&^3 + slack
		}
	}
	if len(o.whole) > 0 {
		add(layerWorkSizes(o.m.Config, o.ffn, rows))
		if o.m.MLA.KVLoraRank > 0 {
			add(latentWorkSizes(o.m.Config, rows))
		}
	}
	if len(o.stacks) > 0 && o.m.Experts > 0 {
		c := o.m.Config
		add(moeWorkSizes(rows, rows*c.ExpertsUsed, c.Embd, c.ExpertFFN, c.Experts))
	}
	var slots []int
	for _, m := range o.held {
		if !o.isStack(m) {
			for i, size := range productSizes(rows, m) {
				if i == len(slots) {
					slots = append(slots, 0)
				}
				slots[i] = max(slots[i], size)
			}
		}
	}
	add(slots)
	return total
}

func (o *Offload) isStack(m *Matrix) bool {
	for _, t := range o.stacks {
		if t.m == m {
			return true
		}
	}
	return false
}

// bufferSizes are buffer sizes in bytes, each at least a word.
func bufferSizes(sizes ...int) []int {
	for i := range sizes {
		sizes[i] = max(4, sizes[i])
	}
	return sizes
}

// productSizes are the sizes of MatMul's buffers (productBuffer) for n
// vectors through m, in their slots: the input (floats, or bytes of
// quants, then their scales and the K-quants' 16-sums), then the output.
func productSizes(n int, m *Matrix) []int {
	in, out := n*m.Cols, n*m.Rows
	var sizes []int
	switch kernelOf[m.Type].input {
	case floats:
		sizes = []int{4 * in}
	case quants32:
		sizes = []int{in, 4 * in / 32}
	case quantsK:
		sizes = []int{in, 4 * in / 256, 2 * in / 16}
	}
	sizes = append(sizes, 4*out)
	for i := range sizes {
		sizes[i] = max(productMin, sizes[i])
	}
	return sizes
}

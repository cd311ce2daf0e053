package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Device is one Vulkan device with a compute queue. Its methods may be
// called from several goroutines; work is submitted one batch at a time.
type Device struct {
	Name  string // as the driver names it ("llvmpipe (LLVM 15.0.6, 256 bits)")
	Kind  string // "discrete GPU", "integrated GPU", "CPU" (lavapipe), …
	Index int    // among this machine's Vulkan devices

	instance, physical, device, queue uintptr
	family                            uint32
	// hostType is the memory type buffers use: host-visible and
	// coherent (device-local too where the device shares memory with
	// the host, as Apple's and lavapipe's do).
	hostType    uint32
	maxRange    uint64 // the most bytes one storage buffer binding may span
	offsetAlign uint64 // minStorageBufferOffsetAlignment
	shared      bool   // hostType is device-local: the device reads host memory directly
	// vram: the device has memory of its own (a discrete GPU's), of
	// type localType: weights are copied there and each KV cache layer a
	// whole layer uses is mirrored there (kvimport.go).
	vram      bool
	localType uint32
	vramBytes uint64 // the size of localType's heap
	// importAlign is the host-pointer alignment of VK_EXT_external_memory_host
	// where the device has it (0: no import; weights are copied), and
	// hostPointerProps its function, found through vkGetDeviceProcAddr
	// for this device (a driver's functions move when its last instance
	// is destroyed and it is loaded again).
	importAlign      uint64
	hostPointerProps func(uintptr, uint32, uintptr, *memoryHostPointerProperties) vkResult
	cmdPool          uint64
	cmd              uintptr
	fence            uint64
	descPool         uint64
	mu               sync.Mutex
	kernels          map[string]*kernel
	closed           bool

	// MatMul's buffers (the input, its scales and 16-sums, the output),
	// kept from call to call and grown as needed: allocating device
	// memory for every product costs more than many products on a GPU.
	productMu sync.Mutex
	product   [4]*Buffer

	allocated  atomic.Int64  // bytes of device memory allocated now (imports not counted)
	allocAlign atomic.Uint64 // the most bytes an allocation has added to its size (and its alignment)
	imports    atomic.Int64  // host memory imports alive now
}

// Allocated is the device memory allocated through this Device now,
// bytes: buffers, copied weights and scratch; not host memory it imports.
func (d *Device) Allocated() int64 { return d.allocated.Load() }

// Devices lists this machine's Vulkan devices (none, with an error, when
// there is no Vulkan loader or driver).
func Devices() ([]DeviceInfo, error) {
	inst, err := newInstance()
	if err != nil {
		return nil, err
	}
	defer vk.destroyInstance(inst, nil)
	phys, err := physicalDevices(inst)
	if err != nil {
		return nil, err
	}
	var out []DeviceInfo
	for i, p := range phys {
		name, kind, _, _ := describe(p)
		out = append(out, DeviceInfo{Index: i, Name: name, Kind: kind})
	}
	return out, nil
}

// DeviceInfo names a device without opening it.
type DeviceInfo struct {
	Index      int
	Name, Kind string
}

// Open opens device index (Devices' order), or with index < 0 the first
// GPU, else the first device of any kind.
func Open(index int) (*Device, error) {
	inst, err := newInstance()
	if err != nil {
		return nil, err
	}
	d, err := open(inst, index)
	if err != nil {
		vk.destroyInstance(inst, nil)
		return nil, err
	}
	return d, nil
}

func open(inst uintptr, index int) (*Device, error) {
	phys, err := physicalDevices(inst)
	if err != nil {
		return nil, err
	}
	if len(phys) == 0 {
		return nil, errors.New("gpu: the Vulkan loader found no device (is a driver installed? Debian: mesa-vulkan-drivers)")
	}
	if index >= len(phys) {
		return nil, fmt.Errorf("gpu: no Vulkan device %d (this machine has %d)", index, len(phys))
	}
	if index < 0 {
		index = 0
		for i, p := range phys {
			if _, kind, _, _ := describe(p); kind == "discrete GPU" || kind == "integrated GPU" {
				index = i
				break
			}
		}
	}
	d := &Device{Index: index, instance: inst, physical: phys[index], kernels: map[string]*kernel{}}
	d.Name, d.Kind, d.maxRange, d.offsetAlign = describe(d.physical)
	if err := d.init(); err != nil {
		d.instance = 0 // Open destroys it
		d.Close()
		return nil, err
	}
	return d, nil
}

func newInstance() (uintptr, error) {
	if err := load(); err != nil {
		return 0, err
	}
	app := &applicationInfo{sType: stApplicationInfo, pApplicationName: cString("strata"), pEngineName: cString("strata"), apiVersion: apiVersion11}
	info := &instanceCreateInfo{sType: stInstanceCreateInfo, pApplicationInfo: app}
	var inst uintptr
	r := vk.createInstance(info, nil, &inst)
	runtime.KeepAlive(app)
	if err := r.err("vkCreateInstance"); err != nil {
		return 0, err
	}
	return inst, nil
}

func physicalDevices(inst uintptr) ([]uintptr, error) {
	var n uint32
	if err := vk.enumeratePhysicalDevices(inst, &n, nil).err("vkEnumeratePhysicalDevices"); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	phys := make([]uintptr, n)
	if err := vk.enumeratePhysicalDevices(inst, &n, &phys[0]).err("vkEnumeratePhysicalDevices"); err != nil {
		return nil, err
	}
	return phys[:n], nil
}

func describe(p uintptr) (name, kind string, maxRange, offsetAlign uint64) {
	props := new(physicalDeviceProperties)
	vk.getPhysicalDeviceProperties(p, props)
	raw := props[propsDeviceName : propsDeviceName+256]
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		raw = raw[:i]
	}
	kind = deviceKinds[*(*uint32)(unsafe.Pointer(&props[propsDeviceType]))]
	maxRange = uint64(*(*uint32)(unsafe.Pointer(&props[propsMaxStorageBufferRange])))
	offsetAlign = *(*uint64)(unsafe.Pointer(&props[propsMinStorageBufferOffsetAlignment]))
	return string(raw), kind, maxRange, offsetAlign
}

// hasExtension reports whether physical device p offers extension name.
func hasExtension(p uintptr, name string) bool {
	var n uint32
	if vk.enumerateDeviceExtensionProperties(p, nil, &n, nil) != 0 || n == 0 {
		return false
	}
	exts := make([]extensionProperties, n)
	if vk.enumerateDeviceExtensionProperties(p, nil, &n, &exts[0]) != 0 {
		return false
	}
	for _, e := range exts[:n] {
		raw := e.extensionName[:]
		if i := bytes.IndexByte(raw, 0); i >= 0 {
			raw = raw[:i]
		}
		if string(raw) == name {
			return true
		}
	}
	return false
}

// hostImportAlign is the device's minImportedHostPointerAlignment.
func hostImportAlign(p uintptr) uint64 {
	ext := &externalMemoryHostProperties{sType: stPhysicalDeviceExternalMemoryHostProperties}
	props := &physicalDeviceProperties2{sType: stPhysicalDeviceProperties2, pNext: unsafe.Pointer(ext)}
	vk.getPhysicalDeviceProperties2(p, props)
	runtime.KeepAlive(ext)
	return ext.minImportedHostPointerAlignment
}

func (d *Device) init() error {
	// A queue family that computes.
	var n uint32
	vk.getPhysicalDeviceQueueFamilyProps(d.physical, &n, nil)
	fams := make([]queueFamilyProperties, max(n, 1))
	vk.getPhysicalDeviceQueueFamilyProps(d.physical, &n, &fams[0])
	found := false
	for i, f := range fams[:n] {
		if f.queueFlags&queueCompute != 0 && f.queueCount > 0 {
			d.family, found = uint32(i), true
			break
		}
	}
	if !found {
		return fmt.Errorf("gpu: %s has no compute queue", d.Name)
	}
	// Host-visible, coherent memory; device-local too if there is such.
	mem := new(memoryProperties)
	vk.getPhysicalDeviceMemoryProperties(d.physical, mem)
	// Unified memory (an integrated GPU, a CPU device): the device-local
	// host-visible type is the host's RAM. A discrete GPU's such type is
	// its small BAR window: there, system memory the GPU reads over the
	// bus (staging the weights into VRAM is not done yet).
	d.shared = d.Kind == "integrated GPU" || d.Kind == "CPU"
	best := -1
	for i := range mem.memoryTypeCount {
		f := mem.memoryTypes[i].propertyFlags
		if f&(memHostVisible|memHostCoherent) != memHostVisible|memHostCoherent {
			continue
		}
		local, bestLocal := f&memDeviceLocal != 0, best >= 0 && mem.memoryTypes[best].propertyFlags&memDeviceLocal != 0
		if best < 0 || (d.shared && local && !bestLocal) || (!d.shared && !local && bestLocal) {
			best = int(i)
		}
	}
	if best < 0 {
		return fmt.Errorf("gpu: %s has no host-visible coherent memory", d.Name)
	}
	d.hostType = uint32(best)
	// A discrete GPU's own memory: device-local, not host-visible where
	// there is such a type (VRAM, not the BAR window).
	local := -1
	for i := range mem.memoryTypeCount {
		f := mem.memoryTypes[i].propertyFlags
		if f&memDeviceLocal != 0 && (local < 0 || mem.memoryTypes[local].propertyFlags&memHostVisible != 0 && f&memHostVisible == 0) {
			local = int(i)
		}
	}
	if os.Getenv(DiscreteEnv) != "" && local >= 0 {
		d.shared = false // as a discrete GPU, whatever it is
	}
	if !d.shared && local >= 0 {
		d.vram, d.localType = true, uint32(local)
		if h := mem.memoryTypes[local].heapIndex; h < mem.memoryHeapCount {
			d.vramBytes = mem.memoryHeaps[h].size
		}
	}

	prio := new(float32)
	*prio = 1
	q := &deviceQueueCreateInfo{sType: stDeviceQueueCreateInfo, queueFamilyIndex: d.family, queueCount: 1, pQueuePriorities: prio}
	info := &deviceCreateInfo{sType: stDeviceCreateInfo, queueCreateInfoCount: 1, pQueueCreateInfos: q}
	// Weights are imported where the device reads host memory directly;
	// elsewhere they are copied once.
	imports := d.shared && hasExtension(d.physical, extMemoryHost)
	ext := new(*byte)
	*ext = cString(extMemoryHost)
	if imports {
		info.enabledExtensionCount, info.ppEnabledExtensionNames = 1, unsafe.Pointer(ext)
	}
	r := vk.createDevice(d.physical, info, nil, &d.device)
	runtime.KeepAlive(q)
	runtime.KeepAlive(prio)
	runtime.KeepAlive(ext)
	if err := r.err("vkCreateDevice"); err != nil {
		return err
	}
	if imports {
		if fn := vk.getDeviceProcAddr(d.device, cString("vkGetMemoryHostPointerPropertiesEXT")); fn != 0 {
			purego.RegisterFunc(&d.hostPointerProps, fn)
			d.importAlign = hostImportAlign(d.physical)
		}
	}
	vk.getDeviceQueue(d.device, d.family, 0, &d.queue)

	pool := &commandPoolCreateInfo{sType: stCommandPoolCreateInfo, flags: commandPoolResetBuffer, queueFamilyIndex: d.family}
	if err := vk.createCommandPool(d.device, pool, nil, &d.cmdPool).err("vkCreateCommandPool"); err != nil {
		return err
	}
	alloc := &commandBufferAllocateInfo{sType: stCommandBufferAllocateInfo, commandPool: d.cmdPool, commandBufferCount: 1}
	if err := vk.allocateCommandBuffers(d.device, alloc, &d.cmd).err("vkAllocateCommandBuffers"); err != nil {
		return err
	}
	if err := vk.createFence(d.device, &fenceCreateInfo{sType: stFenceCreateInfo}, nil, &d.fence).err("vkCreateFence"); err != nil {
		return err
	}
	size := &descriptorPoolSize{typ: descriptorStorageBuffer, descriptorCount: 8 * maxDescriptorSets}
	dp := &descriptorPoolCreateInfo{sType: stDescriptorPoolCreateInfo, maxSets: maxDescriptorSets, poolSizeCount: 1, pPoolSizes: size}
	return vk.createDescriptorPool(d.device, dp, nil, &d.descPool).err("vkCreateDescriptorPool")
}

// maxDescriptorSets is how many dispatches one submission may hold.
const maxDescriptorSets = 2048 // a prompt chunk over 384 experts: 3 products each

// SharesMemory reports whether the device reads host memory directly
// (unified memory: Apple silicon, integrated GPUs, lavapipe).
func (d *Device) SharesMemory() bool { return d.shared }

// DiscreteEnv, set (to anything), makes every device act as a discrete
// GPU: it reads no host memory in place, weights are copied into its
// memory and the KV caches mirrored there, as on a GPU with VRAM. For
// testing that path on a machine whose device shares memory (lavapipe,
// a Mac).
const DiscreteEnv = "STRATA_GPU_DISCRETE"

// HasVRAM reports whether the device has memory of its own (a discrete
// GPU): weights are copied there and whole layers keep a copy of each KV
// cache layer they use there.
func (d *Device) HasVRAM() bool { return d.vram }

// VRAM is the size of the device's own memory, bytes (0 where it has
// none of its own).
func (d *Device) VRAM() uint64 { return d.vramBytes }

// Close releases the device and everything made on it.
func (d *Device) Close() {
	d.productMu.Lock()
	for i, b := range d.product {
		if b != nil {
			b.Free()
			d.product[i] = nil
		}
	}
	d.productMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	if d.device != 0 {
		for _, k := range d.kernels {
			k.destroy(d.device)
		}
		if d.descPool != 0 {
			vk.destroyDescriptorPool(d.device, d.descPool, nil)
		}
		if d.fence != 0 {
			vk.destroyFence(d.device, d.fence, nil)
		}
		if d.cmdPool != 0 {
			vk.destroyCommandPool(d.device, d.cmdPool, nil)
		}
		vk.destroyDevice(d.device, nil)
	}
	if d.instance != 0 {
		vk.destroyInstance(d.instance, nil)
	}
}

// Buffer is device memory the host can read and write (Bytes), or host
// memory the device reads in place (Import).
type Buffer struct {
	d      *Device
	buf    uint64
	mem    uint64
	size   uint64
	mapped unsafe.Pointer
	// The range the shaders see: all of it, or an imported slice's place
	// within the pages imported around it.
	off, rng uint64
	owned    uint64 // bytes of device memory allocated for it (not imported)
	imported bool   // an import of host memory (counted in Device.imports until freed)
	local    bool   // in the device's own memory (not mapped: filled and read by copies)
}

// NewBuffer allocates size bytes (rounded up to 4) of storage memory the
// host maps.
func (d *Device) NewBuffer(size int) (*Buffer, error) { return d.newBuffer(size, false) }

// newLocalBuffer allocates size bytes (rounded up to 4) in the device's
// own memory (VRAM: not mapped; fill copies into it); host-visible memory
// where the device has none of its own.
func (d *Device) newLocalBuffer(size int) (*Buffer, error) { return d.newBuffer(size, d.vram) }

func (d *Device) newBuffer(size int, local bool) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("gpu: a buffer of %d bytes", size)
	}
	if d.isClosed() {
		return nil, fmt.Errorf("gpu: %s is closed", d.Name)
	}
	n := uint64(size+3) &^ 3
	if d.maxRange > 0 && n > d.maxRange {
		return nil, fmt.Errorf("gpu: a buffer of %d bytes is over %s's binding limit of %d", n, d.Name, d.maxRange)
	}
	b := &Buffer{d: d, size: n, rng: n}
	info := &bufferCreateInfo{sType: stBufferCreateInfo, size: n, usage: bufferStorage}
	if err := vk.createBuffer(d.device, info, nil, &b.buf).err("vkCreateBuffer"); err != nil {
		return nil, err
	}
	var req memoryRequirements
	vk.getBufferMemoryRequirements(d.device, b.buf, &req)
	typ := d.hostType
	if local {
		typ = d.localType
	}
	if req.memoryTypeBits&(1<<typ) == 0 {
		b.Free()
		return nil, fmt.Errorf("gpu: %s cannot place a storage buffer in memory type %d", d.Name, typ)
	}
	alloc := &memoryAllocateInfo{sType: stMemoryAllocateInfo, allocationSize: req.size, memoryTypeIndex: typ}
	if err := vk.allocateMemory(d.device, alloc, nil, &b.mem).err("vkAllocateMemory"); err != nil {
		b.Free()
		return nil, fmt.Errorf("%w (%d bytes)", err, req.size)
	}
	b.owned = req.size
	d.allocated.Add(int64(req.size))
	for pad := req.size - n + req.alignment; ; { // what one allocation may add: the most seen
		was := d.allocAlign.Load()
		if was >= pad || d.allocAlign.CompareAndSwap(was, pad) {
			break
		}
	}
	if err := vk.bindBufferMemory(d.device, b.buf, b.mem, 0).err("vkBindBufferMemory"); err != nil {
		b.Free()
		return nil, err
	}
	if local {
		b.local = true
		return b, nil
	}
	if err := vk.mapMemory(d.device, b.mem, 0, n, 0, &b.mapped).err("vkMapMemory"); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// Import makes host memory data (which must stay mapped until the buffer
// is freed: a model file's weights, or a KV cache for one call) a buffer
// the device reads, and may write, in place, without a copy. It fails where the device cannot import host
// memory, or cannot bind data where it lies; the caller then copies.
func (d *Device) Import(data []byte) (*Buffer, error) {
	if d.vram || d.importAlign == 0 || d.hostPointerProps == nil || d.isClosed() {
		return nil, fmt.Errorf("gpu: %s cannot read host memory in place", d.Name)
	}
	if len(data) == 0 {
		return nil, errors.New("gpu: importing no bytes")
	}
	ptr := uintptr(unsafe.Pointer(&data[0]))
	align := uintptr(d.importAlign)
	base := ptr &^ (align - 1)
	end := (ptr + uintptr(len(data)) + align - 1) &^ (align - 1)
	off := uint64(ptr - base)
	if off%max(d.offsetAlign, 4) != 0 { // the shaders read words
		return nil, fmt.Errorf("gpu: data at offset %d of its page, not a multiple of %s's %d", off, d.Name, d.offsetAlign)
	}
	size := uint64(end - base)
	if d.maxRange > 0 && uint64(len(data)) > d.maxRange {
		return nil, fmt.Errorf("gpu: %d bytes are over %s's binding limit of %d", len(data), d.Name, d.maxRange)
	}
	// The pages around data are mapped (a file mapping spans whole pages),
	// and the device only reads them. An address, not a Go pointer: the
	// pages may hold more than data's allocation.
	host := base
	props := &memoryHostPointerProperties{sType: stMemoryHostPointerProperties}
	if err := d.hostPointerProps(d.device, handleHostAllocation, host, props).err("vkGetMemoryHostPointerPropertiesEXT"); err != nil {
		return nil, err
	}
	typ := -1
	for i := range 32 {
		if props.memoryTypeBits&(1<<i) != 0 && (typ < 0 || uint32(i) == d.hostType) {
			typ = i
		}
	}
	if typ < 0 {
		return nil, fmt.Errorf("gpu: %s offers no memory type for host memory at %#x", d.Name, base)
	}
	b := &Buffer{d: d, size: size, off: off, rng: uint64(len(data)+3) &^ 3}
	ext := &externalMemoryBufferCreateInfo{sType: stExternalMemoryBufferCreateInfo, handleTypes: handleHostAllocation}
	info := &bufferCreateInfo{sType: stBufferCreateInfo, pNext: unsafe.Pointer(ext), size: size, usage: bufferStorage}
	err := vk.createBuffer(d.device, info, nil, &b.buf).err("vkCreateBuffer (imported)")
	runtime.KeepAlive(ext)
	if err != nil {
		return nil, err
	}
	var req memoryRequirements
	vk.getBufferMemoryRequirements(d.device, b.buf, &req)
	if req.memoryTypeBits&(1<<typ) == 0 || req.size > size {
		b.Free()
		return nil, fmt.Errorf("gpu: %s cannot place a storage buffer in imported memory", d.Name)
	}
	imp := &importMemoryHostPointerInfo{sType: stImportMemoryHostPointerInfo, handleType: handleHostAllocation, pHostPointer: host}
	alloc := &memoryAllocateInfo{sType: stMemoryAllocateInfo, pNext: unsafe.Pointer(imp), allocationSize: size, memoryTypeIndex: uint32(typ)}
	err = vk.allocateMemory(d.device, alloc, nil, &b.mem).err("vkAllocateMemory (imported)")
	runtime.KeepAlive(imp)
	if err != nil {
		b.Free()
		return nil, err
	}
	if err := vk.bindBufferMemory(d.device, b.buf, b.mem, 0).err("vkBindBufferMemory"); err != nil {
		b.Free()
		return nil, err
	}
	b.imported = true
	d.imports.Add(1)
	return b, nil
}

// view is bytes [off, off+size) of b, bound where b is (not to be freed:
// b owns the memory).
func (b *Buffer) view(off, size uint64) *Buffer {
	v := *b
	v.off += off
	v.rng = (size + 3) &^ 3
	v.owned, v.imported = 0, false // b's memory: b accounts for it
	return &v
}

// Imported reports whether the buffer reads host memory in place.
func (b *Buffer) Imported() bool { return b.mapped == nil && !b.local }

// Bytes is the buffer's memory, mapped: write inputs before Run, read
// outputs after it. Nil for an imported buffer.
func (b *Buffer) Bytes() []byte {
	if b.mapped == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.mapped), b.size)
}

// Float32s is the buffer's memory as float32s (nil for an imported one).
func (b *Buffer) Float32s() []float32 {
	if b.mapped == nil {
		return nil
	}
	return unsafe.Slice((*float32)(b.mapped), b.size/4)
}

// isClosed reports whether Close has run.
func (d *Device) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// Free releases the buffer (nothing after the device closed, which
// released it).
func (b *Buffer) Free() {
	if b.d.isClosed() {
		return
	}
	dev := b.d.device
	if b.mapped != nil {
		vk.unmapMemory(dev, b.mem)
		b.mapped = nil
	}
	if b.buf != 0 {
		vk.destroyBuffer(dev, b.buf, nil)
		b.buf = 0
	}
	if b.mem != 0 {
		vk.freeMemory(dev, b.mem, nil)
		b.mem = 0
		b.d.allocated.Add(-int64(b.owned))
		b.owned = 0
		if b.imported {
			b.d.imports.Add(-1)
			b.imported = false
		}
	}
}

var (
	listOnce sync.Once
	listed   []string
	listErr  error
)

// List describes this machine's Vulkan devices, "INDEX: NAME (KIND)",
// looked up once per process (a driver's first start may take a second).
func List() ([]string, error) {
	listOnce.Do(func() {
		ds, err := Devices()
		if err != nil {
			listErr = err
			return
		}
		for _, d := range ds {
			listed = append(listed, fmt.Sprintf("%d: %s (%s)", d.Index, d.Name, d.Kind))
		}
		if len(listed) == 0 {
			listErr = errors.New("the Vulkan loader found no device")
		}
	})
	return listed, listErr
}

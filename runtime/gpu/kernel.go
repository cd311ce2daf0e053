package gpu

import (
	"embed"
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"
)

// The compute kernels: GLSL in shaders/*.comp, compiled to SPIR-V by
// `make shaders` (glslc) and committed, so that building strata needs no
// shader compiler; TestShadersMatchSources checks the two agree.
//
//go:embed shaders/*.spv
var spirv embed.FS

// maxPush is the most push-constant bytes a kernel takes (Vulkan
// guarantees 128).
const maxPush = 128

// kernel is one compute pipeline: a shader whose bindings 0..buffers-1
// are storage buffers, and push constants of push bytes.
type kernel struct {
	module, setLayout, layout, pipeline uint64
	buffers                             int
	push                                uint32
}

// kernel returns the named kernel (shaders/NAME.spv), made on first use.
// Call with d.mu held.
func (d *Device) kernel(name string, buffers int, push uint32) (*kernel, error) {
	if k, ok := d.kernels[name]; ok {
		return k, nil
	}
	code, err := spirv.ReadFile("shaders/" + name + ".spv")
	if err != nil {
		return nil, fmt.Errorf("gpu: no kernel %s: %w", name, err)
	}
	words := make([]uint32, len(code)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(code[4*i:])
	}
	k := &kernel{buffers: buffers, push: push}
	mod := &shaderModuleCreateInfo{sType: stShaderModuleCreateInfo, codeSize: uintptr(len(code)), pCode: &words[0]}
	if err := vk.createShaderModule(d.device, mod, nil, &k.module).err("vkCreateShaderModule " + name); err != nil {
		return nil, err
	}
	runtime.KeepAlive(words)
	binds := make([]descriptorSetLayoutBinding, buffers)
	for i := range binds {
		binds[i] = descriptorSetLayoutBinding{binding: uint32(i), descriptorType: descriptorStorageBuffer, descriptorCount: 1, stageFlags: stageCompute}
	}
	sl := &descriptorSetLayoutCreateInfo{sType: stDescriptorSetLayoutCreateInfo, bindingCount: uint32(buffers), pBindings: &binds[0]}
	if err := vk.createDescriptorSetLayout(d.device, sl, nil, &k.setLayout).err("vkCreateDescriptorSetLayout"); err != nil {
		k.destroy(d.device)
		return nil, err
	}
	runtime.KeepAlive(binds)
	setLayout := new(uint64)
	*setLayout = k.setLayout
	pl := &pipelineLayoutCreateInfo{sType: stPipelineLayoutCreateInfo, setLayoutCount: 1, pSetLayouts: setLayout}
	if push > 0 {
		pl.pushConstantRangeCount, pl.pPushConstantRanges = 1, &pushConstantRange{stageFlags: stageCompute, size: push}
	}
	if err := vk.createPipelineLayout(d.device, pl, nil, &k.layout).err("vkCreatePipelineLayout"); err != nil {
		k.destroy(d.device)
		return nil, err
	}
	runtime.KeepAlive(setLayout)
	entry := cString("main")
	cp := &computePipelineCreateInfo{sType: stComputePipelineCreateInfo, layout: k.layout, basePipelineIndex: -1,
		stage: pipelineShaderStageCreateInfo{sType: stPipelineShaderStageCreateInfo, stage: stageCompute, module: k.module, pName: entry}}
	if err := vk.createComputePipelines(d.device, 0, 1, cp, nil, &k.pipeline).err("vkCreateComputePipelines " + name); err != nil {
		k.destroy(d.device)
		return nil, err
	}
	runtime.KeepAlive(entry)
	d.kernels[name] = k
	return k, nil
}

func (k *kernel) destroy(dev uintptr) {
	if k.pipeline != 0 {
		vk.destroyPipeline(dev, k.pipeline, nil)
	}
	if k.layout != 0 {
		vk.destroyPipelineLayout(dev, k.layout, nil)
	}
	if k.setLayout != 0 {
		vk.destroyDescriptorSetLayout(dev, k.setLayout, nil)
	}
	if k.module != 0 {
		vk.destroyShaderModule(dev, k.module, nil)
	}
}

// dispatch is one kernel run: its buffers (bindings 0..), push constants
// and workgroup counts.
type dispatch struct {
	name    string
	buffers []*Buffer
	push    []byte
	groups  [3]uint32
}

// run records the dispatches into one command buffer, each after the
// previous one's writes (a barrier between them), submits it and waits.
func (d *Device) run(ds ...dispatch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("gpu: %s is closed", d.Name)
	}
	if len(ds) > maxDescriptorSets {
		return fmt.Errorf("gpu: %d dispatches in one run, at most %d", len(ds), maxDescriptorSets)
	}
	if err := vk.resetDescriptorPool(d.device, d.descPool, 0).err("vkResetDescriptorPool"); err != nil {
		return err
	}
	kernels := make([]*kernel, len(ds))
	sets := make([]uint64, len(ds))
	for i, x := range ds {
		k, err := d.kernel(x.name, len(x.buffers), uint32(len(x.push)))
		if err != nil {
			return err
		}
		if len(x.push) > maxPush || len(x.buffers) != k.buffers || uint32(len(x.push)) != k.push {
			return fmt.Errorf("gpu: kernel %s takes %d buffers and %d push bytes, not %d and %d", x.name, k.buffers, k.push, len(x.buffers), len(x.push))
		}
		kernels[i] = k
		layout := new(uint64)
		*layout = k.setLayout
		ai := &descriptorSetAllocateInfo{sType: stDescriptorSetAllocateInfo, descriptorPool: d.descPool, descriptorSetCount: 1, pSetLayouts: layout}
		if err := vk.allocateDescriptorSets(d.device, ai, &sets[i]).err("vkAllocateDescriptorSets"); err != nil {
			return err
		}
		runtime.KeepAlive(layout)
		infos := make([]descriptorBufferInfo, len(x.buffers))
		writes := make([]writeDescriptorSet, len(x.buffers))
		for j, b := range x.buffers {
			infos[j] = descriptorBufferInfo{buffer: b.buf, offset: b.off, rng: b.rng}
			writes[j] = writeDescriptorSet{sType: stWriteDescriptorSet, dstSet: sets[i], dstBinding: uint32(j), descriptorCount: 1,
				descriptorType: descriptorStorageBuffer, pBufferInfo: &infos[j]}
		}
		vk.updateDescriptorSets(d.device, uint32(len(writes)), &writes[0], 0, nil)
		runtime.KeepAlive(infos)
	}

	if err := vk.resetCommandBuffer(d.cmd, 0).err("vkResetCommandBuffer"); err != nil {
		return err
	}
	if err := vk.beginCommandBuffer(d.cmd, &commandBufferBeginInfo{sType: stCommandBufferBeginInfo, flags: oneTimeSubmit}).err("vkBeginCommandBuffer"); err != nil {
		return err
	}
	// The host wrote the inputs; the first dispatch reads them.
	barrier(d.cmd, pipelineStageHost, pipelineStageComputeShader, accessHostWrite, accessShaderRead)
	for i, x := range ds {
		if i > 0 {
			barrier(d.cmd, pipelineStageComputeShader, pipelineStageComputeShader, accessShaderWrite, accessShaderRead|accessShaderWrite)
		}
		k := kernels[i]
		vk.cmdBindPipeline(d.cmd, bindPointCompute, k.pipeline)
		vk.cmdBindDescriptorSets(d.cmd, bindPointCompute, k.layout, 0, 1, &sets[i], 0, nil)
		if len(x.push) > 0 {
			vk.cmdPushConstants(d.cmd, k.layout, stageCompute, 0, uint32(len(x.push)), unsafe.Pointer(&x.push[0]))
		}
		vk.cmdDispatch(d.cmd, x.groups[0], x.groups[1], x.groups[2])
	}
	// The host reads the outputs after the fence.
	barrier(d.cmd, pipelineStageComputeShader, pipelineStageHost, accessShaderWrite, accessHostRead)
	if err := vk.endCommandBuffer(d.cmd).err("vkEndCommandBuffer"); err != nil {
		return err
	}
	cmd := new(uintptr)
	*cmd = d.cmd
	si := &submitInfo{sType: stSubmitInfo, commandBufferCount: 1, pCommandBuffers: cmd}
	if err := vk.queueSubmit(d.queue, 1, si, d.fence).err("vkQueueSubmit"); err != nil {
		return err
	}
	runtime.KeepAlive(cmd)
	fence := new(uint64)
	*fence = d.fence
	if err := vk.waitForFences(d.device, 1, fence, 1, ^uint64(0)).err("vkWaitForFences"); err != nil {
		return err
	}
	return vk.resetFences(d.device, 1, fence).err("vkResetFences")
}

func barrier(cmd uintptr, src, dst, srcAccess, dstAccess uint32) {
	b := &memoryBarrier{sType: stMemoryBarrier, srcAccessMask: srcAccess, dstAccessMask: dstAccess}
	vk.cmdPipelineBarrier(cmd, src, dst, 0, 1, b, 0, nil, 0, nil)
	runtime.KeepAlive(b)
}

// pushU32 packs push constants of uint32 values.
func pushU32(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

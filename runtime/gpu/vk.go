//lint:file-ignore U1000 the structures mirror vulkan_core.h field for field: C reads the fields Go never sets

package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The slice of the Vulkan 1.1 C API this package uses, bound at run time
// through purego (no cgo: CGO_ENABLED=0 builds keep working, and a node
// without a Vulkan loader runs on the CPU). Structures mirror the C
// layout of vulkan_core.h on 64-bit targets, field for field; Go lays
// out uint32, uint64 and pointers the same way there.

type vkResult int32

func (r vkResult) err(call string) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("gpu: %s: VkResult %d", call, int32(r))
}

// Structure types (VkStructureType).
const (
	stApplicationInfo               = 0
	stInstanceCreateInfo            = 1
	stDeviceQueueCreateInfo         = 2
	stDeviceCreateInfo              = 3
	stSubmitInfo                    = 4
	stMemoryAllocateInfo            = 5
	stFenceCreateInfo               = 8
	stBufferCreateInfo              = 12
	stShaderModuleCreateInfo        = 16
	stPipelineShaderStageCreateInfo = 18
	stComputePipelineCreateInfo     = 29
	stPipelineLayoutCreateInfo      = 30
	stDescriptorSetLayoutCreateInfo = 32
	stDescriptorPoolCreateInfo      = 33
	stDescriptorSetAllocateInfo     = 34
	stWriteDescriptorSet            = 35
	stCommandPoolCreateInfo         = 39
	stCommandBufferAllocateInfo     = 40
	stCommandBufferBeginInfo        = 42
	stMemoryBarrier                 = 46

	stPhysicalDeviceProperties2                  = 1000059001
	stExternalMemoryBufferCreateInfo             = 1000072000
	stImportMemoryHostPointerInfo                = 1000178000
	stMemoryHostPointerProperties                = 1000178001
	stPhysicalDeviceExternalMemoryHostProperties = 1000178002
)

// VK_EXT_external_memory_host: buffers over host memory the process
// already has (the mmap'd weights), without a copy.
const (
	extMemoryHost        = "VK_EXT_external_memory_host"
	handleHostAllocation = 0x80
)

const (
	apiVersion11 = 1<<22 | 1<<12

	queueCompute = 0x2

	memDeviceLocal  = 0x1
	memHostVisible  = 0x2
	memHostCoherent = 0x4

	bufferStorage = 0x20

	descriptorStorageBuffer = 7
	stageCompute            = 0x20
	bindPointCompute        = 1

	commandPoolResetBuffer = 0x2
	oneTimeSubmit          = 0x1

	pipelineStageComputeShader = 0x800
	pipelineStageHost          = 0x4000
	accessShaderRead           = 0x20
	accessShaderWrite          = 0x40
	accessHostRead             = 0x2000
	accessHostWrite            = 0x4000
)

// Physical device types (VkPhysicalDeviceType), as Device.Kind says them.
var deviceKinds = map[uint32]string{0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}

type applicationInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	pApplicationName   *byte
	applicationVersion uint32
	pEngineName        *byte
	engineVersion      uint32
	apiVersion         uint32
}

type instanceCreateInfo struct {
	sType                   uint32
	pNext                   unsafe.Pointer
	flags                   uint32
	pApplicationInfo        *applicationInfo
	enabledLayerCount       uint32
	ppEnabledLayerNames     unsafe.Pointer
	enabledExtensionCount   uint32
	ppEnabledExtensionNames unsafe.Pointer
}

// physicalDeviceProperties holds VkPhysicalDeviceProperties (824 bytes);
// the fields read are at fixed offsets.
type physicalDeviceProperties [1024]byte

const (
	propsDeviceType = 16
	propsDeviceName = 20 // char[256]
	// Within VkPhysicalDeviceLimits, which starts at 296 (offsetof in
	// vulkan_core.h): maxStorageBufferRange (uint32) and
	// minStorageBufferOffsetAlignment (VkDeviceSize).
	propsMaxStorageBufferRange           = 324
	propsMinStorageBufferOffsetAlignment = 624
)

// physicalDeviceProperties2 with VkPhysicalDeviceExternalMemoryHostPropertiesEXT
// chained: only the import alignment is read.
type physicalDeviceProperties2 struct {
	sType      uint32
	pNext      unsafe.Pointer
	properties [824]byte
}

type externalMemoryHostProperties struct {
	sType                           uint32
	pNext                           unsafe.Pointer
	minImportedHostPointerAlignment uint64
}

type externalMemoryBufferCreateInfo struct {
	sType       uint32
	pNext       unsafe.Pointer
	handleTypes uint32
}

type importMemoryHostPointerInfo struct {
	sType        uint32
	pNext        unsafe.Pointer
	handleType   uint32
	pHostPointer uintptr // an address outside Go's view: the pages around mmap'd data
}

type memoryHostPointerProperties struct {
	sType          uint32
	pNext          unsafe.Pointer
	memoryTypeBits uint32
}

// extensionProperties is VkExtensionProperties.
type extensionProperties struct {
	extensionName [256]byte
	specVersion   uint32
}

type queueFamilyProperties struct {
	queueFlags, queueCount, timestampValidBits uint32
	minImageTransferGranularity                [3]uint32
}

type memoryProperties struct {
	memoryTypeCount uint32
	memoryTypes     [32]struct{ propertyFlags, heapIndex uint32 }
	memoryHeapCount uint32
	memoryHeaps     [16]struct {
		size  uint64
		flags uint32
	}
}

type deviceQueueCreateInfo struct {
	sType            uint32
	pNext            unsafe.Pointer
	flags            uint32
	queueFamilyIndex uint32
	queueCount       uint32
	pQueuePriorities *float32
}

type deviceCreateInfo struct {
	sType                   uint32
	pNext                   unsafe.Pointer
	flags                   uint32
	queueCreateInfoCount    uint32
	pQueueCreateInfos       *deviceQueueCreateInfo
	enabledLayerCount       uint32
	ppEnabledLayerNames     unsafe.Pointer
	enabledExtensionCount   uint32
	ppEnabledExtensionNames unsafe.Pointer
	pEnabledFeatures        unsafe.Pointer
}

type bufferCreateInfo struct {
	sType                 uint32
	pNext                 unsafe.Pointer
	flags                 uint32
	size                  uint64
	usage                 uint32
	sharingMode           uint32
	queueFamilyIndexCount uint32
	pQueueFamilyIndices   unsafe.Pointer
}

type memoryRequirements struct {
	size, alignment uint64
	memoryTypeBits  uint32
}

type memoryAllocateInfo struct {
	sType           uint32
	pNext           unsafe.Pointer
	allocationSize  uint64
	memoryTypeIndex uint32
}

type shaderModuleCreateInfo struct {
	sType    uint32
	pNext    unsafe.Pointer
	flags    uint32
	codeSize uintptr
	pCode    *uint32
}

type descriptorSetLayoutBinding struct {
	binding, descriptorType, descriptorCount, stageFlags uint32
	pImmutableSamplers                                   unsafe.Pointer
}

type descriptorSetLayoutCreateInfo struct {
	sType        uint32
	pNext        unsafe.Pointer
	flags        uint32
	bindingCount uint32
	pBindings    *descriptorSetLayoutBinding
}

type pushConstantRange struct{ stageFlags, offset, size uint32 }

type pipelineLayoutCreateInfo struct {
	sType                  uint32
	pNext                  unsafe.Pointer
	flags                  uint32
	setLayoutCount         uint32
	pSetLayouts            *uint64
	pushConstantRangeCount uint32
	pPushConstantRanges    *pushConstantRange
}

type pipelineShaderStageCreateInfo struct {
	sType               uint32
	pNext               unsafe.Pointer
	flags               uint32
	stage               uint32
	module              uint64
	pName               *byte
	pSpecializationInfo unsafe.Pointer
}

type computePipelineCreateInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	flags              uint32
	stage              pipelineShaderStageCreateInfo
	layout             uint64
	basePipelineHandle uint64
	basePipelineIndex  int32
}

type descriptorPoolSize struct{ typ, descriptorCount uint32 }

type descriptorPoolCreateInfo struct {
	sType         uint32
	pNext         unsafe.Pointer
	flags         uint32
	maxSets       uint32
	poolSizeCount uint32
	pPoolSizes    *descriptorPoolSize
}

type descriptorSetAllocateInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	descriptorPool     uint64
	descriptorSetCount uint32
	pSetLayouts        *uint64
}

type descriptorBufferInfo struct{ buffer, offset, rng uint64 }

type writeDescriptorSet struct {
	sType            uint32
	pNext            unsafe.Pointer
	dstSet           uint64
	dstBinding       uint32
	dstArrayElement  uint32
	descriptorCount  uint32
	descriptorType   uint32
	pImageInfo       unsafe.Pointer
	pBufferInfo      *descriptorBufferInfo
	pTexelBufferView unsafe.Pointer
}

type commandPoolCreateInfo struct {
	sType            uint32
	pNext            unsafe.Pointer
	flags            uint32
	queueFamilyIndex uint32
}

type commandBufferAllocateInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	commandPool        uint64
	level              uint32
	commandBufferCount uint32
}

type commandBufferBeginInfo struct {
	sType            uint32
	pNext            unsafe.Pointer
	flags            uint32
	pInheritanceInfo unsafe.Pointer
}

type submitInfo struct {
	sType                uint32
	pNext                unsafe.Pointer
	waitSemaphoreCount   uint32
	pWaitSemaphores      unsafe.Pointer
	pWaitDstStageMask    unsafe.Pointer
	commandBufferCount   uint32
	pCommandBuffers      *uintptr
	signalSemaphoreCount uint32
	pSignalSemaphores    unsafe.Pointer
}

type fenceCreateInfo struct {
	sType uint32
	pNext unsafe.Pointer
	flags uint32
}

type memoryBarrier struct {
	sType         uint32
	pNext         unsafe.Pointer
	srcAccessMask uint32
	dstAccessMask uint32
}

// vk is the function table, loaded once.
var vk struct {
	createInstance                     func(*instanceCreateInfo, unsafe.Pointer, *uintptr) vkResult
	destroyInstance                    func(uintptr, unsafe.Pointer)
	enumeratePhysicalDevices           func(uintptr, *uint32, *uintptr) vkResult
	getPhysicalDeviceProperties        func(uintptr, *physicalDeviceProperties)
	getPhysicalDeviceQueueFamilyProps  func(uintptr, *uint32, *queueFamilyProperties)
	getPhysicalDeviceMemoryProperties  func(uintptr, *memoryProperties)
	createDevice                       func(uintptr, *deviceCreateInfo, unsafe.Pointer, *uintptr) vkResult
	destroyDevice                      func(uintptr, unsafe.Pointer)
	getDeviceQueue                     func(uintptr, uint32, uint32, *uintptr)
	createBuffer                       func(uintptr, *bufferCreateInfo, unsafe.Pointer, *uint64) vkResult
	destroyBuffer                      func(uintptr, uint64, unsafe.Pointer)
	getBufferMemoryRequirements        func(uintptr, uint64, *memoryRequirements)
	allocateMemory                     func(uintptr, *memoryAllocateInfo, unsafe.Pointer, *uint64) vkResult
	freeMemory                         func(uintptr, uint64, unsafe.Pointer)
	bindBufferMemory                   func(uintptr, uint64, uint64, uint64) vkResult
	mapMemory                          func(uintptr, uint64, uint64, uint64, uint32, *unsafe.Pointer) vkResult
	unmapMemory                        func(uintptr, uint64)
	createShaderModule                 func(uintptr, *shaderModuleCreateInfo, unsafe.Pointer, *uint64) vkResult
	destroyShaderModule                func(uintptr, uint64, unsafe.Pointer)
	createDescriptorSetLayout          func(uintptr, *descriptorSetLayoutCreateInfo, unsafe.Pointer, *uint64) vkResult
	destroyDescriptorSetLayout         func(uintptr, uint64, unsafe.Pointer)
	createPipelineLayout               func(uintptr, *pipelineLayoutCreateInfo, unsafe.Pointer, *uint64) vkResult
	destroyPipelineLayout              func(uintptr, uint64, unsafe.Pointer)
	createComputePipelines             func(uintptr, uint64, uint32, *computePipelineCreateInfo, unsafe.Pointer, *uint64) vkResult
	destroyPipeline                    func(uintptr, uint64, unsafe.Pointer)
	createDescriptorPool               func(uintptr, *descriptorPoolCreateInfo, unsafe.Pointer, *uint64) vkResult
	destroyDescriptorPool              func(uintptr, uint64, unsafe.Pointer)
	resetDescriptorPool                func(uintptr, uint64, uint32) vkResult
	allocateDescriptorSets             func(uintptr, *descriptorSetAllocateInfo, *uint64) vkResult
	updateDescriptorSets               func(uintptr, uint32, *writeDescriptorSet, uint32, unsafe.Pointer)
	createCommandPool                  func(uintptr, *commandPoolCreateInfo, unsafe.Pointer, *uint64) vkResult
	destroyCommandPool                 func(uintptr, uint64, unsafe.Pointer)
	allocateCommandBuffers             func(uintptr, *commandBufferAllocateInfo, *uintptr) vkResult
	beginCommandBuffer                 func(uintptr, *commandBufferBeginInfo) vkResult
	endCommandBuffer                   func(uintptr) vkResult
	resetCommandBuffer                 func(uintptr, uint32) vkResult
	cmdBindPipeline                    func(uintptr, uint32, uint64)
	cmdBindDescriptorSets              func(uintptr, uint32, uint64, uint32, uint32, *uint64, uint32, unsafe.Pointer)
	cmdPushConstants                   func(uintptr, uint64, uint32, uint32, uint32, unsafe.Pointer)
	cmdDispatch                        func(uintptr, uint32, uint32, uint32)
	cmdPipelineBarrier                 func(uintptr, uint32, uint32, uint32, uint32, *memoryBarrier, uint32, unsafe.Pointer, uint32, unsafe.Pointer)
	queueSubmit                        func(uintptr, uint32, *submitInfo, uint64) vkResult
	createFence                        func(uintptr, *fenceCreateInfo, unsafe.Pointer, *uint64) vkResult
	destroyFence                       func(uintptr, uint64, unsafe.Pointer)
	waitForFences                      func(uintptr, uint32, *uint64, uint32, uint64) vkResult
	resetFences                        func(uintptr, uint32, *uint64) vkResult
	getPhysicalDeviceProperties2       func(uintptr, *physicalDeviceProperties2)
	enumerateDeviceExtensionProperties func(uintptr, *byte, *uint32, *extensionProperties) vkResult
	getDeviceProcAddr                  func(uintptr, *byte) uintptr
}

// loaderNames are the Vulkan loader's names, tried in order: Linux's, the
// macOS loader (Vulkan SDK or Homebrew's vulkan-loader), and MoltenVK
// itself, which exports the API directly.
var loaderNames = map[string][]string{
	"linux":  {"libvulkan.so.1", "libvulkan.so"},
	"darwin": {"libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib", "/usr/local/lib/libvulkan.1.dylib", "/opt/homebrew/lib/libvulkan.1.dylib", "/opt/homebrew/lib/libMoltenVK.dylib"},
}

var (
	loadOnce sync.Once
	loadErr  error
)

// errNoLoader says this machine has no Vulkan loader.
var errNoLoader = errors.New("gpu: no Vulkan loader (libvulkan) on this machine")

// load opens the Vulkan loader and binds the functions, once.
func load() error {
	loadOnce.Do(func() {
		if unsafe.Sizeof(uintptr(0)) != 8 {
			loadErr = errors.New("gpu: the Vulkan bindings are for 64-bit targets")
			return
		}
		names := loaderNames[runtime.GOOS]
		if len(names) == 0 {
			loadErr = fmt.Errorf("gpu: Vulkan is not supported on %s", runtime.GOOS)
			return
		}
		var lib uintptr
		for _, n := range names {
			if l, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_LOCAL); err == nil {
				lib = l
				break
			}
		}
		if lib == 0 {
			loadErr = errNoLoader
			return
		}
		for _, f := range []struct {
			fn   any
			name string
		}{
			{&vk.createInstance, "vkCreateInstance"},
			{&vk.destroyInstance, "vkDestroyInstance"},
			{&vk.enumeratePhysicalDevices, "vkEnumeratePhysicalDevices"},
			{&vk.getPhysicalDeviceProperties, "vkGetPhysicalDeviceProperties"},
			{&vk.getPhysicalDeviceQueueFamilyProps, "vkGetPhysicalDeviceQueueFamilyProperties"},
			{&vk.getPhysicalDeviceMemoryProperties, "vkGetPhysicalDeviceMemoryProperties"},
			{&vk.createDevice, "vkCreateDevice"},
			{&vk.destroyDevice, "vkDestroyDevice"},
			{&vk.getDeviceQueue, "vkGetDeviceQueue"},
			{&vk.createBuffer, "vkCreateBuffer"},
			{&vk.destroyBuffer, "vkDestroyBuffer"},
			{&vk.getBufferMemoryRequirements, "vkGetBufferMemoryRequirements"},
			{&vk.allocateMemory, "vkAllocateMemory"},
			{&vk.freeMemory, "vkFreeMemory"},
			{&vk.bindBufferMemory, "vkBindBufferMemory"},
			{&vk.mapMemory, "vkMapMemory"},
			{&vk.unmapMemory, "vkUnmapMemory"},
			{&vk.createShaderModule, "vkCreateShaderModule"},
			{&vk.destroyShaderModule, "vkDestroyShaderModule"},
			{&vk.createDescriptorSetLayout, "vkCreateDescriptorSetLayout"},
			{&vk.destroyDescriptorSetLayout, "vkDestroyDescriptorSetLayout"},
			{&vk.createPipelineLayout, "vkCreatePipelineLayout"},
			{&vk.destroyPipelineLayout, "vkDestroyPipelineLayout"},
			{&vk.createComputePipelines, "vkCreateComputePipelines"},
			{&vk.destroyPipeline, "vkDestroyPipeline"},
			{&vk.createDescriptorPool, "vkCreateDescriptorPool"},
			{&vk.destroyDescriptorPool, "vkDestroyDescriptorPool"},
			{&vk.resetDescriptorPool, "vkResetDescriptorPool"},
			{&vk.allocateDescriptorSets, "vkAllocateDescriptorSets"},
			{&vk.updateDescriptorSets, "vkUpdateDescriptorSets"},
			{&vk.createCommandPool, "vkCreateCommandPool"},
			{&vk.destroyCommandPool, "vkDestroyCommandPool"},
			{&vk.allocateCommandBuffers, "vkAllocateCommandBuffers"},
			{&vk.beginCommandBuffer, "vkBeginCommandBuffer"},
			{&vk.endCommandBuffer, "vkEndCommandBuffer"},
			{&vk.resetCommandBuffer, "vkResetCommandBuffer"},
			{&vk.cmdBindPipeline, "vkCmdBindPipeline"},
			{&vk.cmdBindDescriptorSets, "vkCmdBindDescriptorSets"},
			{&vk.cmdPushConstants, "vkCmdPushConstants"},
			{&vk.cmdDispatch, "vkCmdDispatch"},
			{&vk.cmdPipelineBarrier, "vkCmdPipelineBarrier"},
			{&vk.queueSubmit, "vkQueueSubmit"},
			{&vk.createFence, "vkCreateFence"},
			{&vk.destroyFence, "vkDestroyFence"},
			{&vk.waitForFences, "vkWaitForFences"},
			{&vk.resetFences, "vkResetFences"},
			{&vk.getPhysicalDeviceProperties2, "vkGetPhysicalDeviceProperties2"},
			{&vk.enumerateDeviceExtensionProperties, "vkEnumerateDeviceExtensionProperties"},
			{&vk.getDeviceProcAddr, "vkGetDeviceProcAddr"},
		} {
			if _, err := purego.Dlsym(lib, f.name); err != nil {
				loadErr = fmt.Errorf("gpu: the Vulkan loader lacks %s: %v", f.name, err)
				return
			}
			purego.RegisterLibFunc(f.fn, lib, f.name)
		}
	})
	return loadErr
}

// cString returns a NUL-terminated copy of s.
func cString(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}

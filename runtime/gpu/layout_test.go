package gpu

import (
	"testing"
	"unsafe"
)

// TestLayouts: the Go mirrors of the C structures have vulkan_core.h's
// sizes on 64-bit targets (the sizes printed by a C program with the
// header's sizeof on linux/amd64; the property offsets were read the
// same way with offsetof). Sizes do not catch two swapped fields of one
// size.
func TestLayouts(t *testing.T) {
	for name, c := range map[string]struct{ got, want uintptr }{
		"VkApplicationInfo":                {unsafe.Sizeof(applicationInfo{}), 48},
		"VkInstanceCreateInfo":             {unsafe.Sizeof(instanceCreateInfo{}), 64},
		"VkDeviceQueueCreateInfo":          {unsafe.Sizeof(deviceQueueCreateInfo{}), 40},
		"VkBufferCreateInfo":               {unsafe.Sizeof(bufferCreateInfo{}), 56},
		"VkWriteDescriptorSet":             {unsafe.Sizeof(writeDescriptorSet{}), 64},
		"VkComputePipelineCreateInfo":      {unsafe.Sizeof(computePipelineCreateInfo{}), 96},
		"VkSubmitInfo":                     {unsafe.Sizeof(submitInfo{}), 72},
		"VkPhysicalDeviceMemoryProperties": {unsafe.Sizeof(memoryProperties{}), 520},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, the C structure %d", name, c.got, c.want)
		}
	}
}

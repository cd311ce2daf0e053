// Package gpu is strata's compute backend for GPUs, through Vulkan: one
// API for Linux GPUs, Macs (MoltenVK translates it to Metal) and Mesa's
// lavapipe, a conformant Vulkan device on the CPU that CI runs. Vulkan is
// bound at run time through purego, without cgo, so CGO_ENABLED=0 builds
// for linux/amd64, linux/arm64 and darwin/arm64 keep working, and a
// machine without a Vulkan loader simply has no device (Open fails).
//
// The kernels are GLSL compute shaders in shaders/, compiled to SPIR-V
// by `make shaders` and committed (embedded in the binary).
//
// Status: the device layer (Open, buffers in host-visible memory, one
// submission of dispatches at a time) and matrix-times-vectors for the
// weight types in kernelOf, each tested against the CPU's kernels on
// lavapipe. The forward pass does not call it yet: no --gpu flag, no
// layer runs on a device (issue 28 lists what remains).
package gpu

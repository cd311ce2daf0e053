package main

import (
	"github.com/spf13/pflag"

	"strata/runtime/gpu"
)

// gpuFlags are --gpu and --gpu-layers, for the commands that run a model
// in this process.
type gpuFlags struct{ device, layers string }

func (g *gpuFlags) add(f *pflag.FlagSet) {
	f.StringVar(&g.device, "gpu", gpu.DeviceOff, "Vulkan device for the matrix products: off, auto (the first GPU, if any) or a device index (strata doctor lists them; a CPU device such as lavapipe only by index)")
	f.StringVar(&g.layers, "gpu-layers", "all", "with --gpu, how many of the last layers' matrix products run on the device: N, or all (every layer and the output head)")
}

// vulkanFacts is what strata doctor says of this machine's Vulkan devices.
func vulkanFacts() ([]string, string) {
	list, err := gpu.List()
	if err != nil {
		return nil, err.Error()
	}
	return list, ""
}

// parse returns the device choice and the layer count.
func (g *gpuFlags) parse() (string, int, error) {
	n, err := gpu.ParseLayers(g.layers)
	return g.device, n, err
}

package main

import (
	"fmt"
	"io"
	"math"

	"github.com/spf13/pflag"

	"strata/actors/stage"
	"strata/internal/units"
	"strata/peers"
	"strata/runtime/gpu"
	"strata/runtime/model"
)

// gpuFlags are --gpu and --gpu-layers, for the commands that run a model
// in this process.
type gpuFlags struct{ device, layers string }

func (g *gpuFlags) add(f *pflag.FlagSet) {
	f.StringVar(&g.device, "gpu", gpu.DeviceOff, "Vulkan device for the matrix products: off, auto (the first GPU, if any) or a device index (strata doctor lists them; a CPU device such as lavapipe only by index)")
	f.StringVar(&g.layers, "gpu-layers", "all", "with --gpu, how many of the last layers' matrix products run on the device: N, or all (every layer and the output head)")
}

// nodeGPU opens the device of strata node --gpu and returns the hook that
// puts each shard's layers there (nil without a device), what closes the
// device, and its name and kind to announce ("" without one). A shard
// goes to the device only if the device reads its weights in place
// (unified memory: a copy would hold memory the node's --memory does not
// count) or copies them into memory of its own (a discrete GPU's VRAM,
// where they must leave a tenth of it for the KV caches' mirrors), and
// the device's scratch fits in what --gpu-memory leaves (the host counts
// it); else it stays on the CPU.
func nodeGPU(g gpuFlags, log io.Writer) (func(*model.Model, int, uint64) (stage.Acceleration, error), func(), string, error) {
	device, layers, err := g.parse()
	if err != nil {
		return nil, func() {}, "", err
	}
	d, err := gpu.OpenChoice(device)
	if err != nil || d == nil || layers == 0 {
		if d != nil {
			d.Close()
		}
		return nil, func() {}, "", err
	}
	name := fmt.Sprintf("%s (%s)", d.Name, d.Kind)
	fmt.Fprintf(log, "gpu: %s: the layers of the shards this node holds\n", name)
	if !d.SharesMemory() && !d.HasVRAM() {
		// Every shard would be copied into system memory, outside
		// --memory: no shard goes there, and no memory is kept for it.
		fmt.Fprintf(log, "gpu: %s neither shares the host's memory nor has its own: shards stay on the CPU\n", name)
		d.Close()
		return nil, func() {}, "", nil
	}
	return func(m *model.Model, rows int, free uint64) (stage.Acceleration, error) {
		o, err := d.OffloadLayers(m, layers)
		if err != nil {
			fmt.Fprintf(log, "gpu: layers [%d,%d) do not go to %s (%v): they stay on the CPU\n", m.First, m.End, d.Name, err)
			return stage.Acceleration{}, err
		}
		switch {
		case d.SharesMemory() && o.Copied() > 0:
			o.Free()
			fmt.Fprintf(log, "gpu: %s would copy the weights of layers [%d,%d), outside --memory: they stay on the CPU\n", d.Name, m.First, m.End)
			return stage.Acceleration{}, nil
		case !d.SharesMemory() && uint64(d.Allocated()) > d.VRAM()/10*9:
			o.Free()
			fmt.Fprintf(log, "gpu: the weights of layers [%d,%d) would leave under a tenth of %s's %.1f GB for the KV caches: they stay on the CPU\n",
				m.First, m.End, d.Name, float64(d.VRAM())/1e9)
			return stage.Acceleration{}, nil
		}
		scratch := o.ScratchBytes(rows) // (weights: read in place, or in the device's own memory)
		if scratch > free {
			o.Free()
			fmt.Fprintf(log, "gpu: the device's scratch for layers [%d,%d) at a batch of %d rows (%.1f MB) is over the %.1f MB --gpu-memory leaves: they stay on the CPU\n",
				m.First, m.End, rows, float64(scratch)/1e6, float64(free)/1e6)
			return stage.Acceleration{}, nil
		}
		left := "no cap"
		if free != math.MaxUint64 {
			left = fmt.Sprintf("%.1f MB left", float64(free)/1e6)
		}
		fmt.Fprintf(log, "gpu: layers [%d,%d) on %s: %s; device memory at a batch of %d rows: up to %.1f MB (--gpu-memory: %s)\n",
			m.First, m.End, d.Name, o, rows, float64(scratch)/1e6, left)
		return stage.Acceleration{Acc: o, Release: o.Free, Bytes: scratch}, nil
	}, d.Close, name, nil
}

// gpuMemory is the memory a node keeps for its device's scratch
// (--gpu-memory): a size, or auto: 1 GB, or a twentieth of the memory the
// node offers (memCap, or physical memory without a cap) where that is
// less.
func gpuMemory(s string, memCap uint64) (uint64, error) {
	if s != "auto" {
		n, err := units.ParseBytes(s)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("--gpu-memory %q: a size such as 2GB, or auto", s)
		}
		return n, nil
	}
	offer := memCap
	if total, _ := peers.SystemMemory(); offer == 0 || total > 0 && total < offer {
		offer = total
	}
	n := uint64(1e9)
	if offer > 0 {
		n = min(n, offer/20)
	}
	return n, nil
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

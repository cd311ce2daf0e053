package doctor

import (
	"fmt"
	"strings"

	"strata/internal/units"
)

// Local is what a node knows about its own machine.
type Local struct {
	MemoryOffered   uint64 // what the node offers the cluster (--memory, or all of it)
	MemoryHeld      uint64 // what it holds for the cluster now (shards, KV caches)
	SystemAvailable uint64 // what the system says is available; 0 = unknown

	DiskDir    string // the store of fetched layers (DATA_DIR/weights); "" = none
	DiskBudget int64  // its budget (--disk); 0 = no cap
	DiskUsed   int64  // what it holds
	DiskFree   int64  // free space on its file system; -1 = unknown

	OpenFiles uint64 // the open-file limit the process runs with; 0 = unknown

	SecretFile  string // the cluster secret's file; "" when it came from a flag or the environment
	SecretLoose string // why its mode is too open; "" when it is private

	// GPUWiredLimitMB is macOS's iogpu.wired_limit_mb (-1: not a Mac).
	GPUWiredLimitMB int64
}

// Thresholds of the local checks.
const (
	// MinDiskRoom is the least room a disk budget must have left to fetch
	// layers at all.
	MinDiskRoom = 64 << 20
	// MinOpenFiles is the least open-file limit: every peer takes several
	// streams and every model file a descriptor.
	MinOpenFiles = 4096
)

// LocalChecks checks a node's own machine.
func LocalChecks(l Local) []Check {
	var cs []Check
	free := l.SystemAvailable + l.MemoryHeld
	switch {
	case l.SystemAvailable == 0:
		cs = append(cs, Check{Name: "memory", Status: OK, Message: fmt.Sprintf("offers %s (free memory unknown on this system)", units.Bytes(l.MemoryOffered))})
	case l.MemoryOffered > free+free/10:
		cs = append(cs, Check{Name: "memory", Status: Warn,
			Message: fmt.Sprintf("offers %s, but only %s is free (%s of it held for the cluster): plans may place more here than fits", units.Bytes(l.MemoryOffered), units.Bytes(free), units.Bytes(l.MemoryHeld)),
			Fix:     fmt.Sprintf("offer what is free (--memory %s) or close other programs", units.Bytes(free))})
	default:
		cs = append(cs, Check{Name: "memory", Status: OK, Message: fmt.Sprintf("offers %s; %s free", units.Bytes(l.MemoryOffered), units.Bytes(free))})
	}

	if l.DiskDir != "" {
		room := l.DiskBudget - l.DiskUsed
		switch {
		case l.DiskBudget > 0 && room < MinDiskRoom:
			cs = append(cs, Check{Name: "disk", Status: Fail,
				Message: fmt.Sprintf("the budget for layers fetched from peers is full: %s of %s used in %s; this node cannot take layers it does not hold", units.Bytes(uint64(l.DiskUsed)), units.Bytes(uint64(l.DiskBudget)), l.DiskDir),
				Fix:     "raise --disk, or remove fetched models with strata models rm NAME"})
		case l.DiskBudget > 0 && l.DiskFree >= 0 && l.DiskFree < room:
			cs = append(cs, Check{Name: "disk", Status: Warn,
				Message: fmt.Sprintf("the budget leaves room for %s more, but the disk has only %s free", units.Bytes(uint64(room)), units.Bytes(uint64(l.DiskFree))),
				Fix:     "free disk space, or lower --disk"})
		default:
			msg := fmt.Sprintf("%s of fetched layers", units.Bytes(uint64(l.DiskUsed)))
			if l.DiskBudget > 0 {
				msg += " within a budget of " + units.Bytes(uint64(l.DiskBudget))
			}
			cs = append(cs, Check{Name: "disk", Status: OK, Message: msg})
		}
	}

	switch {
	case l.OpenFiles == 0:
	case l.OpenFiles < MinOpenFiles:
		cs = append(cs, Check{Name: "open-files", Status: Fail,
			Message: fmt.Sprintf("the open-file limit is %d (at least %d: every peer holds several streams)", l.OpenFiles, MinOpenFiles),
			Fix:     "raise it: ulimit -n 65536 before strata node, LimitNOFILE=65536 in a systemd unit (strata service install sets it)"})
	default:
		cs = append(cs, Check{Name: "open-files", Status: OK, Message: fmt.Sprintf("open-file limit %d", l.OpenFiles)})
	}

	switch {
	case l.SecretLoose != "":
		cs = append(cs, Check{Name: "secret", Status: Fail, Message: "the cluster secret is not private: " + l.SecretLoose,
			Fix: "chmod 600 " + l.SecretFile})
	case l.SecretFile != "":
		cs = append(cs, Check{Name: "secret", Status: OK, Message: l.SecretFile + " is private (mode 0600)"})
	}

	if l.GPUWiredLimitMB >= 0 {
		msg := "iogpu.wired_limit_mb is the system default (about two thirds to three quarters of memory for the GPU)"
		if l.GPUWiredLimitMB > 0 {
			msg = fmt.Sprintf("iogpu.wired_limit_mb is %d MB", l.GPUWiredLimitMB)
		}
		cs = append(cs, Check{Name: "gpu-wired", Status: OK, Message: msg + "; strata's nodes compute on the CPU for now, so it does not limit the model"})
	}
	return cs
}

// VulkanCheck is the gpu line: the machine's Vulkan devices ("0: NAME
// (KIND)"), or why there are none. Information, never a failure: the CPU
// computes without one. The strata doctor command looks in its own
// process (a node does not load a Vulkan driver it does not use).
func VulkanCheck(devices []string, why string) Check {
	if len(devices) == 0 {
		return Check{Name: "gpu", Status: OK, Message: "no Vulkan device on this machine (" + why + "): strata computes on the CPU"}
	}
	return Check{Name: "gpu", Status: OK, Message: "Vulkan devices on this machine: " + strings.Join(devices, "; ") +
		" (--gpu N on strata run, chat, logits, bench and node puts matrix products there)"}
}

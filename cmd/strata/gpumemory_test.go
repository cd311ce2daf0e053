package main

import (
	"testing"

	"strata/peers"
)

// TestGPUMemoryFlag: --gpu-memory takes a size, or auto: 1 GB, or a
// twentieth of the memory the node offers where that is less; anything
// else (and 0, which would keep every shard off the device) is refused.
func TestGPUMemoryFlag(t *testing.T) {
	for _, c := range []struct {
		flag   string
		memCap uint64
		want   uint64
	}{
		{"2GB", 0, 2e9},
		{"600kB", 1e6, 600e3},
		{"auto", 8e9, 400e6}, // the test machines have more than 8 GB
		{"auto", 100e9, 1e9},
	} {
		if total, _ := peers.SystemMemory(); c.memCap > total && total > 0 {
			c.want = min(c.want, total/20) // a cap over physical memory: a twentieth of what there is
		}
		got, err := gpuMemory(c.flag, c.memCap)
		if err != nil || got != c.want {
			t.Errorf("--gpu-memory %s with --memory %d: %d, %v; want %d", c.flag, c.memCap, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "0", "lots", "-1GB"} {
		if n, err := gpuMemory(bad, 8e9); err == nil {
			t.Errorf("--gpu-memory %q accepted (%d)", bad, n)
		}
	}
}

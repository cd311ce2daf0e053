//go:build !linux && !darwin

package peers

// systemMemory is unknown on this system: zeros (set Config.MemoryBytes).
func systemMemory() (total, avail uint64) { return 0, 0 }

package peers

import "golang.org/x/sys/unix"

// systemMemory returns physical memory (hw.memsize) and an estimate of what
// is available: free plus inactive plus purgeable pages.
func systemMemory() (total, avail uint64) {
	total, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0, 0
	}
	page := uint64(unix.Getpagesize())
	for _, name := range []string{"vm.page_free_count", "vm.page_inactive_count", "vm.page_purgeable_count"} {
		if n, err := unix.SysctlUint32(name); err == nil {
			avail += uint64(n) * page
		}
	}
	return total, min(avail, total)
}

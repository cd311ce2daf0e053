package doctor

import "golang.org/x/sys/unix"

// GPUWiredLimitMB is iogpu.wired_limit_mb: how much memory macOS lets the
// GPU wire (0: the system default).
func GPUWiredLimitMB() int64 {
	v, err := unix.SysctlUint32("iogpu.wired_limit_mb")
	if err != nil {
		return 0
	}
	return int64(v)
}

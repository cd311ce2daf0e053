//go:build !darwin

package doctor

// GPUWiredLimitMB is -1 off macOS: there is no such limit.
func GPUWiredLimitMB() int64 { return -1 }

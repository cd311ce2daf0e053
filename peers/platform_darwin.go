package peers

import (
	"strings"

	"golang.org/x/sys/unix"
)

// osBuild is the macOS build (e.g. 24C101): two Macs on one major version
// may still differ in it, and RDMA over Thunderbolt needs matching ones.
func osBuild() string {
	b, err := unix.Sysctl("kern.osversion")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(b)
}

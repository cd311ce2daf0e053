package peers

import "golang.org/x/sys/unix"

// osBuild is the kernel release (uname -r).
func osBuild() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

package doctor

import "golang.org/x/sys/unix"

// OpenFileLimit is the process's open-file limit (the soft one, which Go
// raises to the hard one at start); 0 when unknown.
func OpenFileLimit() uint64 {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}

// DiskFree is the space free to this user on dir's file system; -1 when
// unknown.
func DiskFree(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

//go:build !linux

package verbs

import "os"

// shmDir is where rings between processes live: there is no /dev/shm on
// macOS; the per-user temporary directory is private to this user.
var shmDir = os.TempDir()

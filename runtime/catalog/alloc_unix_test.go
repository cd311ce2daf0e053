//go:build unix

package catalog

import (
	"os"
	"syscall"
	"testing"
)

// allocated is the disk space a file takes (512-byte blocks).
func allocated(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	return int64(st.Blocks) * 512
}

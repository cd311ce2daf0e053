package catalog

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DefaultBudget is the budget a store in dir gets when none is given:
// what it holds already plus the file system's free space less a margin
// (a twentieth of the file system, at least 2 GiB), so that layers
// fetched for peers never fill the disk the node and its user need. At
// least 1 byte (a store with no room refuses every fetch in words).
func DefaultBudget(dir string, held int64) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("catalog: free space of %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	total := int64(st.Blocks) * int64(st.Bsize)
	margin := max(total/20, 2<<30)
	return max(1, held+free-margin), nil
}

//go:build linux

package membw

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// peakRSSProc reads VmHWM (the resident high-water mark, which
// ResetPeakRSS can reset) from /proc/self/status, in bytes.
func peakRSSProc() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "VmHWM:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

// ResetPeakRSS restarts the peak RSS from the current RSS, so that a
// buffer freed before (the bandwidth buffer) does not count. It reports
// whether the system allows it (Linux: /proc/self/clear_refs).
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

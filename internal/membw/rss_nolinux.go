//go:build unix && !linux

package membw

func peakRSSProc() (int64, bool) { return 0, false }

// ResetPeakRSS reports false: only Linux can restart the peak RSS.
func ResetPeakRSS() bool { return false }

//go:build !unix

package membw

// PeakRSS returns 0: this system's peak resident set size is not read.
func PeakRSS() int64 { return 0 }

//go:build purego || !amd64

package tensor

// flipQ8Form: the Q8_0 lane dots have one form here.
func flipQ8Form() {}

//go:build purego || !(amd64 || arm64)

package tensor

func dotQ8_0(w []byte, x []int8, d []float32) float32 { return dotQ8_0Generic(w, x, d) }

// implementations lists the kernel sets a test can select; only the
// generic one here.
var implementations = []impl{{"generic", func(bool) {}}}

func kernelsActive(string) bool { return false }

//go:build !purego

package tensor

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useNEON selects the NEON kernel with the dot-product instructions (SDOT,
// ARMv8.2; every Apple Silicon core has them). It is read once from the
// CPU; tests flip it. Only the Q8_0 one-vector dot has an arm64 kernel so
// far; everything else runs the generic Go kernels.
var useNEON = cpu.ARM64.HasASIMDDP

var hasNEON = useNEON

// implementations lists the kernel sets this CPU can run.
var implementations = func() []impl {
	list := []impl{{"generic", func(on bool) { useNEON = !on && hasNEON }}}
	if hasNEON {
		list = append(list, impl{"neon", func(on bool) { useNEON = hasNEON }})
	}
	return list
}()

func kernelsActive(name string) bool { return name == "neon" && useNEON }

// dotQ8_0NEON is dotQ8_0Generic over nb blocks (nb > 0): SDOT gives the
// same eight lanes of four-element integer sums, SCVTF and FMLA (fused)
// the same per-lane float32 steps, and the reduction the same order.
//
//go:noescape
func dotQ8_0NEON(w *byte, x *int8, d *float32, nb int) float32

func dotQ8_0(w []byte, x []int8, d []float32) float32 {
	if !useNEON || len(d) == 0 {
		return dotQ8_0Generic(w, x, d)
	}
	nb := len(d)
	_, _ = w[nb*q80Bytes-1], x[nb*32-1]
	return dotQ8_0NEON(unsafe.SliceData(w), unsafe.SliceData(x), unsafe.SliceData(d), nb)
}

package membw_test

import (
	"fmt"

	"strata/internal/membw"
)

// The node's memory bandwidth: the fastest of several timed reads of a
// buffer far larger than any cache (here a smaller one, to be quick).
func ExampleMeasure() {
	gbs, err := membw.Measure(membw.Options{Threads: 2, Bytes: 64 << 20, Passes: 2, MinTime: 1})
	fmt.Println(gbs > 0, err)
	// Output:
	// true <nil>
}

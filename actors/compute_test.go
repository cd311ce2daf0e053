package actors

import (
	"strata/runtime/tensor"
	"testing"
	"time"
)

func TestMeasureCompute(t *testing.T) {
	pool := tensor.NewPool(2)
	defer pool.Close()
	if f := MeasureCompute(pool, 20*time.Millisecond); f < 1e8 {
		t.Errorf("compute rate %.3g FLOP/s; a CPU manages more than 1e8", f)
	}
}

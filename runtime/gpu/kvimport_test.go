package gpu

import (
	"runtime"
	"testing"
	"time"

	"strata/internal/testdata"
	"strata/runtime/model"
)

// TestKVImportsLiveWithTheirCaches: a whole layer imports a cache's layer
// once and uses that import while the Cache lives; once the Cache is
// unreachable its imports are freed at the next call; past the table's
// bound a call's imports are its own (freed after it), and the answer is
// the same either way.
func TestKVImportsLiveWithTheirCaches(t *testing.T) {
	d := openDevice(t)
	m := loadModel(t, testdata.Path(t, "gguf/stories260K.gguf"))
	o, err := d.OffloadLayers(m, AllLayers)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Free()
	weights := d.imports.Load() // the matrices, read in place
	layers := len(m.Blocks)
	s := m.NewState(nil, 16, 256)
	s.Accelerate(o)
	// run feeds ids to c and returns the last logit of the last row.
	run := func(c *model.Cache, ids []int) float32 {
		t.Helper()
		if err := s.Embed(ids); err != nil {
			t.Fatal(err)
		}
		if err := s.ForwardBatch([]model.Segment{{Cache: c, N: len(ids)}}); err != nil {
			t.Fatal(err)
		}
		if s.AcceleratorErr() != nil {
			t.Fatal(s.AcceleratorErr())
		}
		l, err := s.LogitsOf(len(ids) - 1)
		if err != nil {
			t.Fatal(err)
		}
		return l[len(l)-1]
	}
	held := func() int {
		o.layerMu.Lock()
		defer o.layerMu.Unlock()
		return o.kv.held()
	}
	a := m.NewCache(256)
	run(a, []int{1, 400, 30})
	if got := held(); got != layers {
		t.Fatalf("%d cache layers imported after one cache's step, want %d", got, layers)
	}
	first := o.kv.byKey[kvKey{cacheKey(a), 0}].k
	want := run(a, []int{31})
	if got := held(); got != layers || o.kv.byKey[kvKey{cacheKey(a), 0}].k != first {
		t.Fatalf("a second step imported again (%d held, same buffer %v)", got, o.kv.byKey[kvKey{cacheKey(a), 0}].k == first)
	}
	runtime.KeepAlive(a)
	a = nil

	// a is gone: its imports go at the next call.
	deadline := time.Now().Add(10 * time.Second)
	for o.kv.dead.Load() == 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	b := m.NewCache(256)
	run(b, []int{1, 400, 30})
	if got := held(); got != layers {
		t.Fatalf("%d cache layers imported once the first cache was gone, want %d (its own)", got, layers)
	}
	if n := d.imports.Load() - weights; n != int64(2*layers) {
		t.Fatalf("%d cache imports alive, want %d: the gone cache's were not freed", n, 2*layers)
	}
	if got := run(b, []int{31}); got != want {
		t.Fatalf("the second cache's step: %g, want the first's %g", got, want)
	}

	// Past the bound: the call's imports are its own.
	defer func(n int) { maxKVImports = n }(maxKVImports)
	maxKVImports = layers
	c := m.NewCache(256)
	run(c, []int{1, 400, 30})
	if got := run(c, []int{31}); got != want {
		t.Fatalf("a cache imported call by call: %g, want %g", got, want)
	}
	if got := held(); got != layers {
		t.Fatalf("%d cache layers held past the bound of %d", got, layers)
	}
	if n := d.imports.Load() - weights; n != int64(2*layers) {
		t.Fatalf("%d cache imports alive after calls past the bound, want the %d kept (a call's own must be freed)", n, 2*layers)
	}
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
}

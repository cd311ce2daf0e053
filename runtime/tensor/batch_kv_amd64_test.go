//go:build !purego

package tensor

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkBatchKVNNI compares, with the AVX-VNNI kernel set, K-quant and
// IQ4_XS batches in the row-sequential form (the kernels of
// batch_kv_amd64.s: form=batch) with the form a CPU without them runs
// (the one- and four-vector dots: form=dots), one thread, a 512x2048
// matrix against 128 vectors (a prefill chunk); bytes are weight bytes.
// cpu-ns/op is the thread's CPU time (Linux), steadier than the wall
// clock on a shared machine. It decided that batchKQuants is on with
// AVX-VNNI.
func BenchmarkBatchKVNNI(b *testing.B) {
	var vnni *impl
	for i := range implementations {
		if implementations[i].name == "avxvnni" {
			vnni = &implementations[i]
		}
	}
	if vnni == nil {
		b.Skip("no AVX-VNNI here")
	}
	defer func(on bool) { batchKQuants = on }(batchKQuants)
	const rows, cols, n = 512, 2048, 128
	for _, t := range []Type{Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS} {
		w, _ := randomMatrix(b, t, rows, cols, 1)
		x := testData("uniform", n*cols, 2)
		out := make([]float32, n*rows)
		a := NewActivations(n, cols)
		for _, form := range []string{"dots", "batch"} {
			b.Run(fmt.Sprintf("%v/form=%s", t, form), func(b *testing.B) {
				vnni.use(true)
				defer vnni.use(false)
				batchKQuants = form == "batch"
				b.SetBytes(int64(len(w.Data)))
				b.ReportAllocs()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				c0, ok := threadCPU()
				for b.Loop() {
					a.Set(x, n)
					MatMulAct(nil, out, w, a)
				}
				if c1, _ := threadCPU(); ok {
					b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}

// SetKernels selects each kernel set this CPU has, with the batch form of
// a CPU that has only that set (the K-quant batch kernels with avx512 and
// avxvnni), and refuses a set it does not have.
func TestSetKernels(t *testing.T) {
	orig := Kernels()
	defer func() {
		if err := SetKernels(orig); err != nil {
			t.Fatal(err)
		}
	}()
	for _, im := range implementations {
		if err := SetKernels(im.name); err != nil {
			t.Fatal(err)
		}
		if got := Kernels(); got != im.name {
			t.Errorf("SetKernels(%q): Kernels() = %q", im.name, got)
		}
		want := im.name == "avx512" || im.name == "avxvnni"
		if got := usesBatchForm(Q4_K, batchMin); got != want {
			t.Errorf("SetKernels(%q): Q4_K batch form %v, want %v", im.name, got, want)
		}
	}
	if err := SetKernels("sse2"); err == nil || !strings.Contains(err.Error(), "generic") {
		t.Errorf(`SetKernels("sse2") = %v, want an error listing the sets`, err)
	}
}

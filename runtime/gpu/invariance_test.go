package gpu

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

// TestDeviceRowsDoNotDependOnTheirCompany: on the device, a sequence's
// logits are the same bits whether its prompt ran in one chunk or a
// token at a time, and whether its next step ran alone or in a batch
// with other sequences' rows (every kernel computes a row in an order of
// its own: products a workgroup per output, attention a workgroup per
// head and row over the cache in fixed chunks, the experts' combine per
// token in expert order). The batch invariance the CPU keeps (issue 26)
// holds on the device too. Dense layers whole (stories260K F32,
// qwen2-tiny Q4_K) and a mixture of experts (qwen3moe-tiny Q6_K), routed
// on the device and, the State routing, its attention half and its
// experts in a submission of their own.
func TestDeviceRowsDoNotDependOnTheirCompany(t *testing.T) {
	d := openDevice(t)
	dir := t.TempDir()
	paths := []string{testdata.Path(t, "gguf/stories260K.gguf"), synthModel(t, dir, "qwen2-tiny", tensor.Q4_K), synthModel(t, dir, "qwen3moe-tiny", tensor.Q6_K)}
	type run struct {
		path   string
		routed bool // a mixture of experts routed on the device, else by the State, the experts in their own submission
	}
	var runs []run
	for _, p := range paths {
		runs = append(runs, run{p, true})
	}
	runs = append(runs, run{paths[2], false})
	for _, run := range runs {
		t.Run(fmt.Sprintf("%s routed=%v", filepath.Base(run.path), run.routed), func(t *testing.T) {
			m := loadModel(t, run.path)
			routeOnDevice = run.routed
			o, err := d.OffloadLayers(m, AllLayers)
			routeOnDevice = true
			if err != nil {
				t.Fatal(err)
			}
			defer o.Free()
			prompts := [][]int{{1, 400, 30, 31, 32}, {1, 17}, {1, 90, 91, 92, 93, 94, 95, 96, 97}}
			next := [][]int{{5}, {6, 7, 8}, {9}}
			for i := range prompts {
				for j := range prompts[i] {
					prompts[i][j] %= m.Vocab
				}
			}
			s := m.NewState(nil, 16, 1024)
			s.Accelerate(o)
			step := func(cs []*model.Cache, rows [][]int) [][]float32 { return batchStep(t, s, cs, rows) }
			// Alone: each prompt in one chunk, then its next rows alone.
			var alone [][]float32
			var aloneLast [][]float32
			for i, p := range prompts {
				c := m.NewCache(1024)
				last := step([]*model.Cache{c}, [][]int{p})
				aloneLast = append(aloneLast, last[len(last)-1])
				alone = append(alone, step([]*model.Cache{c}, [][]int{next[i]})...)
			}
			// In company: each prompt a token at a time, then every
			// sequence's next rows in one batch.
			var caches []*model.Cache
			for i, p := range prompts {
				c := m.NewCache(1024)
				var last [][]float32
				for _, id := range p {
					last = step([]*model.Cache{c}, [][]int{{id}})
				}
				if !slices.Equal(last[0], aloneLast[i]) {
					t.Fatalf("prompt %d: its last logits differ when it ran a token at a time", i)
				}
				caches = append(caches, c)
			}
			layerRuns, expertRuns := o.layerRuns.Load(), o.expertRuns.Load()
			company := step(caches, next)
			for r := range alone {
				if !slices.Equal(company[r], alone[r]) {
					t.Fatalf("row %d: its logits in a batch of %d rows of 3 sequences differ from those it had alone", r, len(company))
				}
			}
			if o.layerRuns.Load()-layerRuns < int64(len(m.Blocks)) {
				t.Fatalf("%d of %d layers ran on the device in the batched step", o.layerRuns.Load()-layerRuns, len(m.Blocks))
			}
			if m.Experts > 0 && !run.routed && o.expertRuns.Load() == expertRuns {
				t.Fatal("the experts' submission did not run in the batched step")
			}
			if m.Experts > 0 && run.routed && o.routedRuns.Load() == 0 {
				t.Fatal("no layer routed on the device")
			}
		})
	}
}

package gpu

import (
	"path/filepath"
	"slices"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/model"
	"strata/runtime/synth"
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
// qwen2-tiny Q4_K) and a mixture of experts (qwen3moe-tiny Q6_K:
// attention half, routed experts in one submission).
func TestDeviceRowsDoNotDependOnTheirCompany(t *testing.T) {
	d := openDevice(t)
	dir := t.TempDir()
	paths := []string{testdata.Path(t, "gguf/stories260K.gguf")}
	for _, c := range []struct {
		shape string
		typ   tensor.Type
	}{{"qwen2-tiny", tensor.Q4_K}, {"qwen3moe-tiny", tensor.Q6_K}} {
		p := filepath.Join(dir, c.shape+"-"+c.typ.String()+".gguf")
		if err := synth.WriteFile(p, model.Shapes[c.shape], synth.Options{Type: c.typ, Seed: 7}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m := loadModel(t, path)
			o, err := d.OffloadLayers(m, AllLayers)
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
			// step runs rows of the sequences with caches cs in one batch
			// and returns every row's logits.
			step := func(cs []*model.Cache, rows [][]int) [][]float32 {
				t.Helper()
				var ids []int
				var segs []model.Segment
				for i, r := range rows {
					ids = append(ids, r...)
					segs = append(segs, model.Segment{Cache: cs[i], N: len(r)})
				}
				if err := s.Embed(ids); err != nil {
					t.Fatal(err)
				}
				if err := s.ForwardBatch(segs); err != nil {
					t.Fatal(err)
				}
				if s.AcceleratorErr() != nil {
					t.Fatal(s.AcceleratorErr())
				}
				var out [][]float32
				for i := range ids {
					l, err := s.LogitsOf(i)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, slices.Clone(l))
				}
				return out
			}
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
			whole, _ := o.WholeLayers()
			runs := o.expertRuns.Load()
			company := step(caches, next)
			for r := range alone {
				if !slices.Equal(company[r], alone[r]) {
					t.Fatalf("row %d: its logits in a batch of %d rows of 3 sequences differ from those it had alone", r, len(company))
				}
			}
			if whole == 0 && o.expertRuns.Load() == runs {
				t.Fatal("neither whole layers nor the experts' submission ran on the device")
			}
		})
	}
}

package gpu

import (
	"path/filepath"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/model"
	"strata/runtime/tensor"
)

// TestMemoryBytesBoundsWhatTheDeviceAllocates: what an Offload says it
// allocates at a batch of 64 rows (what a node logs per shard)
// is at least what the device allocated for it by the end of such a
// batch, every path taken (whole dense layers; a mixture of experts'
// attention half and experts' submission; latent attention whole),
// and not twice as much.
func TestMemoryBytesBoundsWhatTheDeviceAllocates(t *testing.T) {
	dir := t.TempDir()
	paths := []string{testdata.Path(t, "gguf/stories260K.gguf"), synthModel(t, dir, "qwen3moe-tiny", tensor.Q6_K), synthModel(t, dir, "deepseek2-tiny", tensor.Q8_0)}
	const rows = 64
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			d := openDevice(t) // a device of its own: MatMul's buffers start empty
			m := loadModel(t, path)
			before := d.Allocated()
			o, err := d.OffloadLayers(m, AllLayers)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Free()
			s := m.NewState(nil, rows, 1024)
			s.Accelerate(o)
			var ids []int
			var segs []model.Segment
			for i := range 4 {
				for j := range rows / 4 {
					ids = append(ids, (i*31+j*7+1)%m.Vocab)
				}
				segs = append(segs, model.Segment{Cache: m.NewCache(1024), N: rows / 4})
			}
			if err := s.Embed(ids); err != nil {
				t.Fatal(err)
			}
			if err := s.ForwardBatch(segs); err != nil {
				t.Fatal(err)
			}
			if err := s.LogitsRows(0, rows, make([]float32, rows*m.Vocab)); err != nil {
				t.Fatal(err)
			}
			if s.AcceleratorErr() != nil {
				t.Fatal(s.AcceleratorErr())
			}
			used, said := uint64(d.Allocated()-before), o.MemoryBytes(rows)
			t.Logf("allocated %d bytes, MemoryBytes(%d) says %d", used, rows, said)
			if used == 0 || said < used || said > 2*used {
				t.Fatalf("the device allocated %d bytes for a batch of %d rows; MemoryBytes says %d", used, rows, said)
			}
		})
	}
}

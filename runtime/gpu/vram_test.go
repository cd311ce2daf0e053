package gpu

import (
	"math"
	"path/filepath"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/model"
	"strata/runtime/sample"
	"strata/runtime/tensor"
)

// useVRAM makes d act as a discrete GPU: weights copied into memory of
// its own, each KV cache layer a whole layer uses mirrored there. Lavapipe
// has no memory of its own: its one memory type stands in, and buffers
// there are left unmapped, so that they are filled and read by copies
// only, as VRAM is.
func useVRAM(d *Device) { d.vram, d.localType = true, d.hostType }

// TestVRAMMirrorsFollowTheHost: with the KV cache mirrored in the
// device's memory, every way the host's cache changes behind the device
// reaches it: a prompt the CPU stored before the device's first layer, a
// rollback (speculation's rejected guesses) then other tokens stored by
// the CPU at the same positions, the device's own rows copied back for
// the CPU to read. At each step the logits are the CPU's alone, within
// float rounding, and the argmax equal. Dense (stories260K), latent
// attention with routing on the device (deepseek2-tiny F16).
func TestVRAMMirrorsFollowTheHost(t *testing.T) {
	d := openDevice(t)
	useVRAM(d)
	dir := t.TempDir()
	for _, path := range []string{testdata.Path(t, "gguf/stories260K.gguf"), synthModel(t, dir, "deepseek2-tiny", tensor.F16)} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m := loadModel(t, path)
			o, err := d.OffloadLayers(m, AllLayers)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Free()
			if _, bytes := o.Held(); o.Copied() != bytes {
				t.Fatalf("%d of %d bytes of weights copied into the device's memory", o.Copied(), bytes)
			}
			if whole, _ := o.WholeLayers(); whole != len(m.Blocks) {
				t.Fatalf("%d of %d layers whole", whole, len(m.Blocks))
			}
			gpu := m.NewState(nil, 16, 256)
			gpu.Accelerate(o)
			cpu := m.NewState(nil, 16, 256)
			tok := func(ids ...int) []int {
				for i := range ids {
					ids[i] %= m.Vocab
				}
				return ids
			}
			dev, ref := m.NewCache(256), m.NewCache(256) // the device's sequence; the CPU's alone
			check := func(what string, s *model.State, rows []int) {
				t.Helper()
				runs := o.layerRuns.Load()
				got := batchStep(t, s, []*model.Cache{dev}, [][]int{rows})
				want := batchStep(t, cpu, []*model.Cache{ref}, [][]int{rows})
				if s == gpu && o.layerRuns.Load()-runs < int64(len(m.Blocks)) {
					t.Fatalf("%s: %d of %d layers ran on the device", what, o.layerRuns.Load()-runs, len(m.Blocks))
				}
				for i := range want {
					lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
					for _, v := range want[i] {
						lo, hi = min(lo, v), max(hi, v)
					}
					for j := range want[i] {
						if diff := math.Abs(float64(got[i][j] - want[i][j])); diff > 1e-4*float64(hi-lo) {
							t.Fatalf("%s: row %d logit %d: %g, want %g", what, i, j, got[i][j], want[i][j])
						}
					}
					if a, b := sample.Greedy(got[i]), sample.Greedy(want[i]); a != b {
						t.Fatalf("%s: row %d: argmax %d, want %d", what, i, a, b)
					}
				}
			}
			check("a prompt the CPU stores", cpu, tok(1, 400, 30, 31))
			check("the device's first rows, the prompt loaded", gpu, tok(32, 33, 34))
			check("the CPU reading what the device wrote", cpu, tok(35))
			check("the device again", gpu, tok(36, 37))
			dev.Len -= 3 // rejected guesses
			ref.Len -= 3
			check("other tokens the CPU stores where the device's were", cpu, tok(90, 91))
			check("the device after the rollback", gpu, tok(92, 93, 94))
		})
	}
}

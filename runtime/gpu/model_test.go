package gpu

import (
	"math"
	"path/filepath"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/modelinfo"
	"strata/runtime/sample"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// TestOffloadedModel: whole models on the device (every layer and the
// output head, then only the last layer; dense layers whole, mixture-of-
// experts ones whole, routing on the device, and, the State routing,
// their attention half and then their routed experts, with grouped-query
// or latent attention; latent attention of the older attn_kv_b layout a
// matrix product at a time; all of it as on a discrete GPU, the weights
// copied into its memory and the KV cache mirrored there; and the
// experts' and heads' 3-D tensors held an expert or a head a part, as a
// tensor over the device's binding range is) give the CPU's teacher-
// forced logits within tolerance and the same argmax at every position: stories260K (F32) and synthetic models of
// the other weight types. Float weights: within 1e-4 of the logits'
// range (the sums' order is all that differs). Quantized weights: within
// the CPU's own tolerance against llama.cpp (model's oracleTol for Q8_0,
// 2e-2), for the same reason as there: a last-bit difference before an
// activation quantizer can move a value across a rounding step, and from
// there on the two differ by the 8-bit rounding itself.
func TestOffloadedModel(t *testing.T) {
	d := openDevice(t)
	vram := openDevice(t)
	useVRAM(vram)
	dir := t.TempDir()
	type modelCase struct {
		name, path string
		tol        float64
	}
	models := []modelCase{{"stories260K", testdata.Path(t, "gguf/stories260K.gguf"), 1e-4}}
	for _, c := range []struct {
		shape string
		typ   tensor.Type
	}{{"llama3-tiny", tensor.F16}, {"llama3-tiny", tensor.Q8_0}, {"qwen3-tiny", tensor.Q4_0}, {"qwen2-tiny", tensor.Q4_K}, {"qwen3moe-tiny", tensor.Q6_K}, {"qwen3moe-tiny", tensor.F16},
		{"deepseek2-tiny", tensor.Q8_0}, {"deepseek2-tiny", tensor.F16}} {
		p := synthModel(t, dir, c.shape, c.typ)
		tol := 2e-2 // 8-bit activations
		if c.typ == tensor.F16 {
			tol = 1e-4
		}
		models = append(models, modelCase{c.shape + " " + c.typ.String(), p, tol})
	}
	for _, typ := range []tensor.Type{tensor.F16, tensor.Q8_0} {
		s := model.Shapes["deepseek2-tiny"]
		s.LegacyKVB = true
		p := filepath.Join(dir, "deepseek2-tiny-kvb-"+typ.String()+".gguf")
		if err := synth.WriteFile(p, s, synth.Options{Type: typ, Seed: 7}); err != nil {
			t.Fatal(err)
		}
		tol := 2e-2
		if typ == tensor.F16 {
			tol = 1e-4
		}
		models = append(models, modelCase{"deepseek2-tiny attn_kv_b " + typ.String(), p, tol})
	}
	for _, mc := range models {
		m := loadModel(t, mc.path)
		ids := make([]int, 40)
		for i := range ids {
			ids[i] = (i*37 + 11) % min(m.Vocab, 500)
		}
		var want [][]float32
		if err := model.TeacherForced(m, nil, ids, 7, func(_ int, l []float32) { want = append(want, append([]float32(nil), l...)) }); err != nil {
			t.Fatal(err)
		}
		moe := m.Experts > 0
		type run struct {
			layers int
			routed bool // mixture-of-experts layers routed on the device, else the State routes
			vram   bool // as a discrete GPU: weights copied into its memory, the KV cache mirrored there
			parts  bool // 3-D tensors held an expert or head a part, as one over the binding range is
		}
		runs := []run{{len(m.Blocks), true, false, false}, {1, true, false, false}, {len(m.Blocks), true, true, false}}
		if moe {
			runs = append(runs, run{len(m.Blocks), false, false, false})
		}
		if moe || m.MLA.Split {
			runs = append(runs, run{len(m.Blocks), true, false, true})
		}
		for _, run := range runs {
			layers := run.layers
			routeOnDevice = run.routed
			if run.parts {
				stackLimit = 1
			}
			dev := d
			if run.vram {
				dev = vram
			}
			o, err := dev.OffloadLayers(m, layers)
			routeOnDevice, stackLimit = true, 0
			if err != nil {
				t.Fatal(err)
			}
			// Dense layers run whole, mixture-of-experts ones too (or
			// their attention half, the State routing); latent attention
			// of the attn_kv_b layout (W_UK used transposed) neither.
			legacy := m.MLA.KVLoraRank > 0 && !m.MLA.Split
			wantWhole, wantAttention := 0, 0
			for _, b := range m.Blocks[len(m.Blocks)-layers:] {
				switch {
				case legacy:
				case b.MoE != nil && !run.routed:
					wantAttention++
				default:
					wantWhole++
				}
			}
			if whole, attention := o.WholeLayers(); whole != wantWhole || attention != wantAttention {
				t.Errorf("%s: of %d offloaded layers, %d run whole and %d their attention, want %d and %d", mc.name, layers, whole, attention, wantWhole, wantAttention)
			}
			heads := 0 // per-head stacks: attn_k_b and attn_v_b
			if m.MLA.Split {
				heads = 2 * layers
			}
			if moe && !run.parts && len(o.stacks) != 3*min(layers, len(m.Blocks)-m.DenseLayers)+heads {
				t.Errorf("%s: %d stacked tensors held for %d layers", mc.name, len(o.stacks), layers)
			}
			for _, b := range m.Blocks[len(m.Blocks)-layers:] {
				if b.MoE == nil {
					continue
				}
				for e := range b.MoE.Experts {
					if d := b.MoE.Experts[e]; o.stacked(d.Gate) == nil || o.stacked(d.Up) == nil || o.stacked(d.Down) == nil {
						t.Fatalf("%s: expert %d's matrices are not on the device", mc.name, e)
					}
				}
			}
			held, bytes := o.Held()
			if held == 0 {
				t.Fatalf("%s: no matrix offloaded", mc.name)
			}
			// A device that reads host memory reads the mmap'd weights in
			// place (GGUF aligns tensor data to 32 bytes).
			if !run.vram && d.importAlign > 0 && d.offsetAlign <= 32 && o.Copied() != 0 {
				t.Errorf("%s: %d of %d bytes copied, on a device that imports host memory", mc.name, o.Copied(), bytes)
			}
			if run.vram && o.Copied() != bytes {
				t.Errorf("%s: %d of %d bytes copied into the device's memory", mc.name, o.Copied(), bytes)
			}
			err = model.TeacherForcedOn(m, nil, o, ids, 7, func(i int, got []float32) {
				lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
				for _, v := range want[i] {
					lo, hi = min(lo, v), max(hi, v)
				}
				for j := range got {
					if d := math.Abs(float64(got[j] - want[i][j])); d > mc.tol*float64(hi-lo) {
						t.Fatalf("%s, %d layers on the device: position %d logit %d: %g, want %g", mc.name, layers, i, j, got[j], want[i][j])
					}
				}
				if a, b := sample.Greedy(got), sample.Greedy(want[i]); a != b {
					t.Errorf("%s, %d layers on the device: position %d: argmax %d, want %d", mc.name, layers, i, a, b)
				}
			})
			calls, expertRuns, layerRuns, routedRuns := o.Calls(), o.expertRuns.Load(), o.layerRuns.Load(), o.routedRuns.Load()
			o.Free()
			switch {
			case moe && !legacy && run.routed && (routedRuns == 0 || expertRuns != 0):
				t.Errorf("%s: %d layers routed on the device, %d experts' submissions: want the routing there", mc.name, routedRuns, expertRuns)
			case moe && (legacy || !run.routed) && expertRuns == 0:
				t.Errorf("%s: no routed experts ran on the device", mc.name)
			}
			passes := int64(len(ids)+6) / 7
			if want := passes * int64(wantWhole+wantAttention); layerRuns < want {
				t.Errorf("%s: %d layer submissions in %d forward passes, want %d", mc.name, layerRuns, passes, want)
			}
			if err != nil {
				t.Fatal(err)
			}
			// Every forward pass runs each offloaded layer on the device.
			if calls < int64(len(ids)/7) {
				t.Errorf("%s: the device computed %d products in %d forward passes", mc.name, calls, (len(ids)+6)/7)
			}
			t.Logf("%s: %d layers (%d matrices, routing on the device: %v, VRAM: %v, 3-D tensors in parts: %v) on the device: logits within %g of their range", mc.name, layers, held, run.routed && moe && !legacy, run.vram, run.parts, mc.tol)
		}
	}
}

// loadModel loads every layer of the GGUF model at path (closed when the
// test ends).
func loadModel(t *testing.T, path string) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	in, err := modelinfo.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f, 0, in.Config.Layers)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

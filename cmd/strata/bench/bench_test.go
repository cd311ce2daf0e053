package bench

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// run runs `strata bench args...` and returns what it printed.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := Command()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under strata's root
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestBenchJSON(t *testing.T) {
	out, err := run(t, "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--threads", "2",
		"--prompt-tokens", "9", "--gen-tokens", "5", "--bandwidth-mib", "16", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, k := range []string{"prefill_tokens_per_s", "decode_tokens_per_s", "bandwidth_gb_s",
		"decode_ceiling_tokens_per_s", "decode_fraction_of_ceiling", "peak_rss_bytes", "weight_bytes_per_token"} {
		v, ok := r[k].(float64)
		if !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, r[k])
		}
	}
	if r["prompt_tokens"] != 9.0 || r["gen_tokens"] != 5.0 || r["threads"] != 2.0 {
		t.Errorf("report %v", r)
	}
}

func TestBenchText(t *testing.T) {
	out, err := run(t, "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--threads", "1",
		"--prompt-tokens", "3", "--gen-tokens", "2", "--bandwidth-mib", "8")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prefill", "decode", "bandwidth", "ceiling", "peak RSS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchErrors(t *testing.T) {
	if _, err := run(t); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no model: %v", err)
	}
	if _, err := run(t, "--model", "/nonexistent.gguf"); err == nil {
		t.Error("missing file accepted")
	}
	if _, err := run(t, "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--gen-tokens", "0"); err == nil {
		t.Error("zero tokens accepted")
	}
}

// benchBytes runs strata bench on path and returns the weight bytes it
// reports per generated token and for the whole model.
func benchBytes(t *testing.T, path string) (perToken, total int64) {
	t.Helper()
	out, err := run(t, "--model", path, "--threads", "2",
		"--prompt-tokens", "4", "--gen-tokens", "6", "--bandwidth-mib", "8", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		PerToken int64   `json:"weight_bytes_per_token"`
		Total    int64   `json:"model_weight_bytes"`
		Ceiling  float64 `json:"decode_ceiling_tokens_per_s"`
		BW       float64 `json:"bandwidth_gb_s"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if want := r.BW * 1e9 / float64(r.PerToken); r.Ceiling < want*0.999 || r.Ceiling > want*1.001 {
		t.Errorf("ceiling %v tokens/s, want bandwidth / bytes per token = %v", r.Ceiling, want)
	}
	return r.PerToken, r.Total
}

// loadWhole loads every layer of the model in path.
func loadWhole(t *testing.T, path string) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cfg, err := model.ConfigOf(f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f, 0, cfg.Layers)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func matrixBytes(ws ...tensor.Matrix) int64 {
	var n int64
	for _, w := range ws {
		n += int64(len(w.Data))
	}
	return n
}

// A dense model reads every matrix once per generated token (and one
// embedding row): bench's figure is exactly that.
func TestBenchBytesDense(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	m := loadWhole(t, path)
	want := matrixBytes(m.Output) + int64(m.Embed.RowBytes())
	for _, l := range m.Blocks {
		want += matrixBytes(l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down)
	}
	if got, total := benchBytes(t, path); got != want || total < want {
		t.Errorf("%d weight bytes per token (of %d), want %d", got, total, want)
	}
}

// A mixture-of-experts model reads its active bytes per token: the
// attention, the router and ExpertsUsed of Experts experts per layer,
// not the whole layer.
func TestBenchBytesMoE(t *testing.T) {
	path := filepath.Join(t.TempDir(), "moe.gguf")
	shape, err := model.LookupShape("qwen3moe-tiny")
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteFile(path, shape, synth.Options{Type: tensor.Q8_0, Seed: 1, Layers: 2}); err != nil {
		t.Fatalf("synth: %v", err)
	}
	m := loadWhole(t, path)
	want := matrixBytes(m.Output) + int64(m.Embed.RowBytes())
	for _, l := range m.Blocks {
		e := l.MoE.Experts[0] // every expert has the same size
		want += matrixBytes(l.Q, l.K, l.V, l.O, l.MoE.Router) + int64(m.ExpertsUsed)*matrixBytes(e.Gate, e.Up, e.Down)
	}
	got, total := benchBytes(t, path)
	if got != want {
		t.Errorf("%d weight bytes per token, want %d (the active bytes)", got, want)
	}
	e := m.Blocks[0].MoE.Experts[0]
	if unused := int64(m.Layers*(m.Experts-m.ExpertsUsed)) * matrixBytes(e.Gate, e.Up, e.Down); total < got+unused {
		t.Errorf("model of %d weight bytes, less than the %d read per token and the %d of unused experts", total, got, unused)
	}
}

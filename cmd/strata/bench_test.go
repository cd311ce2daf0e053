package main

import (
	"encoding/json"
	"strings"
	"testing"

	"strata/internal/testdata"
)

func TestBenchJSON(t *testing.T) {
	out, err := run(t, "bench", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--threads", "2",
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
	out, err := run(t, "bench", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--threads", "1",
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
	if _, err := run(t, "bench"); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no model: %v", err)
	}
	if _, err := run(t, "bench", "--model", "/nonexistent.gguf"); err == nil {
		t.Error("missing file accepted")
	}
	if _, err := run(t, "bench", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--gen-tokens", "0"); err == nil {
		t.Error("zero tokens accepted")
	}
}

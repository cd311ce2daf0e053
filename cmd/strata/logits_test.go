package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"strata/internal/llamacpp"
	"strata/internal/testdata"
)

// `strata logits --json` prints the oracle script's shape, and on
// stories260K its numbers are llama.cpp's, one position at a time and in
// prefill batches.
func TestLogitsMatchesOracle(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	ids := []int{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315}
	ref, err := llamacpp.RunLogits(context.Background(), path, ids, 4, llamacpp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []string{"1", "5"} {
		out, err := run(t, "logits", "--model", path, "--ids", "1 403,407 261 378 432 383 286 261 376 298 315", "--top", "4", "--batch", batch, "--kv-type", "f32", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var got llamacpp.Logits
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(got.Positions) != len(ids) || len(got.Positions[0].Top) != 4 || got.Positions[0].Argmax != 403 {
			t.Fatalf("batch %s: %s", batch, out)
		}
		if d := llamacpp.Compare(&got, ref); len(d.ArgmaxMismatch) > 0 || d.Missing > 0 || d.MaxRel > 1e-5 {
			t.Errorf("batch %s: %v", batch, d)
		}
	}
	out, err := run(t, "logits", "--model", path, "--ids", "1 403", "--top", "2")
	if err != nil || !strings.Contains(out, "id 1      ->  403:") {
		t.Errorf("plain output: %v\n%s", err, out)
	}
	for _, bad := range [][]string{{"--ids", "1 x"}, {"--ids", ""}, {"--ids", "1 99999"}, {"--ids", "1", "--top", "0"}} {
		if _, err := run(t, append([]string{"logits", "--model", path}, bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

package bench

import (
	"strings"
	"testing"

	"strata/internal/testdata"
)

// bench tp runs a 3-member uneven group on stories260K and reports that
// its greedy tokens are one node's (llama2.c's published sample starts
// the same way, see runtime/model's tests).
func TestBenchTP(t *testing.T) {
	out, err := run(t, "tp", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--members", "3", "--weights", "3,2,1",
		"--gen-tokens", "32", "--prompt-tokens", "1", "--rounds", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"member 2: KV heads [3,4)", "TP 3 members × 1 thread(s)", "greedy tokens: the group's 32 equal one node's",
		"in all-reduce per token, mean of members", "waiting for the last member to arrive", "(11 all-reduces; exchange p50"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, "tp", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--transport", "tcp",
		"--gen-tokens", "32", "--prompt-tokens", "1", "--rounds", "1")
	if err != nil || !strings.Contains(out, "all-reduce over tcp") || !strings.Contains(out, "the group's 32 equal one node's") {
		t.Errorf("over loopback TCP: %v\n%s", err, out)
	}
	for _, tr := range []string{"libp2p", "shm"} {
		out, err = run(t, "tp", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--members", "3", "--transport", tr,
			"--gen-tokens", "32", "--prompt-tokens", "1", "--rounds", "1")
		if err != nil || !strings.Contains(out, "all-reduce over "+tr+" (f32 on the wire)") || !strings.Contains(out, "the group's 32 equal one node's") {
			t.Errorf("over %s: %v\n%s", tr, err, out)
		}
	}
	for _, bad := range [][]string{
		{"tp", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--wire", "f16"}, // chan has no wire
		{"tp", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--transport", "libp2p", "--wire", "f8"},
		{"tp", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--transport", "pigeon"},
		{"tp"},
		{"tp", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--members", "2", "--weights", "1"},
		{"tp", "--model", testdata.Path(t, "gguf/stories260K.gguf"), "--members", "0"},
	} {
		if _, err := run(t, bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

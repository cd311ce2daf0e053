//go:build e2e

package main

import (
	"os/exec"
	"strings"
	"testing"

	"strata/internal/testdata"
)

// bench tp --procs runs every member as a process of its own (bench tp
// member), over shared memory and over libp2p streams, uneven and even,
// and its greedy tokens are one node's.
func TestE2EBenchTPProcs(t *testing.T) {
	bin := buildBinary(t)
	model := testdata.Path(t, "gguf/stories260K.gguf")
	for _, tc := range [][]string{
		{"--transport", "shm", "--members", "2"},
		{"--transport", "libp2p", "--members", "3", "--weights", "3,2,1"},
		{"--transport", "shm", "--members", "2", "--wire", "f16"},
	} {
		args := append([]string{"bench", "tp", "--procs", "--model", model, "--gen-tokens", "32", "--prompt-tokens", "1", "--rounds", "1"}, tc...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc, err, out)
		}
		for _, want := range []string{"member processes × 1 thread(s), all-reduce over " + tc[1], "waiting for the last member to arrive", "exchange p50"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%v: output lacks %q:\n%s", tc, want, out)
			}
		}
		if tc[len(tc)-1] != "f16" && !strings.Contains(string(out), "the group's 32 equal one node's") {
			t.Errorf("%v: the group's tokens are not one node's:\n%s", tc, out)
		}
	}
	if out, err := exec.Command(bin, "bench", "tp", "--procs", "--model", model, "--transport", "tcp").CombinedOutput(); err == nil {
		t.Errorf("--procs over raw tcp: no error\n%s", out)
	}
}

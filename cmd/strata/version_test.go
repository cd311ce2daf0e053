package main

import (
	"encoding/json"
	"strings"
	"testing"

	"strata/peers"
)

func TestVersionCommand(t *testing.T) {
	out, err := run(t, "version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if v.Version != version || v.Protocol != peers.Protocol || v.ProtocolMin != peers.MinProtocol || v.Platform == "" || v.Kernels == "" {
		t.Errorf("version --json: %+v", v)
	}
	out, err = run(t, "version")
	if err != nil || !strings.HasPrefix(out, "strata "+version+" (protocol ") {
		t.Errorf("version: %q, %v", out, err)
	}
}

//go:build e2e

package model_test

import "testing"

// TestE2EOracleRopeFreqsLong compares positions 8192..8299 of a
// llama3-tiny (rope_freqs factors, base 500000) with llama.cpp. llama.cpp
// takes about 30 s for the 8300 positions (it returns logits for all of
// them), so the test runs in make test's second pass (-tags e2e, without
// the race detector). Measured: max relative difference 7.0e-5, every
// argmax equal.
func TestE2EOracleRopeFreqsLong(t *testing.T) { oracleRope(t, 8300, 8192) }

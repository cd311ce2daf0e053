// Package oracle gives the tests of strata's actors their references:
// the test models, and the one-node engine's answer to a request, which
// every distributed run must equal token for token.
package oracle

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"strata/internal/testdata"
	"strata/runtime/catalog"
	"strata/runtime/engine"
	"strata/runtime/model"
	"strata/runtime/synth"
	"strata/runtime/tensor"
)

// Stories finds stories260K in the shared test data.
func Stories(t testing.TB) catalog.Files {
	return catalog.Files{"stories260K": testdata.Path(t, "gguf/stories260K.gguf")}
}

// TinyllamaQ8 is the same file `strata synth --shape tinyllama-1.1b
// --type Q8_0 --seed 1` writes (1.2 GB, written once and cached in the
// temp directory; the cmd/strata e2e tests share it).
func TinyllamaQ8(t testing.TB) string {
	t.Helper()
	path := filepath.Join(os.TempDir(), "strata-e2e-tinyllama-1.1b-q8_0-seed1.gguf")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := synth.WriteFile(path, model.Shapes["tinyllama-1.1b"], synth.Options{Type: tensor.Q8_0, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

// OneNode is req's answer on the one-node engine (a 512-position
// context, an f16 KV cache: the defaults distributed runs use).
func OneNode(t testing.TB, path string, req engine.Request) engine.Result {
	return run(t, path, engine.Options{Context: 512}, req)
}

// OneNodeF32 is OneNode with an f32 KV cache, as tensor-parallel tests
// use (the cache's rounding is part of the output).
func OneNodeF32(t testing.TB, path string, req engine.Request) engine.Result {
	return run(t, path, engine.Options{Context: 512, KVType: model.KVF32}, req)
}

func run(t testing.TB, path string, opts engine.Options, req engine.Request) engine.Result {
	t.Helper()
	e, err := engine.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Generate(context.Background(), req, func(engine.Token) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

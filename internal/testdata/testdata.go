// Package testdata locates the test files that came from outside the
// project: real tiny models and llama.cpp's tokenizer vectors, kept in
// ../shared/testdata next to the repository (see its SOURCES.md) and never
// copied into it. STRATA_TESTDATA overrides the location.
package testdata

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// Env is the environment variable that overrides the test data directory.
const Env = "STRATA_TESTDATA"

// Dir returns the shared test data directory, or an error saying where it
// looked. Tests must fail (not skip) on that error: a missing directory
// is a broken setup, not a reason to pass.
func Dir() (string, error) {
	if d := os.Getenv(Env); d != "" {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", errors.New("testdata: " + Env + "=" + d + " is not a directory")
		}
		return d, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testdata: cannot locate the source tree; set " + Env)
	}
	// file is REPO/internal/testdata/testdata.go; shared lives beside REPO.
	repo := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	d := filepath.Join(filepath.Dir(repo), "shared", "testdata")
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		return "", errors.New("testdata: " + d + " not found; put the shared test data there or set " + Env)
	}
	return d, nil
}

// TB is the part of testing.TB that Path needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Path returns the path of a file under the test data directory, failing
// the test when the directory or the file is missing.
func Path(t TB, rel string) string {
	t.Helper()
	d, err := Dir()
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := filepath.Join(d, filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("test data file missing: %v", err)
	}
	return p
}

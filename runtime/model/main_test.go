package model

import (
	"os"
	"testing"
)

// TestMain makes attention and SwiGLU with a pool split their work
// however small, so the tests' small models check the workers' path
// (production runs small work on the caller, which the nil pool checks).
func TestMain(m *testing.M) {
	attnSplitWork, swigluSplit = 0, 0
	os.Exit(m.Run())
}

package tensor

import (
	"os"
	"testing"
)

// TestMain makes every matrix product with a pool split its rows, small
// ones included, so the tests' small matrices check the workers' path
// (production runs those below splitWork on the caller, which the nil
// pool checks).
func TestMain(m *testing.M) {
	splitWork = 0
	os.Exit(m.Run())
}

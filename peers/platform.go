package peers

import (
	"runtime"
	"sync"
)

// platform is what a node announces about its system: GOOS/GOARCH and the
// operating system's build (osBuild), so strata doctor can point out
// members whose systems differ.
var platform = sync.OnceValue(func() string {
	p := runtime.GOOS + "/" + runtime.GOARCH
	if b := osBuild(); b != "" {
		p += " " + b
	}
	return p
})

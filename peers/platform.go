package peers

import (
	"runtime"
	"sync"

	"strata/peers/verbs"
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

// bootID and rdmaAvailable are read once: they do not change while the
// node runs.
var (
	bootID        = sync.OnceValue(verbs.BootID)
	rdmaAvailable = sync.OnceValue(verbs.RDMAAvailable)
)

//go:build darwin && applerdma

package verbs

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The Apple RDMA backend (build tag applerdma, macOS). Apple's RDMA over
// Thunderbolt (macOS 26.2+, after `rdma_ctl enable`) ships librdma.dylib
// with an ibverbs-style API. It is loaded at run time, without cgo
// (purego's dlopen and calls), so the binary is built by a plain
// GOOS=darwin cross-compile, starts on Macs without the library, and `go
// vet` checks this file on any host.
//
// What is written: loading librdma.dylib and counting its devices. What is
// not: the queue-pair calls. ibverbs' post and poll calls are inline
// functions in its header that jump through the device context's table of
// operations, not symbols a dlsym can find, so they need that table's
// layout in Apple's library, which only a Mac can tell. It has never run
// on a Mac.
type appleBackend struct{}

func init() { rdmaBackend = appleBackend{} }

var apple struct {
	once       sync.Once
	err        error
	getDevices func(n *int32) unsafe.Pointer
	freeDevs   func(list unsafe.Pointer)
}

func appleLoad() error {
	apple.once.Do(func() {
		lib, err := purego.Dlopen("librdma.dylib", purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			apple.err = errors.New("librdma.dylib not loadable: " + err.Error() + " (macOS 26.2+, rdma_ctl enable)")
			return
		}
		for _, name := range []string{"ibv_get_device_list", "ibv_free_device_list"} {
			if _, err := purego.Dlsym(lib, name); err != nil {
				apple.err = errors.New("librdma.dylib lacks " + name)
				return
			}
		}
		purego.RegisterLibFunc(&apple.getDevices, lib, "ibv_get_device_list")
		purego.RegisterLibFunc(&apple.freeDevs, lib, "ibv_free_device_list")
	})
	return apple.err
}

func (appleBackend) available() error {
	if err := appleLoad(); err != nil {
		return err
	}
	var n int32
	if l := apple.getDevices(&n); l != nil {
		apple.freeDevs(l)
	}
	if n <= 0 {
		return errors.New("no RDMA device (Thunderbolt 5 link with rdma_ctl enable)")
	}
	return nil
}

func (appleBackend) open(Caps) (RDMAConn, error) {
	return nil, errors.New("verbs: the Apple RDMA queue pair is not written yet (librdma.dylib loads and lists devices only)")
}

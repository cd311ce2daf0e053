//go:build applerdma && cgo

package verbs

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// Apple's RDMA over Thunderbolt (macOS 26.2+, after `rdma_ctl enable`)
// ships librdma.dylib with an ibverbs-style API. It is loaded at run time,
// so the binary starts on Macs without it.
static void *apple_lib;
static const char *apple_err;

static int apple_load(void) {
	if (apple_lib) return 0;
	apple_lib = dlopen("librdma.dylib", RTLD_NOW | RTLD_LOCAL);
	if (!apple_lib) { apple_err = dlerror(); return -1; }
	return 0;
}

typedef void **(*get_device_list_fn)(int *);
typedef void (*free_device_list_fn)(void **);

static int apple_device_count(void) {
	get_device_list_fn get = (get_device_list_fn)dlsym(apple_lib, "ibv_get_device_list");
	free_device_list_fn fr = (free_device_list_fn)dlsym(apple_lib, "ibv_free_device_list");
	if (!get || !fr) { apple_err = "librdma.dylib lacks ibv_get_device_list"; return -1; }
	int n = 0;
	void **l = get(&n);
	if (l) fr(l);
	return n;
}
*/
import "C"

import "errors"

// The Apple RDMA backend (build tag applerdma, macOS). What is written:
// loading librdma.dylib at run time and finding its devices. What is not:
// the queue-pair calls, which would resolve the same ibverbs entry points
// as rdma_shim.h through dlsym (UC queue pairs, SEND/RECV, 4 KiB frames,
// at most 32 work requests: AppleCaps). It has never been compiled for or
// run on a Mac.
type appleBackend struct{}

func init() { rdmaBackend = appleBackend{} }

func (appleBackend) available() error {
	if C.apple_load() != 0 {
		return errors.New("librdma.dylib not loadable: " + C.GoString(C.apple_err) + " (macOS 26.2+, rdma_ctl enable)")
	}
	switch n := C.apple_device_count(); {
	case n < 0:
		return errors.New(C.GoString(C.apple_err))
	case n == 0:
		return errors.New("no RDMA device (Thunderbolt 5 link with rdma_ctl enable)")
	}
	return nil
}

func (appleBackend) open(Caps) (RDMAConn, error) {
	return nil, errors.New("verbs: the Apple RDMA queue pair is not written yet (librdma.dylib loads and lists devices only)")
}

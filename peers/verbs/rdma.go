package verbs

// rdmaBackend is set by a build with an RDMA backend (build tag ibverbs on
// Linux, applerdma on macOS).
var rdmaBackend interface {
	available() error
}

// RDMAAvailable reports whether this build has an RDMA backend and the
// machine a device it can use.
func RDMAAvailable() bool { return rdmaBackend != nil && rdmaBackend.available() == nil }

// RDMAUnavailable says why RDMAAvailable is false.
func RDMAUnavailable() string {
	if rdmaBackend == nil {
		return "this build has no RDMA backend (build with -tags ibverbs on Linux, -tags applerdma on macOS)"
	}
	if err := rdmaBackend.available(); err != nil {
		return err.Error()
	}
	return ""
}

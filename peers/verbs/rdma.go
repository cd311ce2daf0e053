package verbs

import (
	"context"
	"fmt"
)

// Endpoint is what two RDMA ends exchange over the negotiation stream to
// connect their queue pairs: the queue pair's number and first packet
// sequence number, the port's LID (InfiniBand) and GID (RoCE, Thunderbolt),
// and the key and address of the receive slots' memory region. SEND/RECV
// needs no remote key; it is exchanged so that a peer whose Caps say Write
// can write into the slots one day.
type Endpoint struct {
	QPN  uint32   `json:"qpn"`
	PSN  uint32   `json:"psn"`
	LID  uint16   `json:"lid"`
	GID  [16]byte `json:"gid"`
	Port uint8    `json:"port"`
	RKey uint32   `json:"rkey"`
	Addr uint64   `json:"addr"`
}

// Validate reports an endpoint a peer could not have sent honestly.
func (e Endpoint) Validate() error {
	switch {
	case e.QPN == 0 || e.QPN >= 1<<24:
		return fmt.Errorf("verbs: queue pair number %d (want 1..2^24-1)", e.QPN)
	case e.PSN >= 1<<24:
		return fmt.Errorf("verbs: packet sequence number %d (want < 2^24)", e.PSN)
	case e.Port == 0:
		return fmt.Errorf("verbs: port 0")
	}
	return nil
}

// RDMAConn is a Conn over an RDMA queue pair, connected once both ends
// know each other's Endpoint.
type RDMAConn interface {
	Conn
	Endpoint() Endpoint
	Connect(ctx context.Context, remote Endpoint) error
}

// rdmaBackend is set by a build with an RDMA backend (build tag ibverbs on
// Linux, applerdma on macOS).
var rdmaBackend interface {
	available() error
	open(c Caps) (RDMAConn, error)
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

// OpenRDMA makes an unconnected queue pair on the first RDMA device.
func OpenRDMA(c Caps) (RDMAConn, error) {
	if !RDMAAvailable() {
		return nil, errorString(RDMAUnavailable())
	}
	return rdmaBackend.open(c)
}

type errorString string

func (e errorString) Error() string { return "verbs: " + string(e) }

package verbs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
)

// FakeRDMA is an RDMA device inside one process, for tests of the link
// negotiation on machines without one (all of ours). Its queue pairs
// report endpoints the way a device does (random QPN, PSN, memory key and
// address; a LID; the device's GID) and connect, over a loop ring, only
// when each end is given exactly the endpoint the other reported. Their
// caps say unreliable, as a UC queue pair's do.
type FakeRDMA struct {
	mu  sync.Mutex
	gid [16]byte
	qps map[uint32]*fakeQP
}

// NewFakeRDMA makes a device with a random GID.
func NewFakeRDMA() *FakeRDMA {
	d := &FakeRDMA{qps: map[uint32]*fakeQP{}}
	rand.Read(d.gid[:])
	return d
}

// Open makes an unconnected queue pair with caps c.
func (d *FakeRDMA) Open(c Caps) (RDMAConn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.Reliable, c.Write = false, false
	var b [20]byte
	rand.Read(b[:])
	d.mu.Lock()
	defer d.mu.Unlock()
	q := &fakeQP{d: d, caps: c, ep: Endpoint{
		QPN: binary.LittleEndian.Uint32(b[0:])&0xffffff | 1, PSN: binary.LittleEndian.Uint32(b[4:]) & 0xffffff,
		LID: 1, GID: d.gid, Port: 1, RKey: binary.LittleEndian.Uint32(b[8:]), Addr: binary.LittleEndian.Uint64(b[12:]),
	}}
	if d.qps[q.ep.QPN] != nil {
		return nil, fmt.Errorf("verbs: fake RDMA: queue pair number %d taken", q.ep.QPN)
	}
	d.qps[q.ep.QPN] = q
	return q, nil
}

// Connects counts queue pairs connected, for tests.
func (d *FakeRDMA) Connects() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, q := range d.qps {
		if q.Conn != nil {
			n++
		}
	}
	return n
}

type fakeQP struct {
	Conn // the loop ring's side, once connected
	d    *FakeRDMA
	caps Caps
	ep   Endpoint
	// half is this queue pair's side of a ring its peer made when it
	// connected first; remote is the QPN that peer expects.
	half   Conn
	remote uint32
}

func (q *fakeQP) Caps() Caps         { return q.caps }
func (q *fakeQP) Endpoint() Endpoint { return q.ep }

// Connect joins q to the queue pair that reported remote.
func (q *fakeQP) Connect(_ context.Context, remote Endpoint) error {
	d := q.d
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.qps[remote.QPN]
	switch {
	case q.Conn != nil:
		return fmt.Errorf("verbs: fake RDMA: queue pair %d already connected", q.ep.QPN)
	case r == nil || r == q || r.ep != remote:
		return fmt.Errorf("verbs: fake RDMA: no queue pair has endpoint %+v", remote)
	case r.caps != q.caps:
		return fmt.Errorf("verbs: fake RDMA: caps %+v and %+v differ", q.caps, r.caps)
	}
	if q.half != nil {
		if q.remote != remote.QPN {
			return fmt.Errorf("verbs: fake RDMA: queue pair %d connected to %d, not %d", q.ep.QPN, q.remote, remote.QPN)
		}
		q.Conn, q.half = q.half, nil
		return nil
	}
	a, b, err := Loop(q.caps)
	if err != nil {
		return err
	}
	q.Conn = a
	r.half, r.remote = b, q.ep.QPN
	return nil
}

func (q *fakeQP) Close() error {
	q.d.mu.Lock()
	delete(q.d.qps, q.ep.QPN)
	q.d.mu.Unlock()
	if q.Conn == nil {
		return nil
	}
	return q.Conn.Close()
}

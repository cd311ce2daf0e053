//go:build ibverbs && cgo && linux

package verbs

/*
#cgo linux LDFLAGS: -libverbs
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "rdma_shim.h"
*/
import "C"

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// The RDMA backend: an unreliable-connected queue pair, SEND/RECV only,
// the semantics Apple's RDMA over Thunderbolt offers (and any Linux
// rdma-core device). It has been compiled, never run: the machines it was
// written on have no RDMA device.
//
// Credits: a send on a UC queue pair with no receive posted on the other
// side vanishes, so the receiver returns credits explicitly, with a
// zero-length SEND carrying the count as immediate data whenever it posts
// slots again; each side keeps creditSlots of its receive slots for them.

const creditSlots = 4

type ibBackend struct{}

func init() { rdmaBackend = ibBackend{} }

func (ibBackend) available() error {
	if C.shim_load() != 0 {
		return errors.New("no RDMA library (" + C.GoString(C.shim_error()) + ")")
	}
	if C.shim_device_count() == 0 {
		return errors.New("no RDMA device")
	}
	return nil
}

func (ibBackend) open(c Caps) (RDMAConn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.Reliable = false
	slots := c.Depth + creditSlots
	q := &ibConn{caps: c, posted: make([]uint64, slots), isPosted: make([]bool, slots), credits: 0}
	q.h = C.shim_open(C.int(slots), C.int(c.FrameBytes))
	if q.h == nil {
		return nil, fmt.Errorf("verbs: open RDMA queue pair: %s", C.GoString(C.shim_error()))
	}
	var psn [4]byte
	rand.Read(psn[:])
	q.local = Endpoint{QPN: uint32(C.shim_qpn(q.h)), PSN: binary.LittleEndian.Uint32(psn[:]) & 0xffffff,
		LID: uint16(C.shim_lid(q.h)), Port: 1, RKey: uint32(C.shim_rkey(q.h)), Addr: uint64(C.shim_addr(q.h))}
	C.shim_gid(q.h, (*C.uint8_t)(unsafe.Pointer(&q.local.GID[0])))
	// The credit slots are posted by the Conn itself, now.
	for i := c.Depth; i < slots; i++ {
		if C.shim_post_recv(q.h, C.int(i)) != 0 {
			q.Close()
			return nil, fmt.Errorf("verbs: post receive: %s", C.GoString(C.shim_error()))
		}
		q.isPosted[i] = true
	}
	return q, nil
}

type ibConn struct {
	h        *C.shim_qp
	caps     Caps
	local    Endpoint
	posted   []uint64
	isPosted []bool
	credits  int // receives the peer has posted that we may fill
	owed     int // slots we posted again and have not told the peer of
	sends    int // sends outstanding
	closed   bool
}

func (q *ibConn) Caps() Caps         { return q.caps }
func (q *ibConn) Endpoint() Endpoint { return q.local }

func (q *ibConn) Connect(_ context.Context, r Endpoint) error {
	if C.shim_connect(q.h, C.uint32_t(r.QPN), C.uint32_t(r.PSN), C.uint32_t(q.local.PSN), C.uint16_t(r.LID),
		(*C.uint8_t)(unsafe.Pointer(&r.GID[0]))) != 0 {
		return fmt.Errorf("verbs: connect queue pair: %s", C.GoString(C.shim_error()))
	}
	return nil
}

func (q *ibConn) Register(size int) (*Region, error) {
	mr := C.shim_reg(q.h, C.size_t(size))
	if mr == nil {
		return nil, fmt.Errorf("verbs: register %d bytes: %s", size, C.GoString(C.shim_error()))
	}
	return &Region{Buf: unsafe.Slice((*byte)(C.shim_mr_addr(mr)), size), h: mr}, nil
}

func (q *ibConn) PostSend(wr uint64, r *Region, off, n int) error {
	if q.closed {
		return ErrClosed
	}
	if err := checkSend(q.caps, r, off, n); err != nil {
		return err
	}
	if q.sends >= q.caps.Depth {
		return ErrQueueFull
	}
	if q.credits == 0 {
		return ErrNoCredit
	}
	mr, _ := r.h.(*C.shim_mr)
	if C.shim_post_send(q.h, mr, C.size_t(off), C.int(n), C.uint64_t(wr)) != 0 {
		return fmt.Errorf("verbs: post send: %s", C.GoString(C.shim_error()))
	}
	q.credits--
	q.sends++
	return nil
}

func (q *ibConn) PostRecv(wr uint64, slot int) error {
	if q.closed {
		return ErrClosed
	}
	if slot < 0 || slot >= q.caps.Depth || q.isPosted[slot] {
		return fmt.Errorf("verbs: post receive slot %d: out of range or already posted", slot)
	}
	if C.shim_post_recv(q.h, C.int(slot)) != 0 {
		return fmt.Errorf("verbs: post receive: %s", C.GoString(C.shim_error()))
	}
	q.posted[slot], q.isPosted[slot] = wr, true
	q.owed++
	// Tell the peer in batches (a credit message costs a send).
	if q.owed >= q.caps.Depth/4 || q.owed >= 1 && q.caps.Depth < 8 {
		if C.shim_post_credit(q.h, C.uint32_t(q.owed)) == 0 {
			q.owed = 0
		}
	}
	return nil
}

func (q *ibConn) RecvBuf(slot int) []byte {
	fb := q.caps.FrameBytes
	return unsafe.Slice((*byte)(C.shim_slot(q.h, C.int(slot))), fb)
}

func (q *ibConn) Poll(cs []Completion) (int, error) {
	if q.closed {
		return 0, ErrClosed
	}
	k := 0
	for k < len(cs) {
		var wc C.shim_wc
		got := C.shim_poll(q.h, &wc)
		if got < 0 {
			return k, fmt.Errorf("verbs: poll: %s", C.GoString(C.shim_error()))
		}
		if got == 0 {
			break
		}
		var err error
		if wc.status != 0 {
			err = fmt.Errorf("verbs: work request failed (status %d)", int(wc.status))
		}
		switch {
		case wc.credit != 0: // our credit message went out
		case wc.recv == 0:
			q.sends--
			cs[k] = Completion{WR: uint64(wc.wr_id), Op: OpSend, Err: err}
			k++
		case int(wc.wr_id) >= q.caps.Depth: // a credit message from the peer
			q.credits += int(wc.imm)
			C.shim_post_recv(q.h, C.int(wc.wr_id))
		default:
			slot := int(wc.wr_id)
			q.isPosted[slot] = false
			cs[k] = Completion{WR: q.posted[slot], Op: OpRecv, Slot: slot, Bytes: int(wc.byte_len), Err: err}
			k++
		}
	}
	return k, nil
}

func (q *ibConn) Wait(ctx context.Context) error {
	// Completions are polled: spin briefly, then sleep in short steps.
	start := time.Now()
	for C.shim_pending(q.h) == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Since(start) > spinFor {
			time.Sleep(20 * time.Microsecond)
		}
	}
	return nil
}

func (q *ibConn) Close() error {
	if !q.closed {
		q.closed = true
		C.shim_close(q.h)
	}
	return nil
}

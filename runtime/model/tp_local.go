package model

import (
	"context"
	"fmt"

	"strata/runtime/tensor"
)

// LocalGroup returns the AllReducers of an n-member group whose members
// run in one process (goroutines exchanging their buffers over channels):
// for tests, benchmarks, and members that share a host. Member i uses
// element i and must not be shared with another goroutine. After an
// AllReduce fails (its context ended) the group is out of step: make a
// new one.
func LocalGroup(n int) []AllReducer {
	peers := make([]*localMember, n)
	for i := range peers {
		// Buffered for one message from every peer: a member may post
		// its next round before a slower peer has finished this one.
		peers[i] = &localMember{id: i, bufs: make(chan posted, n), done: make(chan struct{}, n)}
	}
	out := make([]AllReducer, n)
	for i, p := range peers {
		p.peers = peers
		out[i] = p
	}
	return out
}

type posted struct {
	from int
	buf  []float32
}

type localMember struct {
	id    int
	peers []*localMember
	bufs  chan posted   // peers' buffers for the current round
	done  chan struct{} // a peer has finished reading this member's buffer
	got   [][]float32   // scratch: the round's buffers by member
	sum   []float32     // scratch: the sum, before it replaces buf
}

// AllReduce posts buf to every peer, sums every member's buffer in member
// order into scratch, waits until every peer has read buf, and only then
// overwrites buf with the sum (a peer may still be reading it before).
func (p *localMember) AllReduce(ctx context.Context, buf []float32) error {
	n := len(p.peers)
	if n == 1 {
		return nil
	}
	if len(p.got) != n {
		p.got = make([][]float32, n)
	}
	if cap(p.sum) < len(buf) {
		p.sum = make([]float32, len(buf))
	}
	for _, q := range p.peers {
		if q != p {
			q.bufs <- posted{p.id, buf} // never blocks: room for one per peer
		}
	}
	clear(p.got)
	p.got[p.id] = buf
	for range n - 1 {
		select {
		case m := <-p.bufs:
			if len(m.buf) != len(buf) || p.got[m.from] != nil {
				return fmt.Errorf("model: all-reduce: member %d sent %d values, member %d has %d", m.from, len(m.buf), p.id, len(buf))
			}
			p.got[m.from] = m.buf
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sum := p.sum[:len(buf)]
	copy(sum, p.got[0])
	for _, b := range p.got[1:] {
		tensor.Add(sum, b)
	}
	for i, q := range p.peers {
		if i != p.id {
			q.done <- struct{}{}
		}
	}
	for range n - 1 {
		select {
		case <-p.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	copy(buf, sum)
	return nil
}

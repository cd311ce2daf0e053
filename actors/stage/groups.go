package stage

import (
	"context"
	"errors"
	"fmt"
	"strata/runtime/model"
	"sync"
)

// Groups forms the all-reduce groups of tensor-parallel stages.
type Groups interface {
	// Join forms this node's member self of group id, whose members are
	// the nodes named (in summation order). It returns once every member
	// has joined, or with ctx's error.
	Join(ctx context.Context, id [16]byte, members []string, self int) (Group, error)
}

// Group is one member's all-reduce over its group.
type Group interface {
	model.AllReducer
	// Close leaves the group: the other members' next round fails.
	Close() error
}

// LocalGroups forms groups whose members all run in this process (the
// nodes of an in-process cluster): model.LocalGroup, met by ID.
type LocalGroups struct {
	mu      sync.Mutex
	pending map[[16]byte]*localPending
}

type localPending struct {
	ars    []model.AllReducer
	joined int
	// gone ends every member's rounds when one leaves: an in-process
	// group has no link whose end would tell the others.
	gone  context.Context
	leave context.CancelFunc
}

// Join implements Groups. It does not wait for the other members: an
// in-process group's rounds do.
func (l *LocalGroups) Join(ctx context.Context, id [16]byte, members []string, self int) (Group, error) {
	if self < 0 || self >= len(members) {
		return nil, fmt.Errorf("member %d of a group of %d", self, len(members))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending = map[[16]byte]*localPending{}
	}
	p := l.pending[id]
	if p == nil {
		p = &localPending{ars: model.LocalGroup(len(members))}
		p.gone, p.leave = context.WithCancel(context.Background())
		l.pending[id] = p
	}
	if p.joined++; p.joined == len(members) {
		delete(l.pending, id)
	}
	return &localGroup{ar: p.ars[self], p: p}, nil
}

type localGroup struct {
	ar model.AllReducer
	p  *localPending
}

// AllReduce fails once any member has left the group.
func (g *localGroup) AllReduce(ctx context.Context, buf []float32) error {
	if g.p.gone.Err() != nil {
		return errors.New("a member left the group")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(g.p.gone, cancel)()
	return g.ar.AllReduce(ctx, buf)
}

// Close leaves the group: the other members' rounds fail.
func (g *localGroup) Close() error {
	g.p.leave()
	return nil
}

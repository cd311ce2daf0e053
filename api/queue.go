package api

import (
	"container/list"
	"context"
	"sync"
)

// queue admits at most active requests at once and lets at most waiting
// more wait, first come first served: a slot freed by Release goes to the
// longest waiter, never to a request that arrives later. Beyond the
// bound, Acquire fails at once with ErrQueueFull.
type queue struct {
	mu      sync.Mutex
	active  int // slots in use
	max     int // most slots
	bound   int // most waiters
	waiters list.List
	changed func(active, waiting int) // called with mu held after every change; may be nil
	closed  bool                      // the node is leaving: Acquire refuses newcomers
	drained chan struct{}             // made by close; closed once nothing runs or waits
	isIdle  bool                      // drained is closed
}

// waiter is one request in line; ready is closed when it is handed a slot.
type waiter struct {
	ready   chan struct{}
	granted bool
}

func newQueue(active, waiting int, changed func(active, waiting int)) *queue {
	return &queue{max: active, bound: waiting, changed: changed}
}

func (q *queue) notify() {
	if q.changed != nil {
		q.changed(q.active, q.waiters.Len())
	}
	if q.closed && !q.isIdle && q.active == 0 && q.waiters.Len() == 0 {
		close(q.drained)
		q.isIdle = true
	}
}

// close refuses every later Acquire (ErrLeaving); those already running
// or waiting go on. The channel it returns is closed once none is left.
func (q *queue) close() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed, q.drained = true, make(chan struct{})
		q.notify()
	}
	return q.drained
}

// Acquire waits for a slot and returns the place in line the request
// took on arrival: 0 when a slot was free, 1 when it was first to wait,
// and so on. It returns ErrQueueFull when the line is at its bound, or
// ctx.Err() when ctx ends first (the place in line is given up). Each nil
// error must be paired with one Release.
func (q *queue) Acquire(ctx context.Context) (place int, err error) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return 0, ErrLeaving
	}
	if q.active < q.max && q.waiters.Len() == 0 {
		q.active++
		q.notify()
		q.mu.Unlock()
		return 0, nil
	}
	if q.waiters.Len() >= q.bound {
		q.mu.Unlock()
		return 0, ErrQueueFull
	}
	w := &waiter{ready: make(chan struct{})}
	el := q.waiters.PushBack(w)
	place = q.waiters.Len()
	q.notify()
	q.mu.Unlock()

	select {
	case <-w.ready:
		return place, nil
	case <-ctx.Done():
		q.mu.Lock()
		defer q.mu.Unlock()
		if w.granted { // handed a slot while leaving: pass it on
			q.releaseLocked()
		} else {
			q.waiters.Remove(el)
			q.notify()
		}
		return place, ctx.Err()
	}
}

// Release frees a slot, handing it straight to the longest waiter.
func (q *queue) Release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked()
}

func (q *queue) releaseLocked() {
	if front := q.waiters.Front(); front != nil {
		w := q.waiters.Remove(front).(*waiter)
		w.granted = true
		close(w.ready)
	} else {
		q.active--
	}
	q.notify()
}

// Len returns the requests running and waiting now.
func (q *queue) Len() (active, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active, q.waiters.Len()
}

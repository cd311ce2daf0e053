package verbs

import (
	"context"
	"errors"
	"time"
)

// Fault is what the fault backend does to one frame sent.
type Fault uint8

// Faults an unreliable-connected link can show.
const (
	Deliver  Fault = iota
	Drop           // the frame vanishes (its send still completes)
	Truncate       // only the first half arrives (the rest zero on equal-size links)
	Corrupt        // one bit of the frame flips
	Reorder        // the frame arrives after the next one
	Stall          // the frame arrives StallFor later, or never
)

func (f Fault) String() string {
	return [...]string{"deliver", "drop", "truncate", "corrupt", "reorder", "stall"}[f]
}

// Faulty wraps the sending side of a Conn: plan decides the fate of the
// n-th frame sent (from 0). Receives pass through. Its Caps say
// Reliable: false.
func Faulty(inner Conn, plan func(n int) Fault) (Conn, error) {
	c := inner.Caps()
	reg, err := inner.Register((c.Depth + 2) * c.FrameBytes)
	if err != nil {
		return nil, err
	}
	f := &faulty{Conn: inner, plan: plan, scratch: reg, StallFor: time.Hour}
	for i := c.Depth + 1; i >= 0; i-- {
		f.free = append(f.free, i)
	}
	return f, nil
}

type faulty struct {
	Conn
	plan     func(int) Fault
	scratch  *Region
	free     []int
	sent     int
	local    []Completion
	cs       []Completion
	held     []heldFrame // frames to send later, in order
	StallFor time.Duration
	// Counts of what was done, for tests.
	Counts [6]int
}

type heldFrame struct {
	buf, n int
	at     time.Time // zero: after the next frame
}

func (f *faulty) Caps() Caps {
	c := f.Conn.Caps()
	c.Reliable = false
	return c
}

func (f *faulty) PostSend(wr uint64, r *Region, off, n int) error {
	c := f.Conn.Caps()
	if err := checkSend(c, r, off, n); err != nil {
		return err
	}
	if len(f.free) == 0 {
		f.recycle()
		if len(f.free) == 0 {
			return ErrQueueFull
		}
	}
	fault := f.plan(f.sent)
	if fault == Drop {
		f.sent++
		f.Counts[fault]++
		f.local = append(f.local, Completion{WR: wr, Op: OpSend})
		return nil
	}
	b := f.free[len(f.free)-1]
	fb := c.FrameBytes
	buf := f.scratch.Buf[b*fb : (b+1)*fb]
	copy(buf, r.Buf[off:off+n])
	switch fault {
	case Truncate:
		n /= 2
	case Corrupt:
		buf[(f.sent*7919)%n] ^= 1 << (f.sent % 8)
	}
	if fault == Reorder || fault == Stall {
		h := heldFrame{buf: b, n: n}
		if fault == Stall {
			h.at = time.Now().Add(f.StallFor)
		}
		f.free = f.free[:len(f.free)-1]
		f.held = append(f.held, h)
		f.sent++
		f.Counts[fault]++
		f.local = append(f.local, Completion{WR: wr, Op: OpSend})
		return nil
	}
	if err := f.post(uint64(b), b*fb, n); err != nil {
		return err
	}
	f.free = f.free[:len(f.free)-1]
	f.sent++
	f.Counts[fault]++
	f.local = append(f.local, Completion{WR: wr, Op: OpSend})
	f.release(true)
	return nil
}

// release sends held frames that are due: reordered ones once a later
// frame went (next), stalled ones once their time came.
func (f *faulty) release(next bool) {
	fb := f.Conn.Caps().FrameBytes
	kept := f.held[:0]
	for _, h := range f.held {
		due := h.at.IsZero() && next || !h.at.IsZero() && time.Now().After(h.at)
		if due && f.post(uint64(h.buf), h.buf*fb, h.n) == nil {
			continue
		}
		kept = append(kept, h)
	}
	f.held = kept
}

// post sends scratch bytes; a truncated frame breaks the equal-size rule,
// as a truncation on a real link does, so it bypasses the check where the
// inner Conn allows.
func (f *faulty) post(wr uint64, off, n int) error {
	if raw, ok := f.Conn.(interface {
		postSend(uint64, *Region, int, int) error
	}); ok {
		return raw.postSend(wr, f.scratch, off, n)
	}
	return f.Conn.PostSend(wr, f.scratch, off, n)
}

// recycle returns the scratch buffers of finished inner sends.
func (f *faulty) recycle() {
	if cap(f.cs) == 0 {
		f.cs = make([]Completion, f.Conn.Caps().Depth)
	}
	n, _ := f.Conn.Poll(f.cs)
	for _, c := range f.cs[:n] {
		if c.Op == OpSend {
			f.free = append(f.free, int(c.WR))
		} else {
			f.local = append(f.local, c)
		}
	}
}

func (f *faulty) Poll(cs []Completion) (int, error) {
	f.release(false)
	f.recycle()
	k := copy(cs, f.local)
	f.local = f.local[:copy(f.local, f.local[k:])]
	if k == 0 {
		// The inner Conn reports ErrClosed only when it has nothing.
		if _, err := f.Conn.Poll(nil); errors.Is(err, ErrClosed) {
			return 0, err
		}
	}
	return k, nil
}

func (f *faulty) Wait(ctx context.Context) error {
	if len(f.local) > 0 {
		return nil
	}
	return f.Conn.Wait(ctx)
}

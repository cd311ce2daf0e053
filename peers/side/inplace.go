package side

import (
	"errors"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"strata/peers/internal/frame"
	"strata/peers/verbs"
)

// Borrowed is a message delivered in place: its bytes fields (a
// Forward's Hidden) are the side channel's receive slot the sender wrote
// them into, not a copy. The slot is lent to the receiving actor: the
// peer cannot write into it until Release, which the actor calls once it
// has read the bytes (and must not read them after). An actor gets
// Borrowed messages only when its Inbound rule says Borrow.
type Borrowed struct {
	// Message is the message (a *messages.Forward).
	Message proto.Message
	release func()
	done    atomic.Bool
}

// Release gives the slot back; the message's aliased fields are cleared.
// It may be called more than once, from any goroutine.
func (b *Borrowed) Release() {
	if b.done.CompareAndSwap(false, true) {
		b.release()
	}
}

// InPlaceStats counts how activations that came on side channels were
// delivered: read in place from their receive slot (Borrowed), or copied
// out of it (the target does not borrow, the message is of several
// frames, or too many slots were already lent: a slow receiver).
type InPlaceStats struct {
	InPlace, Copied int64
}

// InPlace reports how this node delivered the activations its side
// channels carried.
func (s *Side) InPlace() InPlaceStats {
	return InPlaceStats{InPlace: s.inPlace.Load(), Copied: s.copied.Load()}
}

// receive delivers message seq, which the side channel's Receiver rcv
// just returned, if it is the next one: in place (its slot lent to the
// target actor) when the target borrows and fewer than half the link's
// slots are lent, else decoded into a copy. Holding half the slots back
// at most leaves the peer credits however slow the target is: the link
// then copies, and never waits on an actor.
func (in *inLink) receive(seq uint64, body []byte, rcv *verbs.Receiver, lendMax int) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if seq < in.next {
		return nil
	}
	if seq > in.next {
		return gapError(seq, in.next)
	}
	if rcv.Lent() < lendMax {
		if slot, ok := rcv.Lend(); ok {
			lent, err := in.lend(body, rcv, slot)
			if err != nil || lent {
				if err == nil {
					in.s.inPlace.Add(1)
					in.delivered()
				}
				return err
			}
			// Not taken in place: copy it below, then the slot goes back.
			defer rcv.Return(slot)
		}
	}
	env, msg, err := frame.Decode(body, in.s.b.Types())
	if err != nil {
		return err
	}
	if err := in.s.b.Deliver(in.from, env, msg); err != nil {
		return err
	}
	in.s.copied.Add(1)
	in.delivered()
	return nil
}

// lend delivers body, in slot, as a Borrowed if it is a Forward for an
// actor that borrows. lent: the slot went with it (the Borrowed returns
// it). Not lent and no error: the caller delivers a copy.
func (in *inLink) lend(body []byte, rcv *verbs.Receiver, slot int) (lent bool, err error) {
	b := in.s.b
	env, fw, ok, err := frame.DecodeForwardInPlace(body, b.Types(), in.scratch[:0])
	if err != nil || !ok || !b.Borrows(env.TargetId) {
		return false, err
	}
	bw := &Borrowed{Message: fw, release: func() {
		fw.Hidden = nil
		rcv.Return(slot)
	}}
	if err := b.DeliverBorrowed(in.from, env, fw, bw); err != nil {
		bw.Release()
		if errors.Is(err, ErrNotDelivered) {
			return true, nil // dropped quietly, like deliver would
		}
		return true, err
	}
	return true, nil
}

// ErrNotDelivered is Bridge.DeliverBorrowed's answer for a message
// admitted but not delivered (dropped quietly, or its target is gone),
// whose slot comes straight back.
var ErrNotDelivered = errors.New("peers: not delivered")

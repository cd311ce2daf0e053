package peers

import (
	"errors"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"strata/messages"
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
func (n *Node) InPlace() InPlaceStats {
	return InPlaceStats{InPlace: n.side.inPlace.Load(), Copied: n.side.copied.Load()}
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
	env, msg, err := decodeFrame(body, in.s.b.types)
	if err != nil {
		return err
	}
	if err := in.s.b.deliver(in.from, env, msg); err != nil {
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
	env, fw, ok, err := decodeForwardInPlace(body, b.types, in.scratch[:0])
	if err != nil || !ok || !b.rules.borrows(env.TargetId) {
		return false, err
	}
	bw := &Borrowed{Message: fw, release: func() {
		fw.Hidden = nil
		rcv.Return(slot)
	}}
	if err := b.deliverBorrowed(in.from, env, fw, bw); err != nil {
		bw.Release()
		if errors.Is(err, errNotBorrowed) {
			return true, nil // dropped quietly, like deliver would
		}
		return true, err
	}
	return true, nil
}

// errNotBorrowed: a message admitted but not delivered (dropped quietly,
// or its target is gone), whose slot comes straight back.
var errNotBorrowed = errors.New("peers: not delivered")

// deliverBorrowed is deliver for a Forward read in place: admitted as
// fw, handed to its (live, local) target as bw.
func (b *bridge) deliverBorrowed(from peer.ID, env *messages.Envelope, fw *messages.Forward, bw *Borrowed) error {
	if err := b.admit(from, env, fw); errors.Is(err, errDrop) {
		return errNotBorrowed
	} else if err != nil {
		return err
	}
	target := b.system.NewLocalPID(env.TargetId)
	target.RequestId = env.TargetRequestId
	ref, ok := b.system.ProcessRegistry.GetLocal(target.Id)
	if !ok {
		// Dead letters would never return the slot.
		return errNotBorrowed
	}
	sender := pidFromWire(env.Sender)
	if sender != nil && (sender.Address == "" || sender.Address == nonhost) {
		sender.Address = b.name(from)
	}
	if sender == nil && len(env.Header) == 0 {
		ref.SendUserMessage(target, bw)
		return nil
	}
	ref.SendUserMessage(target, &actor.MessageEnvelope{Header: env.Header, Message: bw, Sender: sender})
	return nil
}

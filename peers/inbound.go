package peers

import (
	"slices"
	"strings"
)

// An Inbound rule lets actors on other nodes send to local actors: every
// message from a peer must match one (its target and its type), or the
// stream it came on is closed. Lifecycle messages (Stop, PoisonPill) from
// peers are refused whatever the rules say: a peer may ask an actor for
// work, never end it. Replies to this node's futures need no rule: a
// future accepts one answer, from the peer it asked.
type Inbound struct {
	// Actor is a local actor ID ("shards"), or a prefix ending in "*"
	// ("shards/*": every child of shards; "$*": every unnamed actor).
	Actor string
	// Types are the full names of the message types it accepts
	// ("strata.Forward").
	Types []string
	// Watch lets actors on the sending peer watch it (and so hear
	// Terminated when it stops).
	Watch bool
	// Borrow: the actor takes a Forward that arrived on a side channel as
	// a *Borrowed, its Hidden read in place from the receive slot, and
	// calls Release once it has read it. Without it, it gets a
	// *messages.Forward of its own (a copy).
	Borrow bool
}

// pingInbound is always allowed: every node runs the PingActor.
var pingInbound = Inbound{Actor: PingActor, Types: []string{"strata.Ping"}}

// inboundRules is a Config.Inbound list, first match wins.
type inboundRules []Inbound

// find returns the rule for a local actor ID.
func (r inboundRules) find(id string) (Inbound, bool) {
	for _, in := range r {
		if p, ok := strings.CutSuffix(in.Actor, "*"); ok && strings.HasPrefix(id, p) || in.Actor == id {
			return in, true
		}
	}
	return Inbound{}, false
}

// allows reports whether a peer may send a message of type typ to id.
func (r inboundRules) allows(id, typ string) bool {
	in, ok := r.find(id)
	return ok && slices.Contains(in.Types, typ)
}

// borrows reports whether id takes activations in place (Inbound.Borrow).
func (r inboundRules) borrows(id string) bool {
	in, ok := r.find(id)
	return ok && in.Borrow
}

// watchable reports whether actors on a peer may watch id.
func (r inboundRules) watchable(id string) bool {
	in, ok := r.find(id)
	return ok && in.Watch
}

// futurePrefix starts the IDs protoactor gives futures (actor.NewFuture).
const futurePrefix = "future$"

func isFuture(id string) bool { return strings.HasPrefix(id, futurePrefix) }

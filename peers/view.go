package peers

import (
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"strata/messages"
)

// A View is one node's list of cluster members: sorted by peer ID (in its
// string form) and versioned. Version grows by one with every change (a
// member joined, left, or published different information) so a caller can
// tell whether anything moved since it last looked. Versions are local to a
// node: two nodes with the same members may have different versions.
type View struct {
	Version uint64
	Members []Member
}

// A Member is a node as last heard from.
type Member struct {
	ID peer.ID
	// Info is the NodeInfo the node last published; shared, do not modify.
	Info *messages.NodeInfo
	// LastSeen is when that NodeInfo arrived (local clock).
	LastSeen time.Time
}

// Member returns the member with the given ID.
func (v View) Member(id peer.ID) (Member, bool) {
	i, ok := slices.BinarySearchFunc(v.Members, id, func(m Member, id peer.ID) int {
		return strings.Compare(m.ID.String(), id.String())
	})
	if !ok {
		return Member{}, false
	}
	return v.Members[i], true
}

// IDs returns the members' peer IDs in view order.
func (v View) IDs() []peer.ID {
	ids := make([]peer.ID, len(v.Members))
	for i, m := range v.Members {
		ids[i] = m.ID
	}
	return ids
}

// EventKind says what happened to a member.
type EventKind int

// The kinds of membership events.
const (
	Joined EventKind = iota + 1
	Updated
	Left
)

func (k EventKind) String() string {
	switch k {
	case Joined:
		return "joined"
	case Updated:
		return "updated"
	case Left:
		return "left"
	}
	return "unknown"
}

// An Event is one change to a View: Version is the view's version after it.
type Event struct {
	Kind    EventKind
	Member  Member
	Version uint64
	// Reason says why a member left: "timeout" (no heartbeat within
	// Config.MemberTimeout) or "disconnected" (its last connection closed).
	Reason string
}

// stamp orders a node's heartbeats, across restarts too.
type stamp struct {
	incarnation int64
	seq         uint64
}

func (a stamp) after(b stamp) bool {
	return a.incarnation > b.incarnation || a.incarnation == b.incarnation && a.seq > b.seq
}

// tomb remembers a member that left, so a late copy of a heartbeat it sent
// before leaving (relayed by a third node) does not bring it back.
type tomb struct {
	last stamp
	at   time.Time
}

// tombLifetime outlasts GossipSub's seen-message cache (2 minutes), after
// which no stale heartbeat can be relayed any more.
const tombLifetime = 5 * time.Minute

// table is the membership state machine: no goroutines, no clock, no
// network. Membership (membership.go) feeds it heartbeats, disconnects and
// the time, and publishes the events it returns.
type table struct {
	self    peer.ID
	timeout time.Duration
	version uint64
	members map[peer.ID]*Member
	stamps  map[peer.ID]stamp
	tombs   map[peer.ID]tomb
}

func newTable(self peer.ID, timeout time.Duration) *table {
	return &table{
		self:    self,
		timeout: timeout,
		members: make(map[peer.ID]*Member),
		stamps:  make(map[peer.ID]stamp),
		tombs:   make(map[peer.ID]tomb),
	}
}

// observe takes a validated heartbeat from id. connected says whether this
// node has a direct connection to id now: a node joins the view only while
// connected (so a member dropped for a disconnect comes back once it is
// reconnected); a member's later heartbeats count either way.
func (t *table) observe(id peer.ID, info *messages.NodeInfo, now time.Time, connected bool) (Event, bool) {
	s := stamp{info.Incarnation, info.Seq}
	if m, ok := t.members[id]; ok {
		if !s.after(t.stamps[id]) {
			return Event{}, false // duplicate or out of order
		}
		t.stamps[id] = s
		m.LastSeen = now
		if sameInfo(m.Info, info) {
			m.Info = info // the clock reading is new; no event for it
			return Event{}, false
		}
		m.Info = info
		t.version++
		return Event{Kind: Updated, Member: *m, Version: t.version}, true
	}
	if !connected {
		// Only a node this one has a direct connection to counts: a
		// heartbeat relayed by gossip proves a key, not a reachable node
		// (and a peer could sign heartbeats for many made-up nodes).
		return Event{}, false
	}
	if tb, ok := t.tombs[id]; ok {
		if !s.after(tb.last) {
			return Event{}, false
		}
		delete(t.tombs, id)
	}
	m := &Member{ID: id, Info: info, LastSeen: now}
	t.members[id] = m
	t.stamps[id] = s
	t.version++
	return Event{Kind: Joined, Member: *m, Version: t.version}, true
}

// sameInfo compares two heartbeats ignoring the sequence number and the
// clock reading, which change with every one.
func sameInfo(a, b *messages.NodeInfo) bool {
	if a.Seq == b.Seq && a.ClockUnixNano == b.ClockUnixNano {
		return proto.Equal(a, b)
	}
	b2 := proto.Clone(b).(*messages.NodeInfo)
	b2.Seq, b2.ClockUnixNano = a.Seq, a.ClockUnixNano
	return proto.Equal(a, b2)
}

// remove drops id (not self) for reason.
func (t *table) remove(id peer.ID, reason string, now time.Time) (Event, bool) {
	m, ok := t.members[id]
	if !ok || id == t.self {
		return Event{}, false
	}
	delete(t.members, id)
	t.tombs[id] = tomb{last: t.stamps[id], at: now}
	delete(t.stamps, id)
	t.version++
	return Event{Kind: Left, Member: *m, Version: t.version, Reason: reason}, true
}

// expire drops every member (but self) not heard from within the timeout.
func (t *table) expire(now time.Time) []Event {
	var evs []Event
	for _, id := range t.sortedIDs() {
		if m := t.members[id]; id != t.self && now.Sub(m.LastSeen) >= t.timeout {
			ev, _ := t.remove(id, "timeout", now)
			evs = append(evs, ev)
		}
	}
	for id, tb := range t.tombs {
		if now.Sub(tb.at) > tombLifetime {
			delete(t.tombs, id)
		}
	}
	return evs
}

func (t *table) sortedIDs() []peer.ID {
	ids := make([]peer.ID, 0, len(t.members))
	for id := range t.members {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b peer.ID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

func (t *table) view() View {
	v := View{Version: t.version, Members: make([]Member, 0, len(t.members))}
	for _, id := range t.sortedIDs() {
		v.Members = append(v.Members, *t.members[id])
	}
	return v
}

package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/proto"

	"strata/messages"
)

// MembersTopic is the GossipSub topic every node publishes its NodeInfo on.
const MembersTopic = "/strata/members/1.0.0"

// Limits on a NodeInfo from a peer; a larger or malformed one is dropped.
const (
	maxInfoBytes  = 256 << 10
	maxInfoAddrs  = 64
	maxInfoModels = 4096
	maxInfoShards = 4096
	maxInfoLayers = 1 << 16
	maxInfoString = 1024
	maxFindings   = 64
	maxFetches    = 16
	// maxInfoMemory (1 PiB) and maxInfoFlops (1 EFLOP/s) are far above any
	// machine; a claim beyond is a lie, which would draw every layer of a
	// plan to that node, or overflow the sums of memory.
	maxInfoMemory = 1 << 50
	maxInfoFlops  = 1e18
)

// ErrBadInfo is the reason a NodeInfo from a peer is dropped.
var ErrBadInfo = errors.New("peers: invalid NodeInfo")

// validateInfo checks a NodeInfo that arrived signed by from.
func validateInfo(info *messages.NodeInfo, from peer.ID) error {
	switch {
	case info.PeerId != from.String():
		return fmt.Errorf("%w: peer_id %.64q is not the signer %s", ErrBadInfo, info.PeerId, from)
	case info.Seq == 0:
		return fmt.Errorf("%w: seq 0", ErrBadInfo)
	case len(info.Addrs) > maxInfoAddrs, len(info.Models) > maxInfoModels, len(info.Shards) > maxInfoShards:
		return fmt.Errorf("%w: too many addrs, models or shards", ErrBadInfo)
	case len(info.Version) > maxInfoString:
		return fmt.Errorf("%w: version too long", ErrBadInfo)
	case info.MemoryAvailableBytes > info.MemoryTotalBytes:
		return fmt.Errorf("%w: memory available %d above total %d", ErrBadInfo, info.MemoryAvailableBytes, info.MemoryTotalBytes)
	case info.MemoryTotalBytes > maxInfoMemory:
		return fmt.Errorf("%w: memory %d bytes above the %d cap", ErrBadInfo, info.MemoryTotalBytes, uint64(maxInfoMemory))
	case !(info.ComputeFlops >= 0 && info.ComputeFlops <= maxInfoFlops): // NaN too
		return fmt.Errorf("%w: compute rate %v", ErrBadInfo, info.ComputeFlops)
	}
	if err := validateMeasures(info); err != nil {
		return err
	}
	for _, a := range info.Addrs {
		if len(a) > maxInfoString {
			return fmt.Errorf("%w: address too long", ErrBadInfo)
		}
		if _, err := ma.NewMultiaddr(a); err != nil {
			return fmt.Errorf("%w: address %.64q: %v", ErrBadInfo, a, err)
		}
	}
	for _, m := range info.Models {
		if m.Name == "" || len(m.Name) > maxInfoString || len(m.Digest) > maxInfoString {
			return fmt.Errorf("%w: model name or digest", ErrBadInfo)
		}
		if len(m.Layers) > maxInfoLayers {
			return fmt.Errorf("%w: %d layers of model %.64q", ErrBadInfo, len(m.Layers), m.Name)
		}
		for _, l := range m.Layers {
			if l >= maxInfoLayers {
				return fmt.Errorf("%w: layer %d of model %.64q", ErrBadInfo, l, m.Name)
			}
		}
	}
	for _, s := range info.Shards {
		if len(s) > maxInfoString {
			return fmt.Errorf("%w: shard too long", ErrBadInfo)
		}
	}
	if len(info.Platform) > maxInfoString || len(info.BootId) > maxInfoString || len(info.Device) > maxInfoString || len(info.Findings) > maxFindings {
		return fmt.Errorf("%w: platform, boot ID or device too long, or too many findings", ErrBadInfo)
	}
	for _, f := range info.Findings {
		if len(f) > maxInfoString {
			return fmt.Errorf("%w: finding too long", ErrBadInfo)
		}
	}
	if len(info.Fetching) > maxFetches {
		return fmt.Errorf("%w: %d fetches", ErrBadInfo, len(info.Fetching))
	}
	for _, f := range info.Fetching {
		if len(f.Model) > maxInfoString || f.DoneBytes > f.TotalBytes || f.TotalBytes > maxInfoMemory {
			return fmt.Errorf("%w: fetch progress", ErrBadInfo)
		}
	}
	// Links and measurements: validateMeasures (announce.go).
	return nil
}

// Membership is a node's view of the cluster: it publishes the node's
// NodeInfo every heartbeat, collects everyone else's, and drops a member
// whose last connection closed or that missed its heartbeats for
// Config.MemberTimeout. The state machine is table (view.go); this is its
// goroutine shell. Methods are safe for concurrent use.
type Membership struct {
	node  *Node
	topic *pubsub.Topic
	log   *slog.Logger

	mu      sync.Mutex
	t       *table
	changed chan struct{} // closed and replaced on every change
	subs    map[*Subscription]struct{}
	shards  []string
	paused  bool // test hook: stop publishing heartbeats
	leaving bool
	refused map[peer.ID]Refusal
	seq     uint64
	inc     int64

	publishNow chan struct{}
}

func newMembership(n *Node, topic *pubsub.Topic) *Membership {
	return &Membership{
		node: n, topic: topic, log: n.log,
		t:          newTable(n.host.ID(), n.cfg.MemberTimeout),
		changed:    make(chan struct{}),
		subs:       make(map[*Subscription]struct{}),
		refused:    make(map[peer.ID]Refusal),
		inc:        time.Now().UnixNano(),
		publishNow: make(chan struct{}, 1),
	}
}

// View returns the current view.
func (m *Membership) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.view()
}

// Wait blocks until ok(view) holds and returns that view, or returns ctx's
// error.
func (m *Membership) Wait(ctx context.Context, ok func(View) bool) (View, error) {
	for {
		m.mu.Lock()
		v, ch := m.t.view(), m.changed
		m.mu.Unlock()
		if ok(v) {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}

// SetShards sets the free-form list of shards this node announces from the
// next heartbeat on (published at once).
func (m *Membership) SetShards(shards []string) {
	m.mu.Lock()
	m.shards = append([]string(nil), shards...)
	m.mu.Unlock()
	m.poke()
}

// SetLeaving announces (from the next heartbeat, published at once) that
// this node is leaving the cluster: plans leave it out.
func (m *Membership) SetLeaving(leaving bool) {
	m.mu.Lock()
	m.leaving = leaving
	m.mu.Unlock()
	m.poke()
}

// Refused lists the nodes heard from in the last refusalMemory that are
// kept out of the view for an incompatible protocol, by peer ID.
func (m *Membership) Refused() []Refusal {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	var out []Refusal
	for id, r := range m.refused {
		if now.Sub(r.At) > refusalMemory {
			delete(m.refused, id)
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Refusal) int { return strings.Compare(a.ID.String(), b.ID.String()) })
	return out
}

// refusalMemory is how long a refused node stays listed after its last
// heartbeat.
const refusalMemory = 30 * time.Second

// protocols is the range this node speaks.
func (m *Membership) protocols() ProtocolRange {
	if r := m.node.cfg.Protocols; r.Max != 0 {
		return r
	}
	return OurProtocols
}

// refuse keeps a node with an incompatible protocol out of the view: it
// is dropped if it was a member (a restart with another build), listed
// in Refused, and logged the first time.
func (m *Membership) refuse(from peer.ID, info *messages.NodeInfo, theirs ProtocolRange) {
	ours := m.protocols()
	r := Refusal{ID: from, Version: info.Version, Protocols: theirs, At: time.Now(),
		Reason: refusalReason(ours, m.node.cfg.Version, theirs, info.Version)}
	m.mu.Lock()
	old, seen := m.refused[from]
	m.refused[from] = r
	ev, left := m.t.remove(from, "incompatible protocol", r.At)
	if left {
		m.emit(ev)
	}
	m.mu.Unlock()
	if left {
		m.afterLeave([]Event{ev})
	}
	if !seen || old.Protocols != theirs {
		m.log.Warn("peers: member refused", "peer", from, "reason", r.Reason)
	}
}

func (m *Membership) poke() {
	select {
	case m.publishNow <- struct{}{}:
	default:
	}
}

// A Subscription receives membership events in order. It starts with a
// Joined event for every member of the view at the time of Subscribe.
type Subscription struct {
	m      *Membership
	mu     sync.Mutex
	queue  []Event
	notify chan struct{}
	closed bool
}

// Subscribe returns a subscription to membership events. Events queue
// without bound until Next takes them; Close it when done.
func (m *Membership) Subscribe() *Subscription {
	s := &Subscription{m: m, notify: make(chan struct{}, 1)}
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.t.view()
	for _, mem := range v.Members {
		s.queue = append(s.queue, Event{Kind: Joined, Member: mem, Version: v.Version})
	}
	if len(s.queue) > 0 {
		s.notify <- struct{}{}
	}
	m.subs[s] = struct{}{}
	return s
}

// Next returns the next event, waiting for one until ctx is done.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return ev, nil
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return Event{}, ErrClosed
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Close ends the subscription; Next then returns ErrClosed.
func (s *Subscription) Close() {
	s.m.mu.Lock()
	delete(s.m.subs, s)
	s.m.mu.Unlock()
	s.push(nil)
}

func (s *Subscription) push(evs []Event) {
	s.mu.Lock()
	if evs == nil {
		s.closed = true
	}
	s.queue = append(s.queue, evs...)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// apply publishes events (m.mu held) and acts on members leaving.
func (m *Membership) emit(evs ...Event) {
	if len(evs) == 0 {
		return
	}
	close(m.changed)
	m.changed = make(chan struct{})
	for s := range m.subs {
		s.push(evs)
	}
}

func (m *Membership) afterLeave(evs []Event) {
	for _, ev := range evs {
		if ev.Kind == Left {
			m.log.Info("peers: member left", "peer", ev.Member.ID, "reason", ev.Reason)
			m.node.bridge.peerDown(ev.Member.ID)
		} else if ev.Kind == Joined {
			m.log.Info("peers: member joined", "peer", ev.Member.ID, "addrs", ev.Member.Info.Addrs)
		}
	}
}

// observe takes a heartbeat (already validated).
func (m *Membership) observe(from peer.ID, info *messages.NodeInfo) {
	if theirs := announcedRange(info.ProtocolMin, info.Protocol); !Compatible(m.protocols(), theirs) {
		m.refuse(from, info, theirs)
		return
	}
	connected := from == m.node.host.ID() || m.node.host.Network().Connectedness(from) == network.Connected
	m.mu.Lock()
	ev, ok := m.t.observe(from, info, time.Now(), connected)
	if ok {
		m.emit(ev)
	}
	m.mu.Unlock()
	if ok {
		m.afterLeave([]Event{ev})
	}
	if !connected {
		m.node.dialMember(from, info.Addrs)
	}
}

// disconnected drops p if no connection to it is left.
func (m *Membership) disconnected(p peer.ID) {
	if m.node.host.Network().Connectedness(p) == network.Connected {
		return
	}
	m.mu.Lock()
	ev, ok := m.t.remove(p, "disconnected", time.Now())
	if ok {
		m.emit(ev)
	}
	m.mu.Unlock()
	if ok {
		m.afterLeave([]Event{ev})
	}
}

func (m *Membership) expire() {
	m.mu.Lock()
	evs := m.t.expire(time.Now())
	m.emit(evs...)
	m.mu.Unlock()
	m.afterLeave(evs)
}

// info builds this node's next heartbeat.
func (m *Membership) info() *messages.NodeInfo {
	n := m.node
	total, avail := n.memory()
	m.mu.Lock()
	m.seq++
	proto := m.protocols()
	info := &messages.NodeInfo{
		PeerId:               n.host.ID().String(),
		Incarnation:          m.inc,
		Seq:                  m.seq,
		Version:              n.cfg.Version,
		Protocol:             proto.Max,
		ProtocolMin:          proto.Min,
		Platform:             platform(),
		BootId:               bootID(),
		Rdma:                 rdmaAvailable(),
		Leaving:              m.leaving,
		MemoryTotalBytes:     total,
		MemoryAvailableBytes: avail,
		ComputeFlops:         n.cfg.ComputeFlops,
		Shards:               m.shards,
		FetchesWeights:       n.cfg.FetchesWeights,
		MemoryBandwidth:      n.cfg.MemoryBandwidth,
		Device:               n.cfg.Device,
	}
	m.mu.Unlock()
	info.Links = n.announcedLinks()
	for _, a := range n.host.Addrs() {
		info.Addrs = append(info.Addrs, a.String())
	}
	if n.cfg.Models != nil {
		info.Models = n.cfg.Models()
	}
	if n.cfg.Findings != nil {
		info.Findings = n.cfg.Findings()
	}
	if n.cfg.Fetching != nil {
		info.Fetching = n.cfg.Fetching()
		info.Fetching = info.Fetching[:min(len(info.Fetching), maxFetches)]
	}
	info.ClockUnixNano = time.Now().Add(n.cfg.ClockOffset).UnixNano()
	return info
}

func (m *Membership) publish(ctx context.Context) {
	m.mu.Lock()
	paused := m.paused
	m.mu.Unlock()
	if paused {
		return
	}
	info := m.info()
	m.observe(m.node.host.ID(), info) // self is in the view from the first beat
	data, err := proto.Marshal(info)
	if err != nil {
		m.log.Error("peers: marshal NodeInfo", "err", err)
		return
	}
	if err := m.topic.Publish(ctx, data); err != nil && ctx.Err() == nil {
		m.log.Warn("peers: publish NodeInfo", "err", err)
	}
}

// validate is the topic validator: only well-formed NodeInfo signed by the
// node it describes passes, and is handed on decoded.
func (m *Membership) validate(_ context.Context, _ peer.ID, msg *pubsub.Message) bool {
	if len(msg.Data) > maxInfoBytes {
		return false
	}
	from, err := peer.IDFromBytes(msg.From)
	if err != nil {
		return false
	}
	info := new(messages.NodeInfo)
	if err := proto.Unmarshal(msg.Data, info); err != nil {
		m.log.Debug("peers: bad NodeInfo", "from", from, "err", err)
		return false
	}
	if err := validateInfo(info, from); err != nil {
		m.log.Debug("peers: bad NodeInfo", "from", from, "err", err)
		return false
	}
	msg.ValidatorData = info
	return true
}

// run publishes heartbeats, reads everyone's, and expires the silent, until
// ctx is done.
func (m *Membership) run(ctx context.Context, sub *pubsub.Subscription, events *pubsub.TopicEventHandler) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(2)
	go func() { // receive
		defer wg.Done()
		for {
			msg, err := sub.Next(ctx)
			if err != nil {
				return
			}
			if info, ok := msg.ValidatorData.(*messages.NodeInfo); ok && msg.GetFrom() != m.node.host.ID() {
				m.observe(msg.GetFrom(), info)
			}
		}
	}()
	go func() { // a peer that joins the topic hears from us at once
		defer wg.Done()
		for {
			ev, err := events.NextPeerEvent(ctx)
			if err != nil {
				return
			}
			if ev.Type == pubsub.PeerJoin {
				m.poke()
			}
		}
	}()

	beat := time.NewTicker(m.node.cfg.HeartbeatInterval)
	defer beat.Stop()
	check := time.NewTicker(m.node.cfg.MemberTimeout / 25)
	defer check.Stop()
	m.publish(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			m.publish(ctx)
		case <-m.publishNow:
			m.publish(ctx)
		case <-check.C:
			m.expire()
		}
	}
}

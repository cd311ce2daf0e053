package stage

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/internal/wire"
	"strata/messages"
)

// Prompt caching, stage side. When a session ends, its origin may ask the
// stages to retain its KV cache (FreeSession{retain}) instead of freeing
// it: the cache becomes an entry, still counted in the node's memory
// budget, that the first Forward of a later session of the same origin
// may adopt (Forward.resume), truncated to the prefix the two share. The
// origin keeps the token sequences (origin/prefixcache.go); a stage only keeps
// bytes, and knows nothing of what they mean.
//
// Entries go, least recently used first, when the node needs their
// memory (Host.reserveLocked), when a shard holds more than
// maxCachedPerShard, when the origin frees them, or with the shard.

// maxCachedPerShard bounds the entries one shard retains, memory budget
// or not (a node without --memory has no budget to press on them).
const maxCachedPerShard = 16

// cachedKV is one retained session's KV cache.
type cachedKV struct {
	origin  string // the address (node) of the session's origin: only it may resume
	ss      *shardSession
	usedAt  int64 // Unix ns of the retain, for least-recently-used eviction
	session string
}

// errCacheMiss marks a Forward that asked to resume an entry this stage
// does not hold (or may not give to that origin: the two are not told
// apart, so a peer learns nothing of other origins' entries).
var errCacheMiss = errors.New("prompt cache entry not held here")

// retain turns a session into a cache entry. It reports false when the
// session is not open here (nothing to retain).
// A tensor-parallel leader relays the retain to its members, each of
// which keeps its own heads' part of the cache under the same name.
func (s *shard) retain(session string) bool {
	s.mu.Lock()
	ss, ok := s.sessions[session]
	if !ok {
		s.mu.Unlock()
		return false
	}
	delete(s.sessions, session)
	s.markFreedLocked(session)
	s.activeAt.Store(time.Now().UnixNano()) // --keep-alive counts from the session's end
	if s.cached == nil {
		s.cached = map[string]*cachedKV{}
	}
	ss.sampler = nil // a resumed session gets its own
	ss.loop, ss.chainUntil, ss.held = nil, 0, nil
	if ss.ar != nil {
		// The group was the session's; a resumed session forms its own.
		ss.ar.Close()
		ss.ar, ss.arErr = nil, nil
	}
	s.cached[session] = &cachedKV{origin: ss.origin.Address, ss: ss, usedAt: time.Now().UnixNano(), session: session}
	var drop uint64
	for len(s.cached) > maxCachedPerShard {
		drop += s.dropOldestLocked()
	}
	s.mu.Unlock()
	if drop > 0 {
		s.host.release(drop)
	}
	return true
}

// dropCached forgets one entry (the origin freed it); it reports whether
// there was one. Only the origin's node may (or, on a tensor-parallel
// member, its leader, relaying the origin's free).
func (s *shard) dropCached(session string, sender *actor.PID) bool {
	s.mu.Lock()
	e, ok := s.cached[session]
	if !ok || sender == nil || sender.Address != e.origin && !(s.tp != nil && s.tp.fromLeader(sender)) {
		s.mu.Unlock()
		return false
	}
	delete(s.cached, session)
	s.mu.Unlock()
	s.host.release(e.ss.kvBytes)
	return true
}

// dropOldestLocked drops the least recently used entry (s.mu held) and
// returns its bytes, which the caller releases.
func (s *shard) dropOldestLocked() uint64 {
	var old *cachedKV
	for _, e := range s.cached {
		if old == nil || e.usedAt < old.usedAt {
			old = e
		}
	}
	if old == nil {
		return 0
	}
	delete(s.cached, old.session)
	return old.ss.kvBytes
}

// dropAllCached drops every entry and returns their bytes, which the
// caller releases.
func (s *shard) dropAllCached() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for id, e := range s.cached {
		n += e.ss.kvBytes
		delete(s.cached, id)
	}
	return n
}

// adopt takes the entry m.Resume for the session m opens, truncated to
// m.Position positions: what lies beyond is never read again (attention
// reads positions below Cache.Len) and is overwritten as the session goes
// on. The entry leaves the table; the session's end may retain it again.
func (s *shard) adopt(m *messages.Forward) (*shardSession, error) {
	origin := wire.PID(m.ReplyTo)
	s.mu.Lock()
	e, ok := s.cached[m.Resume]
	if !ok || e.origin != origin.Address || m.Resume == m.Session {
		s.mu.Unlock()
		return nil, fmt.Errorf("session %s: %w", m.Session, errCacheMiss)
	}
	c := e.ss.kv()
	if int(m.Position) > c.Len || int(m.Context) != c.Capacity {
		s.mu.Unlock()
		return nil, fmt.Errorf("session %s resumes at position %d with a context of %d; the entry holds %d of %d: %w",
			m.Session, m.Position, m.Context, c.Len, c.Capacity, errCacheMiss)
	}
	delete(s.cached, m.Resume)
	s.mu.Unlock()
	c.Len = int(m.Position)
	return &shardSession{origin: origin, cache: e.ss.cache, tpc: e.ss.tpc, kvBytes: e.ss.kvBytes}, nil
}

// evictCachedLocked drops retained entries of the host's shards, least
// recently used first, until need bytes are released or none is left
// (h.mu held). It returns the bytes released (already taken off h.used).
func (h *Host) evictCachedLocked(need uint64) uint64 {
	type entry struct {
		s      *shard
		usedAt int64
	}
	var all []entry
	for _, s := range h.shards {
		s.mu.Lock()
		for _, e := range s.cached {
			all = append(all, entry{s, e.usedAt})
		}
		s.mu.Unlock()
	}
	sort.Slice(all, func(i, j int) bool { return all[i].usedAt < all[j].usedAt })
	var freed uint64
	for _, e := range all {
		if freed >= need {
			break
		}
		e.s.mu.Lock()
		n := e.s.dropOldestLocked()
		e.s.mu.Unlock()
		freed += n
	}
	h.used -= min(freed, h.used)
	return freed
}

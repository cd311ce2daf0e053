package stage

import "crypto/sha256"

// maxFreed bounds the freed-session memory.
const maxFreed = 4096

// freedSessions remembers the last maxFreed sessions a shard freed, in
// memory allocated once, at the first: a session's ID is a string decoded
// from a message among that message's garbage, and keeping thousands of
// them alive pinned the heap spans they sat in (a node's idle heap stayed
// megabytes above its live bytes after a soak). Keys are the IDs' SHA-256
// digests: IDs come from peers and may be of any length. The zero value
// is empty.
type freedSessions struct {
	set  map[[sha256.Size]byte]struct{}
	ring [][sha256.Size]byte // the keys in the order freed, a circle of maxFreed
	next int                 // where the next key goes
}

// has reports whether session was freed lately.
func (f *freedSessions) has(session string) bool {
	_, ok := f.set[sha256.Sum256([]byte(session))]
	return ok
}

// add remembers session, forgetting the oldest past maxFreed.
func (f *freedSessions) add(session string) {
	k := sha256.Sum256([]byte(session))
	if _, ok := f.set[k]; ok {
		return
	}
	if f.set == nil {
		f.set, f.ring = make(map[[sha256.Size]byte]struct{}, maxFreed), make([][sha256.Size]byte, 0, maxFreed)
	}
	if len(f.ring) < maxFreed {
		f.ring = append(f.ring, k)
	} else {
		delete(f.set, f.ring[f.next])
		f.ring[f.next] = k
	}
	f.next = (f.next + 1) % maxFreed
	f.set[k] = struct{}{}
}

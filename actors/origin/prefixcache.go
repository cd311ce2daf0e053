package origin

import (
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"strata/actors/session"
	"strata/messages"
)

// Prompt caching, origin side. Agents resend a long, growing
// conversation every turn; when a session ends cleanly its stages retain
// its KV cache (stage/retained.go) and the origin remembers here which tokens
// that cache holds and on which ring. A later request of the same model
// whose prompt shares a prefix with a retained session, planned onto the
// same ring (the same shard actors, so the same layers and files), asks
// its stages to adopt that cache truncated to the shared prefix, and
// prefill runs only the rest. A stage that lost the entry answers so; the
// session then runs the whole prompt, as without a cache.

// minCachedPrefix is the shortest shared prefix worth resuming: below it
// prefill is cheap and the entry is better kept for a longer match.
const minCachedPrefix = 16

// defaultPromptCache is Options.PromptCache's default.
const defaultPromptCache = 16

// prefixEntry is one retained session as its origin knows it.
type prefixEntry struct {
	model   string
	ring    []*actor.PID // the stages that retain it, in order
	ctxLen  int
	session string // the retained session's ID (the entry's name on the stages)
	tokens  []int  // what its KV cache holds, position by position
	usedAt  time.Time
}

// prefixCache is the origin's table of retained sessions.
type prefixCache struct {
	mu      sync.Mutex
	max     int
	entries []*prefixEntry
}

// take finds the entry for (model, ring, ctxLen) that shares the longest
// prefix with prompt, removes it (the new session adopts it) and returns
// it with the number of positions to reuse: at most len(prompt)-1, since
// the last prompt token must run to give logits. nil when no entry
// shares minCachedPrefix tokens.
func (p *prefixCache) take(model string, ring []*actor.PID, ctxLen int, prompt []int) (*prefixEntry, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, bestN := -1, 0
	for i, e := range p.entries {
		if e.model != model || e.ctxLen != ctxLen || !sameRing(e.ring, ring) {
			continue
		}
		n := commonPrefix(e.tokens, prompt)
		if n > bestN {
			best, bestN = i, n
		}
	}
	bestN = min(bestN, len(prompt)-1)
	if best < 0 || bestN < minCachedPrefix {
		return nil, 0
	}
	e := p.entries[best]
	p.entries = slices.Delete(p.entries, best, best+1)
	return e, bestN
}

// put records a retained session and returns the entries it pushed out
// (least recently used first), which the caller frees on their stages.
func (p *prefixCache) put(e *prefixEntry) []*prefixEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entries = append(p.entries, e)
	var out []*prefixEntry
	for len(p.entries) > p.max {
		oldest := 0
		for i, x := range p.entries {
			if x.usedAt.Before(p.entries[oldest].usedAt) {
				oldest = i
			}
		}
		out = append(out, p.entries[oldest])
		p.entries = slices.Delete(p.entries, oldest, oldest+1)
	}
	return out
}

// all removes and returns every entry.
func (p *prefixCache) all() []*prefixEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.entries
	p.entries = nil
	return out
}

func sameRing(a, b []*actor.PID) bool {
	return slices.EqualFunc(a, b, func(x, y *actor.PID) bool { return x.Address == y.Address && x.Id == y.Id })
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// resumable finds the retained session a session's first ring may resume
// for its prompt and returns its name on the stages and how many
// positions it covers ("", 0: none); r.resumed holds it until the ring's
// first answer says whether the stages adopted it.
func (r *ring) resumable(stages []session.Stage) (string, int) {
	if r.c.prefix == nil {
		return "", 0
	}
	ring := make([]*actor.PID, len(stages))
	for i, s := range stages {
		ring[i] = stagePID(s)
	}
	e, n := r.c.prefix.take(r.req.Model, ring, r.ctxLen, r.core.Fed())
	if e == nil {
		return "", 0
	}
	r.resumed, r.cached = e, n
	return e.session, n
}

// dropResumed frees the retained session the ring tried to resume. Whatever
// went wrong, the entry is spent: stages past the one that failed never
// saw the Forward and still hold it, and nobody else will free it.
func (r *ring) dropResumed() {
	if r.resumed != nil {
		r.c.dropEntry(r.resumed, false)
	}
	r.resumed, r.cached = nil, 0
}

// retain ends ring id keeping its KV caches as a prompt-cache entry
// holding tokens, instead of freeing them.
func (r *ring) retain(id string, stages []session.Stage, tokens []int) {
	futures := make([]*actor.Future, len(stages))
	ring := make([]*actor.PID, len(stages))
	for i, s := range stages {
		ring[i] = stagePID(s)
		futures[i] = r.c.root.RequestFuture(ring[i], &messages.FreeSession{Session: id, Retain: true}, 2*time.Second)
	}
	for _, f := range futures {
		f.Wait()
	}
	e := &prefixEntry{model: r.req.Model, ring: ring, ctxLen: r.ctxLen, session: id, tokens: slices.Clone(tokens), usedAt: time.Now()}
	for _, old := range r.c.prefix.put(e) {
		r.c.dropEntry(old, false)
	}
}

// dropEntry frees a retained session on its stages, waiting for their
// answers (briefly) when wait is set.
func (c *Origin) dropEntry(e *prefixEntry, wait bool) {
	var futures []*actor.Future
	for _, pid := range e.ring {
		futures = append(futures, c.root.RequestFuture(pid, &messages.FreeSession{Session: e.session}, 2*time.Second))
	}
	for _, f := range futures {
		if wait {
			f.Wait()
		}
	}
}

// DropPromptCache frees every retained session of this origin on its stages.
func (c *Origin) DropPromptCache() {
	if c.prefix == nil {
		return
	}
	for _, e := range c.prefix.all() {
		c.dropEntry(e, true)
	}
}

package origin

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The origin's table: the longest shared prefix on the same model, ring
// and context wins; at least minCachedPrefix, at most all but the
// prompt's last token; the least recently used entry goes first.
func TestPrefixCacheTable(t *testing.T) {
	seq := func(n, base int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = base + i
		}
		return out
	}
	ringA := []*actor.PID{actor.NewPID("n0", "a"), actor.NewPID("n1", "b")}
	ringB := []*actor.PID{actor.NewPID("n0", "a"), actor.NewPID("n2", "b")}
	now := time.Now()
	fill := func() *prefixCache {
		p := &prefixCache{max: 3}
		p.put(&prefixEntry{model: "m", ring: ringA, ctxLen: 512, session: "long", tokens: seq(100, 0), usedAt: now})
		p.put(&prefixEntry{model: "m", ring: ringA, ctxLen: 512, session: "short", tokens: seq(40, 0), usedAt: now.Add(time.Second)})
		p.put(&prefixEntry{model: "other", ring: ringA, ctxLen: 512, session: "other", tokens: seq(100, 0), usedAt: now.Add(2 * time.Second)})
		return p
	}
	for _, c := range []struct {
		name    string
		model   string
		ring    []*actor.PID
		ctxLen  int
		prompt  []int
		session string
		n       int
	}{
		{"longest", "m", ringA, 512, seq(120, 0), "long", 100},
		{"whole prompt cached: all but its last token", "m", ringA, 512, seq(30, 0), "long", 29},
		{"diverges early", "m", ringA, 512, append(seq(20, 0), seq(50, 900)...), "long", 20},
		{"below the minimum", "m", ringA, 512, append(seq(minCachedPrefix-1, 0), 7777, 8888), "", 0},
		{"other ring", "m", ringB, 512, seq(120, 0), "", 0},
		{"other context", "m", ringA, 1024, seq(120, 0), "", 0},
		{"other model", "x", ringA, 512, seq(120, 0), "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := fill()
			e, n := p.take(c.model, c.ring, c.ctxLen, c.prompt)
			got := ""
			if e != nil {
				got = e.session
			}
			if got != c.session || n != c.n {
				t.Errorf("took %q, %d positions; want %q, %d", got, n, c.session, c.n)
			}
			if e != nil && len(p.entries) != 2 {
				t.Errorf("%d entries left after taking one of 3", len(p.entries))
			}
		})
	}
	p := fill()
	out := p.put(&prefixEntry{model: "m", ring: ringA, ctxLen: 512, session: "new", usedAt: now.Add(3 * time.Second)})
	if len(out) != 1 || out[0].session != "long" || len(p.entries) != 3 {
		t.Errorf("over capacity: dropped %v, %d left; want the oldest (long)", out, len(p.entries))
	}
}

package allreduce

import "github.com/libp2p/go-libp2p/core/network"

// GroupOut returns g's stream to member j, for tests that write bad
// frames on it.
func GroupOut(g *Group, j int) network.Stream { return g.out[j] }

// F32ToF16 and F16ToF32 are the wire's half conversions.
var F32ToF16, F16ToF32 = f32ToF16, f16ToF32

// GroupRings is how many members g sends to through a shared-memory ring.
func GroupRings(g *Group) int {
	n := 0
	for _, s := range g.snd {
		if s != nil {
			n++
		}
	}
	return n
}

package side

import "time"

// MangleProof makes RDMA links opened from now on send f(token) as their
// proof (nil: the token). For tests: a peer that got the token wrong.
func MangleProof(f func([]byte) []byte) {
	if f == nil {
		mangleProof.Store(nil)
		return
	}
	mangleProof.Store(&f)
}

// SetNegotiateDelay makes every verbs negotiation wait d first, and
// returns the old delay. For tests: a slow peer.
func SetNegotiateDelay(d time.Duration) time.Duration {
	return time.Duration(negotiateDelay.Swap(int64(d)))
}

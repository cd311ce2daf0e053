package peers

import "strconv"

// SettleActorRegistry allocates protoactor's process registry whole.
// The registry is 1024 × 32 Go maps, each allocated at its first PID,
// and every request registers futures under new IDs: a node's heap grew
// by about 10 MB over its first few hundred thousand requests and only
// then held steady (the soak read that as a leak; 4 million futures
// after it the heap did not grow). Done at start, about 0.3 s of one
// core, a node's memory is flat from its first minute, so a growth is a
// real leak. The keys added and removed ("settle-N") cannot be PIDs,
// which are "$N" or actor names.
func (n *Node) SettleActorRegistry() {
	r := n.system.ProcessRegistry
	for i := range settleKeys {
		if n.ctx.Err() != nil {
			return
		}
		pid, _ := r.Add(n.system.DeadLetter, "settle-"+strconv.Itoa(i))
		r.Remove(pid)
	}
}

// settleKeys reach every one of the registry's 32768 maps with all but
// certainty (about 15 per map, where 11 are needed on average).
const settleKeys = 500_000

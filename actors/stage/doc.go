// Package stage is a node's stage side: the Host actor, which loads
// shards within the node's memory, evicts them least recently used, and
// keeps each model's file open and described once (Info); and the shard
// actors, each holding one stage's layers of one model and its
// sessions' KV caches.
//
// One file per thing a stage holds: host.go (the Host), shard.go (a
// shard and its sessions' steps), retained.go (KV caches kept after a
// session for prompt caching), tp.go (a tensor-parallel member's slice),
// groups.go (the all-reduce groups it joins), constrain.go (structured output on the last
// stage), names.go (shard actor names), hidden.go (activations on the
// wire). The origin that drives them is strata/actors/origin; they meet
// only in strata/messages.
package stage

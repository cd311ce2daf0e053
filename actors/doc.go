// Package actors will hold the protoactor-go actors (node, membership,
// shard, session, loader) and, in actors/plan, the placement function.
// Nothing is implemented yet: it arrives with the distributed-engine issue.
package actors

// Package actors is a strata node: a libp2p peer (strata/peers) with the
// two roles every node plays, each in its own package.
//
//   - The stage side (strata/actors/stage): every node runs a Host (the
//     actor named stage.HostName), which loads shards on request. A shard
//     actor owns the weights of layers [first, end) of one model, mapped
//     from the node's models or fetched from peers (Weights), and one KV
//     cache per session; a tensor-parallel member holds a slice of each
//     of a stage's layers and all-reduces through peers/allreduce.
//   - The origin side (strata/actors/origin): the node that takes a
//     prompt plans a ring of stages (actors/plan), asks each stage's Host
//     to load its shard, and sends Forward messages to the first stage.
//     Each shard runs its layers and forwards the hidden states straight
//     to the next; the last stage samples, sends the Token back to the
//     origin and feeds it to the first stage for the next step. The
//     session's logic is the pure state machine of actors/session.
//
// The two sides talk only in protobuf messages (strata/messages), so
// either may be on any node. PIDs are location-transparent: a PID whose
// Address is another node's peer ID is delivered over libp2p by
// strata/peers, and PeerInbound says what a peer may send to which
// actor. Example shows two hosts and an origin in one actor system;
// strata.NewLocalCluster starts any number of nodes.
package actors

// Package actors runs one model across many nodes with protoactor-go
// actors.
//
// Every node runs a Host (the actor named HostName), which loads shards on
// request: a shard actor owns the weights of layers [first, end) of one
// model, mapped from the node's models directory, and one KV cache per
// session. A session — driven by whichever node took the prompt — plans a
// ring of stages (actors/plan), asks each stage's Host to load its shard,
// then sends Forward messages to the first stage. Each shard runs its
// layers and forwards the hidden states straight to the next stage; the
// last stage samples and sends the Token back to the session, which
// streams it and feeds it to the first stage for the next step.
//
// A stage may also be a tensor-parallel group (ClusterOptions.Placement):
// every member holds a slice of each of the stage's layers, the leader
// relays each step to the others, and they all-reduce their partial sums
// through the node's Groups (tp.go).
//
// A session's logic — planning, loading, replaying after a loss, timing
// out, cancelling — is the pure state machine of strata/actors/session;
// Cluster is its shell, and the generation loop is engine.Loop, shared
// with the one-node engine.
//
// PIDs are location-transparent: a PID whose Address is another node's
// peer ID is delivered over libp2p by strata/peers, so this package never
// touches the network itself. Example shows two hosts and a Cluster in
// one actor system; strata.NewLocalCluster starts any number of nodes.
package actors

// Package strata is the library a Go program embeds to run one model
// across many nodes: NewLocalCluster starts N nodes inside the process,
// over in-memory links or real libp2p on loopback, links shaped and
// broken at will (Links, Cut, Stall, Kill), the placement function an
// option.
// The pieces underneath are packages of their own: strata/actors (hosts,
// shards, the session shell), strata/actors/session (one generation as a
// pure state machine), strata/actors/plan (placement), strata/peers
// (libp2p), and strata/runtime/engine (one node, and the generation loop
// both share). docs/embedding.md walks through the Example.
package strata

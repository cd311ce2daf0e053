// Package messages will hold the protobuf messages that cross an actor or
// peer boundary (Forward, Token, NodeInfo, ...) and their generated Go
// code (`make proto`). Nothing is defined yet: it arrives with the peers
// and distributed-engine issues.
package messages

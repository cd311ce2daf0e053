// Package messages holds the protobuf messages that cross an actor or peer
// boundary, with their generated Go code (committed; `make proto`
// regenerates it from messages/*.proto with protoc and protoc-gen-go).
//
// Every message type generated here registers itself in
// protoregistry.GlobalTypes under its full name ("strata.Ping"), which is
// how peers finds the Go type for a frame arriving from another node: to
// send a new message type between nodes, add it to a .proto file here, run
// `make proto`, and send it to a remote PID. Nothing else to register.
package messages

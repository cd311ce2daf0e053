// Package peers connects strata nodes: a go-libp2p host with a persistent
// Ed25519 identity, a private network keyed by the cluster secret,
// discovery (mDNS on the LAN, static --join addresses with reconnection),
// GossipSub membership, and remote actors: protoactor-go PIDs whose
// Address is a libp2p peer ID are delivered to that node over libp2p.
//
// # A node
//
// New starts a node from a Config: its identity (DataDir/identity.key),
// listen addresses, --join addresses and the cluster secret
// (LoadOrCreateSecret). A port in use or a bad address is one line of
// error. ExampleNew starts two nodes, joins them and sends a message from
// an actor on one to an actor on the other.
//
// # Membership
//
// Every node publishes a messages.NodeInfo (peer ID, addresses, version,
// memory, compute rate, models, shards) on MembersTopic every second.
// Membership().View() is the sorted, versioned member list; a member whose
// last connection closes is dropped at once, one that stops sending
// heartbeats after Config.MemberTimeout (2.5 s). Nodes dial every member
// they hear of, so the cluster is a full mesh.
//
// Membership().Subscribe() hears Joined (for every current member first),
// Updated and Left events (Left says why: disconnected or timeout);
// Membership().Wait blocks until the view satisfies a condition.
//
// # Remote actors
//
// Node.ActorSystem() is an ordinary protoactor-go actor system whose PIDs
// carry the node's peer ID as their address. Node.PID(peerID, name) names
// an actor on any node; sending to it, Request/Respond, futures and Watch
// work as they do locally, for the actors and message types the receiving
// node lists in Config.Inbound (a peer is trusted to ask for work, not to
// end actors: Stop and PoisonPill never cross nodes). A future waiting
// for a peer's answer fails (ErrDeadLetter) as soon as that peer leaves
// the view (ExampleNew).
//
// Messages must be protobuf messages: any generated type linked into the
// binary (protoregistry.GlobalTypes, or Config.Types) can be sent, so a new
// message is a .proto file in messages/, `make proto`, and an entry in
// the receiver's Config.Inbound.
// Each sender marshals in its own goroutine; one writer per remote peer
// writes frames in order onto one stream (ActorProtocol), so messages from
// one node to another arrive in the order sent; delivery is at most once
// (a broken stream loses what was in flight, and the next message opens a
// new one). A frame is a 4-byte length, an Envelope (target, sender, type
// name, header) and the payload (messages/envelope.proto); frames are
// capped at Config.MaxMessageBytes (64 MiB), read as their bytes arrive
// (not as announced), and one peer's frames in flight hold at most twice
// that. An oversized, truncated or undecodable frame, an unknown type, a
// misplaced system message, or a message the allowlist refuses closes
// that stream with one log line. See SECURITY.md.
//
// Watch across nodes: an actor watching a remote PID gets Terminated when
// the remote actor stops (Why Stopped), when it does not exist (NotFound),
// and when its node disconnects or leaves the view (AddressTerminated).
//
// Tensor parallelism: Node.AllReduce is the node's side of the all-reduce
// protocol (package peers/allreduce). The members of a group each call its
// Join with the same GroupID and member list; the *allreduce.Group each
// gets is an AllReducer (runtime/model) over allreduce.Protocol streams,
// or shared-memory rings between members on one host (Options.Shm): every member
// joins, then runs its slice's forward pass with the group as its
// all-reducer (model.TPState.Forward), in step with the others.
//
// Every node runs a PingActor that answers messages.Ping with
// messages.Pong. The peerstest package starts clusters in one process.
package peers

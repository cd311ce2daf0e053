package peers

import (
	"encoding/binary"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"strata/messages"
	"strata/peers/internal/frame"
)

// FuzzBridgeDecode feeds a byte stream, as a peer would write it on an
// actor stream, through the bridge's decoding and admission: frames are
// split by their length, decoded, and judged by admit against an
// allowlist. Nothing may panic, and nothing admitted may break the rules:
// no lifecycle message, no Terminated about another node's actor or
// without a watch, no Watch for another node's watcher or of an actor
// outside the list, no sender on a third node, no target or type outside
// the list (but answers to futures asked of this peer).
func FuzzBridgeDecode(f *testing.F) {
	const fromID = "12D3KooWAuYxaBN4uNfXZ6czuCbjhQDL1EXnDSoumzXkNUxbK3Ki"
	from, err := peer.Decode(fromID)
	if err != nil {
		f.Fatal(err)
	}
	system := actor.NewActorSystem()
	system.ProcessRegistry.Address = "12D3KooWSelfSelfSelf"
	rules := inboundRules{pingInbound, {Actor: "shards/*", Types: []string{"strata.Forward", "strata.FreeSession"}, Watch: true}}
	frameOf := func(env *messages.Envelope, msg proto.Message) []byte {
		env.TypeName = string(msg.ProtoReflect().Descriptor().FullName())
		b, err := frame.Append(nil, env, msg, frame.DefaultMaxBytes)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	remote := &actor.PID{Address: fromID, Id: "x"}
	for _, fr := range [][]byte{
		frameOf(&messages.Envelope{TargetId: "ping"}, &messages.Ping{Seq: 1}),
		frameOf(&messages.Envelope{TargetId: "shards/m@0-1#1", Sender: &messages.PID{Address: fromID, Id: "future$1"}}, &messages.Forward{Session: "s"}),
		frameOf(&messages.Envelope{TargetId: "future$7"}, &messages.Pong{}),
		frameOf(&messages.Envelope{TargetId: "shards", System: true}, &actor.Stop{}),
		frameOf(&messages.Envelope{TargetId: "shards"}, &actor.PoisonPill{}),
		frameOf(&messages.Envelope{TargetId: "shards/a", System: true}, &actor.Watch{Watcher: remote}),
		frameOf(&messages.Envelope{TargetId: "$1", System: true}, &actor.Terminated{Who: remote}),
		frameOf(&messages.Envelope{TargetId: "$1", System: true}, &actor.Terminated{Who: &actor.PID{Address: "12D3KooWSelfSelfSelf", Id: "shards/a"}}),
	} {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		b := &bridge{self: "12D3KooWSelfSelfSelf", system: system, rules: rules, maxFrame: 1 << 20,
			watches: map[peer.ID]map[watchKey]watch{}, futures: map[peer.ID]map[string]struct{}{}, futureScan: map[peer.ID]int{}}
		// A local actor "$1" watches the peer's "x"; future$7 waits for it.
		b.addWatch(from, remote, b.system.NewLocalPID("$1"))
		b.futures[from] = map[string]struct{}{"future$7": {}}
		for len(stream) >= frame.HeaderBytes {
			n := int(binary.BigEndian.Uint32(stream))
			if n > b.maxFrame || n > len(stream)-frame.HeaderBytes {
				return // the stream would be closed
			}
			body := stream[frame.HeaderBytes : frame.HeaderBytes+n]
			stream = stream[frame.HeaderBytes+n:]
			env, msg, err := frame.Decode(body, protoregistry.GlobalTypes)
			if err != nil {
				return
			}
			if err := b.admit(from, env, msg); err != nil {
				continue // refused (closes the stream) or dropped
			}
			if isLifecycle(msg) {
				t.Fatalf("admitted a lifecycle message %T", msg)
			}
			if s := env.Sender; s != nil && s.Address != "" && s.Address != nonhost && s.Address != fromID {
				t.Fatalf("admitted a sender on another node: %v", s)
			}
			if env.System {
				switch m := msg.(type) {
				case *actor.Terminated:
					if m.Who.Address != fromID || m.Who.Id != "x" || env.TargetId != "$1" {
						t.Fatalf("admitted Terminated{%v} to %q", m.Who, env.TargetId)
					}
				case *actor.Watch:
					if m.Watcher.Address != fromID || !rules.watchable(env.TargetId) {
						t.Fatalf("admitted Watch{%v} of %q", m.Watcher, env.TargetId)
					}
				case *actor.Unwatch:
					if m.Watcher.Address != fromID || !rules.watchable(env.TargetId) {
						t.Fatalf("admitted Unwatch{%v} of %q", m.Watcher, env.TargetId)
					}
				default:
					t.Fatalf("admitted system message %T", msg)
				}
				continue
			}
			if isSystemMessage(msg) {
				t.Fatalf("admitted system message %T as a user message", msg)
			}
			if !(env.TargetId == "future$7" || rules.allows(env.TargetId, env.TypeName)) {
				t.Fatalf("admitted %s to %q", env.TypeName, env.TargetId)
			}
		}
	})
}

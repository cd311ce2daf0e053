package frame

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"

	"strata/messages"
)

// The protobuf costs of one 8 KiB activation (a 2048-wide F32 hidden
// state) on its way between peers: marshal on the sender, unmarshal on
// the receiver. CPU only; the link itself is in peers/verbs' benchmarks.
func benchForward() (*messages.Envelope, *messages.Forward) {
	env := &messages.Envelope{TargetId: "shard/abc", TypeName: "strata.Forward", Sender: &messages.PID{Address: "12D3KooWxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", Id: "session/1"}}
	fw := &messages.Forward{Session: "s1", Position: 17, Count: 1, Hidden: make([]byte, 8<<10),
		Route:   []*messages.PID{{Address: "12D3KooWyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy", Id: "shard/def"}},
		ReplyTo: &messages.PID{Address: "12D3KooWxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", Id: "session/1"}, Sample: true}
	return env, fw
}

func BenchmarkForwardMarshal(b *testing.B) {
	env, fw := benchForward()
	buf := make([]byte, 0, 16<<10)
	b.SetBytes(int64(len(fw.Hidden)))
	b.ReportAllocs()
	for range b.N {
		var err error
		if buf, err = Append(buf[:0], env, fw, DefaultMaxBytes); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkForwardUnmarshal(b *testing.B) {
	env, fw := benchForward()
	frame, err := Append(nil, env, fw, DefaultMaxBytes)
	if err != nil {
		b.Fatal(err)
	}
	types := new(protoregistry.Types)
	types.RegisterMessage((&messages.Forward{}).ProtoReflect().Type())
	b.SetBytes(int64(len(fw.Hidden)))
	b.ReportAllocs()
	for range b.N {
		if _, _, err := Decode(frame[HeaderBytes:], types); err != nil {
			b.Fatal(err)
		}
	}
}

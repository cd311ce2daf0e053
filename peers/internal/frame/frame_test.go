package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"strata/messages"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  *messages.Envelope
		msg  proto.Message
	}{
		{"empty ping", &messages.Envelope{TargetId: "a"}, &messages.Ping{}},
		{"with sender and header", &messages.Envelope{TargetId: "echo", TargetRequestId: 3, Sender: &messages.PID{Address: "x", Id: "future$1"}, Header: map[string]string{"k": "v"}}, &messages.Ping{Seq: 9, Payload: []byte("hello")}},
		{"system", &messages.Envelope{TargetId: "w", System: true}, &actor.Terminated{Who: actor.NewPID("p", "a"), Why: actor.TerminatedReason_AddressTerminated}},
		{"1 MiB payload", &messages.Envelope{TargetId: "big"}, &messages.Pong{Payload: bytes.Repeat([]byte{7}, 1<<20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env.TypeName = string(tc.msg.ProtoReflect().Descriptor().FullName())
			frame, err := Append([]byte("prefix"), tc.env, tc.msg, DefaultMaxBytes)
			if err != nil {
				t.Fatal(err)
			}
			frame = frame[len("prefix"):]
			if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-4 {
				t.Fatalf("length %d, frame body %d", n, len(frame)-4)
			}
			body := bytes.Clone(frame[4:])
			env, msg, err := Decode(body, protoregistry.GlobalTypes)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(env, tc.env) || !proto.Equal(msg, tc.msg) {
				t.Fatalf("got %v %v, want %v %v", env, msg, tc.env, tc.msg)
			}
			for i := range body { // the message must not alias the buffer
				body[i] = 0xAA
			}
			if !proto.Equal(msg, tc.msg) {
				t.Fatal("decoded message aliases the frame buffer")
			}
		})
	}
}

func TestAppendFrameCap(t *testing.T) {
	msg := &messages.Pong{Payload: make([]byte, 1000)}
	env := &messages.Envelope{TargetId: "a", TypeName: "strata.Pong"}
	buf, err := Append([]byte("keep"), env, msg, 500)
	if !errors.Is(err, ErrTooLarge) || string(buf) != "keep" {
		t.Fatalf("err %v, buf %q", err, buf)
	}
}

func TestDecodeFrameErrors(t *testing.T) {
	good := func(env *messages.Envelope, msg []byte) []byte {
		h, _ := proto.Marshal(env)
		b := protowire.AppendVarint(nil, uint64(len(h)))
		return append(append(b, h...), msg...)
	}
	ping, _ := proto.Marshal(&messages.Ping{Seq: 1})
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, ErrBad},
		{"header longer than frame", []byte{0x20, 1, 2}, ErrBad},
		{"garbage header", append([]byte{3}, 0xff, 0xff, 0xff), ErrBad},
		{"no target", good(&messages.Envelope{TypeName: "strata.Ping"}, ping), ErrBad},
		{"bad type name", good(&messages.Envelope{TargetId: "a", TypeName: "no such/type"}, ping), ErrBad},
		{"unknown type", good(&messages.Envelope{TargetId: "a", TypeName: "strata.NoSuchMessage"}, ping), ErrUnknownType},
		{"garbage payload", good(&messages.Envelope{TargetId: "a", TypeName: "strata.Ping"}, []byte{0xff, 0xff}), ErrBad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Decode(tc.body, protoregistry.GlobalTypes); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzDecodeFrame(f *testing.F) {
	env := &messages.Envelope{TargetId: "a", TypeName: "strata.Ping", Sender: &messages.PID{Address: "x", Id: "y"}}
	frame, _ := Append(nil, env, &messages.Ping{Seq: 1, Payload: []byte("p")}, DefaultMaxBytes)
	f.Add(frame[4:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		env, msg, err := Decode(body, protoregistry.GlobalTypes)
		if err == nil && (env == nil || msg == nil || env.TargetId == "") {
			t.Fatal("accepted a frame without target or message")
		}
	})
}

// TestDecodeForwardInPlace: a Forward decoded in place equals one decoded
// as usual, its Hidden is the body's own bytes (no copy: the activation
// is read where it arrived), and decoding allocates nothing of its size.
func TestDecodeForwardInPlace(t *testing.T) {
	hidden := make([]byte, 256<<10)
	for i := range hidden {
		hidden[i] = byte(i * 7)
	}
	fw := &messages.Forward{Session: "s", Position: 9, Count: 2, Tokens: []int32{1, 2}, Hidden: hidden,
		HiddenType: messages.HiddenType_HIDDEN_F16, Route: []*messages.PID{{Address: "p", Id: "shards/1"}},
		ReplyTo: &messages.PID{Address: "q", Id: "$7"}, Sampling: &messages.Sampling{TopK: 3}, Accept: []int32{4}, Sample: true, ComputeNs: 12, Resume: "r"}
	env := &messages.Envelope{TargetId: "shards/0", TypeName: forwardTypeName}
	frame, err := Append(nil, env, fw, DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	body := frame[HeaderBytes:]
	gotEnv, got, ok, err := DecodeForwardInPlace(body, protoregistry.GlobalTypes, nil)
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	_, want, err := Decode(body, protoregistry.GlobalTypes)
	if err != nil {
		t.Fatal(err)
	}
	if gotEnv.TargetId != env.TargetId || !proto.Equal(got, want) {
		t.Fatalf("in place %v\nas usual %v", got, want)
	}
	start := bytes.Index(body, hidden)
	if start < 0 || &got.Hidden[0] != &body[start] || len(got.Hidden) != len(hidden) {
		t.Fatal("Hidden does not alias the frame body: it was copied")
	}
	// What a decode allocates: the envelope, the message and its small
	// fields, not the activation (a copy would be 256 KiB each time).
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	for range 20 {
		DecodeForwardInPlace(body, protoregistry.GlobalTypes, nil)
	}
	runtime.ReadMemStats(&ms)
	if per := (ms.TotalAlloc - before) / 20; per >= uint64(len(hidden))/4 {
		t.Fatalf("%d bytes allocated per decode of a %d-byte activation", per, len(hidden))
	}
	// Another type is not decoded in place.
	ping, _ := Append(nil, &messages.Envelope{TargetId: "a", TypeName: "strata.Ping"}, &messages.Ping{Seq: 1}, DefaultMaxBytes)
	if _, _, ok, err := DecodeForwardInPlace(ping[HeaderBytes:], protoregistry.GlobalTypes, nil); ok || err != nil {
		t.Fatalf("a Ping: ok %v, err %v", ok, err)
	}
	// A truncated message is an error, as in Decode.
	bad := append(append([]byte(nil), body[:start+100]...), 0xff, 0xff)
	if _, _, _, err := DecodeForwardInPlace(bad, protoregistry.GlobalTypes, nil); !errors.Is(err, ErrBad) {
		t.Fatalf("truncated hidden field: %v", err)
	}
}

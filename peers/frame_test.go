package peers

import (
	"bytes"
	"encoding/binary"
	"errors"
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
			frame, err := appendFrame([]byte("prefix"), tc.env, tc.msg, DefaultMaxMessageBytes)
			if err != nil {
				t.Fatal(err)
			}
			frame = frame[len("prefix"):]
			if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-4 {
				t.Fatalf("length %d, frame body %d", n, len(frame)-4)
			}
			body := bytes.Clone(frame[4:])
			env, msg, err := decodeFrame(body, protoregistry.GlobalTypes)
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
	buf, err := appendFrame([]byte("keep"), env, msg, 500)
	if !errors.Is(err, ErrFrameTooLarge) || string(buf) != "keep" {
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
		{"empty", nil, ErrBadFrame},
		{"header longer than frame", []byte{0x20, 1, 2}, ErrBadFrame},
		{"garbage header", append([]byte{3}, 0xff, 0xff, 0xff), ErrBadFrame},
		{"no target", good(&messages.Envelope{TypeName: "strata.Ping"}, ping), ErrBadFrame},
		{"bad type name", good(&messages.Envelope{TargetId: "a", TypeName: "no such/type"}, ping), ErrBadFrame},
		{"unknown type", good(&messages.Envelope{TargetId: "a", TypeName: "strata.NoSuchMessage"}, ping), ErrUnknownType},
		{"garbage payload", good(&messages.Envelope{TargetId: "a", TypeName: "strata.Ping"}, []byte{0xff, 0xff}), ErrBadFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := decodeFrame(tc.body, protoregistry.GlobalTypes); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzDecodeFrame(f *testing.F) {
	env := &messages.Envelope{TargetId: "a", TypeName: "strata.Ping", Sender: &messages.PID{Address: "x", Id: "y"}}
	frame, _ := appendFrame(nil, env, &messages.Ping{Seq: 1, Payload: []byte("p")}, DefaultMaxMessageBytes)
	f.Add(frame[4:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		env, msg, err := decodeFrame(body, protoregistry.GlobalTypes)
		if err == nil && (env == nil || msg == nil || env.TargetId == "") {
			t.Fatal("accepted a frame without target or message")
		}
	})
}

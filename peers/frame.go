package peers

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"strata/messages"
)

// Frame layout (see messages/envelope.proto): a 4-byte big-endian length N,
// then N bytes: uvarint H, H bytes of Envelope, and the payload.
const frameHeaderBytes = 4

// Limits on what a peer may send; anything beyond closes the stream.
const (
	// DefaultMaxMessageBytes caps one frame (envelope + message): room for
	// the activations of a long prefill chunk.
	DefaultMaxMessageBytes = 64 << 20
	maxEnvelopeBytes       = 64 << 10
	maxActorIDBytes        = 1024
)

// Errors a frame can be rejected with.
var (
	ErrFrameTooLarge = errors.New("peers: frame exceeds the size cap")
	ErrBadFrame      = errors.New("peers: malformed frame")
	ErrUnknownType   = errors.New("peers: unknown message type")
	ErrNotProto      = errors.New("peers: not a protobuf message")
)

// appendFrame appends one frame carrying msg to buf. The message is
// marshalled once, straight into buf.
func appendFrame(buf []byte, env *messages.Envelope, msg proto.Message, maxBytes int) ([]byte, error) {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	buf = protowire.AppendVarint(buf, uint64(proto.Size(env)))
	buf, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf, env)
	if err != nil {
		return buf[:start], err
	}
	buf, err = proto.MarshalOptions{}.MarshalAppend(buf, msg)
	if err != nil {
		return buf[:start], err
	}
	n := len(buf) - start - frameHeaderBytes
	if n > maxBytes {
		return buf[:start], fmt.Errorf("%w: %s message of %d bytes, cap %d", ErrFrameTooLarge, env.TypeName, n, maxBytes)
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(n))
	return buf, nil
}

// decodeFrame decodes a frame's body (after the length) into its envelope
// and message. The message does not alias body, so body can be reused.
func decodeFrame(body []byte, types *protoregistry.Types) (*messages.Envelope, proto.Message, error) {
	h, n := protowire.ConsumeVarint(body)
	if n < 0 || h > maxEnvelopeBytes || h > uint64(len(body)-n) {
		return nil, nil, fmt.Errorf("%w: bad envelope length", ErrBadFrame)
	}
	env := new(messages.Envelope)
	if err := proto.Unmarshal(body[n:n+int(h)], env); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope: %v", ErrBadFrame, err)
	}
	if env.TargetId == "" || len(env.TargetId) > maxActorIDBytes ||
		env.Sender != nil && (len(env.Sender.Id) > maxActorIDBytes || len(env.Sender.Address) > maxActorIDBytes) {
		return nil, nil, fmt.Errorf("%w: bad target or sender", ErrBadFrame)
	}
	name := protoreflect.FullName(env.TypeName)
	if !name.IsValid() {
		return nil, nil, fmt.Errorf("%w: type name %.64q", ErrBadFrame, env.TypeName)
	}
	mt, err := types.FindMessageByName(name)
	if err != nil {
		return nil, nil, fmt.Errorf("%w %.64q", ErrUnknownType, env.TypeName)
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(body[n+int(h):], msg); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadFrame, env.TypeName, err)
	}
	return env, msg, nil
}

// The protoactor system messages that may cross peers, and only as system
// messages: a Terminated arriving as a user message would be a forgery.
func isSystemMessage(m proto.Message) bool {
	switch m.(type) {
	case *actor.Watch, *actor.Unwatch, *actor.Terminated, *actor.Stop:
		return true
	}
	return false
}

// Lifecycle messages end an actor; peers may not send them (Stop as a
// system message is refused the same way).
func isLifecycle(m proto.Message) bool {
	switch m.(type) {
	case *actor.PoisonPill, *actor.Stop:
		return true
	}
	return false
}

func pidToWire(p *actor.PID) *messages.PID {
	if p == nil {
		return nil
	}
	return &messages.PID{Address: p.Address, Id: p.Id, RequestId: p.RequestId}
}

func pidFromWire(p *messages.PID) *actor.PID {
	if p == nil || p.Id == "" {
		return nil
	}
	return &actor.PID{Address: p.Address, Id: p.Id, RequestId: p.RequestId}
}

// forwardTypeName is the type of the one message decoded in place.
const forwardTypeName = "strata.Forward"

// forwardHiddenField is Forward.hidden's field number (inference.proto).
const forwardHiddenField = 5

// decodeForwardInPlace decodes a frame body carrying a Forward, like
// decodeFrame, except that the message's Hidden aliases body instead of
// being copied out of it: the activation is read where it arrived (a side
// channel's receive slot), so body must stay unchanged until the message
// is done with. The other fields (a few hundred bytes: route, tokens,
// sampling) are decoded as usual. ok is false when the frame carries some
// other type (then nothing is decoded).
func decodeForwardInPlace(body []byte, types *protoregistry.Types, scratch []byte) (env *messages.Envelope, fw *messages.Forward, ok bool, err error) {
	h, n := protowire.ConsumeVarint(body)
	if n < 0 || h > maxEnvelopeBytes || h > uint64(len(body)-n) {
		return nil, nil, true, fmt.Errorf("%w: bad envelope length", ErrBadFrame)
	}
	env = new(messages.Envelope)
	if err := proto.Unmarshal(body[n:n+int(h)], env); err != nil {
		return nil, nil, true, fmt.Errorf("%w: envelope: %v", ErrBadFrame, err)
	}
	if env.TypeName != forwardTypeName || env.System {
		return nil, nil, false, nil
	}
	if _, err := types.FindMessageByName(forwardTypeName); err != nil {
		return nil, nil, false, nil // decodeFrame says why
	}
	if env.TargetId == "" || len(env.TargetId) > maxActorIDBytes ||
		env.Sender != nil && (len(env.Sender.Id) > maxActorIDBytes || len(env.Sender.Address) > maxActorIDBytes) {
		return nil, nil, true, fmt.Errorf("%w: bad target or sender", ErrBadFrame)
	}
	// Split the message: every field but hidden goes to scratch, to be
	// unmarshalled; hidden (the last one, as proto3 keeps the last of a
	// repeated scalar) is kept where it is.
	rest := body[n+int(h):]
	var hidden []byte
	for len(rest) > 0 {
		num, typ, k := protowire.ConsumeTag(rest)
		if k < 0 {
			return nil, nil, true, fmt.Errorf("%w: %s: bad field tag", ErrBadFrame, env.TypeName)
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[k:])
		if m < 0 {
			return nil, nil, true, fmt.Errorf("%w: %s: bad field %d", ErrBadFrame, env.TypeName, num)
		}
		if num == forwardHiddenField && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(rest[k:])
			hidden = v
		} else {
			scratch = append(scratch, rest[:k+m]...)
		}
		rest = rest[k+m:]
	}
	fw = new(messages.Forward)
	if err := proto.Unmarshal(scratch, fw); err != nil {
		return nil, nil, true, fmt.Errorf("%w: %s: %v", ErrBadFrame, env.TypeName, err)
	}
	fw.Hidden = hidden
	return env, fw, true, nil
}

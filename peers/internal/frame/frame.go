// Package frame is the wire format of the messages peers exchange with
// actors on the other end (see messages/envelope.proto): a 4-byte
// big-endian length N, then N bytes: uvarint H, H bytes of Envelope, and
// the message. The actor streams and the side channels carry the same
// frames.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"strata/messages"
)

// Frame layout (see messages/envelope.proto): a 4-byte big-endian length N,
// then N bytes: uvarint H, H bytes of Envelope, and the payload.
const HeaderBytes = 4

// Limits on what a peer may send; anything beyond closes the stream.
const (
	// DefaultMaxBytes caps one frame (envelope + message): room for
	// the activations of a long prefill chunk.
	DefaultMaxBytes  = 64 << 20
	MaxEnvelopeBytes = 64 << 10
	MaxActorIDBytes  = 1024
)

// TransferTimeout bounds moving n bytes of frames over a stream: 5 s, and
// a second more per 8 MiB.
func TransferTimeout(n int) time.Duration { return 5*time.Second + time.Duration(n>>23)*time.Second }

// Errors a frame can be rejected with.
var (
	ErrTooLarge    = errors.New("peers: frame exceeds the size cap")
	ErrBad         = errors.New("peers: malformed frame")
	ErrUnknownType = errors.New("peers: unknown message type")
	ErrNotProto    = errors.New("peers: not a protobuf message")
)

// Append appends one frame carrying msg to buf. The message is
// marshalled once, straight into buf.
func Append(buf []byte, env *messages.Envelope, msg proto.Message, maxBytes int) ([]byte, error) {
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
	n := len(buf) - start - HeaderBytes
	if n > maxBytes {
		return buf[:start], fmt.Errorf("%w: %s message of %d bytes, cap %d", ErrTooLarge, env.TypeName, n, maxBytes)
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(n))
	return buf, nil
}

// Decode decodes a frame's body (after the length) into its envelope
// and message. The message does not alias body, so body can be reused.
func Decode(body []byte, types *protoregistry.Types) (*messages.Envelope, proto.Message, error) {
	h, n := protowire.ConsumeVarint(body)
	if n < 0 || h > MaxEnvelopeBytes || h > uint64(len(body)-n) {
		return nil, nil, fmt.Errorf("%w: bad envelope length", ErrBad)
	}
	env := new(messages.Envelope)
	if err := proto.Unmarshal(body[n:n+int(h)], env); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope: %v", ErrBad, err)
	}
	if env.TargetId == "" || len(env.TargetId) > MaxActorIDBytes ||
		env.Sender != nil && (len(env.Sender.Id) > MaxActorIDBytes || len(env.Sender.Address) > MaxActorIDBytes) {
		return nil, nil, fmt.Errorf("%w: bad target or sender", ErrBad)
	}
	name := protoreflect.FullName(env.TypeName)
	if !name.IsValid() {
		return nil, nil, fmt.Errorf("%w: type name %.64q", ErrBad, env.TypeName)
	}
	mt, err := types.FindMessageByName(name)
	if err != nil {
		return nil, nil, fmt.Errorf("%w %.64q", ErrUnknownType, env.TypeName)
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(body[n+int(h):], msg); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBad, env.TypeName, err)
	}
	return env, msg, nil
}

// forwardTypeName is the type of the one message decoded in place.
const forwardTypeName = "strata.Forward"

// forwardHiddenField is Forward.hidden's field number (inference.proto).
const forwardHiddenField = 5

// DecodeForwardInPlace decodes a frame body carrying a Forward, like
// Decode, except that the message's Hidden aliases body instead of
// being copied out of it: the activation is read where it arrived (a side
// channel's receive slot), so body must stay unchanged until the message
// is done with. The other fields (a few hundred bytes: route, tokens,
// sampling) are decoded as usual. ok is false when the frame carries some
// other type (then nothing is decoded).
func DecodeForwardInPlace(body []byte, types *protoregistry.Types, scratch []byte) (env *messages.Envelope, fw *messages.Forward, ok bool, err error) {
	h, n := protowire.ConsumeVarint(body)
	if n < 0 || h > MaxEnvelopeBytes || h > uint64(len(body)-n) {
		return nil, nil, true, fmt.Errorf("%w: bad envelope length", ErrBad)
	}
	env = new(messages.Envelope)
	if err := proto.Unmarshal(body[n:n+int(h)], env); err != nil {
		return nil, nil, true, fmt.Errorf("%w: envelope: %v", ErrBad, err)
	}
	if env.TypeName != forwardTypeName || env.System {
		return nil, nil, false, nil
	}
	if _, err := types.FindMessageByName(forwardTypeName); err != nil {
		return nil, nil, false, nil // Decode says why
	}
	if env.TargetId == "" || len(env.TargetId) > MaxActorIDBytes ||
		env.Sender != nil && (len(env.Sender.Id) > MaxActorIDBytes || len(env.Sender.Address) > MaxActorIDBytes) {
		return nil, nil, true, fmt.Errorf("%w: bad target or sender", ErrBad)
	}
	// Split the message: every field but hidden goes to scratch, to be
	// unmarshalled; hidden (the last one, as proto3 keeps the last of a
	// repeated scalar) is kept where it is.
	rest := body[n+int(h):]
	var hidden []byte
	for len(rest) > 0 {
		num, typ, k := protowire.ConsumeTag(rest)
		if k < 0 {
			return nil, nil, true, fmt.Errorf("%w: %s: bad field tag", ErrBad, env.TypeName)
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[k:])
		if m < 0 {
			return nil, nil, true, fmt.Errorf("%w: %s: bad field %d", ErrBad, env.TypeName, num)
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
		return nil, nil, true, fmt.Errorf("%w: %s: %v", ErrBad, env.TypeName, err)
	}
	fw.Hidden = hidden
	return env, fw, true, nil
}

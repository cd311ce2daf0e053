package tokenizer

import "unicode/utf8"

// Decoder turns a stream of token ids into text without ever splitting a
// UTF-8 character: bytes of a character that is still incomplete (an
// emoji spread over several byte tokens, say) are held back until the
// rest arrives. Bytes that cannot start or continue valid UTF-8 are passed
// through as they are, so nothing is lost. A Decoder is not safe for
// concurrent use.
type Decoder struct {
	t       *Tokenizer
	pending []byte // an incomplete UTF-8 sequence, at most 3 bytes

	// Special renders control and unknown tokens as their text (see
	// PieceSpecial) instead of "".
	Special bool
}

// NewDecoder returns a Decoder for t's tokens.
func (t *Tokenizer) NewDecoder() *Decoder {
	return &Decoder{t: t}
}

// Add appends id to the stream and returns the text that is now complete;
// it may be "".
func (d *Decoder) Add(id int) string {
	p := d.t.Piece(id)
	if d.Special {
		p = d.t.PieceSpecial(id)
	}
	if len(d.pending) == 0 && utf8.ValidString(p) {
		return p // the common case, without copying
	}
	buf := append(d.pending, p...)
	cut := completePrefix(buf)
	out := string(buf[:cut])
	d.pending = append(d.pending[:0:0], buf[cut:]...)
	return out
}

// Flush returns whatever is held back (an incomplete UTF-8 sequence at
// the end of the stream) and resets the Decoder.
func (d *Decoder) Flush() string {
	out := string(d.pending)
	d.pending = d.pending[:0]
	return out
}

// completePrefix returns the length of the longest prefix of b that does
// not end inside a UTF-8 sequence which could still be completed.
func completePrefix(b []byte) int {
	// An incomplete sequence is at most 3 bytes: a lead byte and up to two
	// continuation bytes.
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		c := b[i]
		if c < 0x80 {
			return len(b) // ASCII: nothing pending
		}
		if c >= 0xC0 { // a lead byte
			if utf8.FullRune(b[i:]) {
				return len(b) // complete, or invalid and never completable
			}
			return i
		}
	}
	return len(b)
}

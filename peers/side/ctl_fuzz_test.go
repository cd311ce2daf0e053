package side

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzReadCtl feeds a byte stream, as a peer would write it on a verbs
// stream, through readCtl with a budget: nothing may panic, a message is
// never longer than the limit, the budget counts no more than was read
// (rounded up to the growth steps) and is all given back when a read
// fails.
func FuzzReadCtl(f *testing.F) {
	msg := func(kind byte, payload []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{kind}, uint32(len(payload))), payload...)
	}
	f.Add(msg(ctlPing, make([]byte, 8)))
	f.Add(msg(ctlData, append(make([]byte, 8), "frame body"...)))
	f.Add(append(msg(ctlHello, []byte(`{"want":"tcp"}`)), msg(ctlData, make([]byte, 70000))...))
	f.Add(binary.BigEndian.AppendUint32([]byte{ctlData}, 1<<30)) // announced, never sent
	f.Fuzz(func(t *testing.T, stream []byte) {
		const limit = 1 << 20
		held := 0
		hold := func(n int) error {
			if held+n > 2*limit {
				return errors.New("over the budget")
			}
			held += n
			if held < 0 {
				t.Fatalf("budget below zero: %d", held)
			}
			return nil
		}
		r := bufio.NewReader(bytes.NewReader(stream))
		read := 0
		for {
			_, payload, err := readCtl(r, limit, hold)
			if err != nil {
				if held != 0 {
					t.Fatalf("%d bytes still counted after a failed read", held)
				}
				return
			}
			if len(payload) > limit {
				t.Fatalf("a payload of %d bytes past the limit %d", len(payload), limit)
			}
			read += 5 + len(payload)
			if read > len(stream) {
				t.Fatalf("read %d bytes of a %d-byte stream", read, len(stream))
			}
			if held != cap(payload) {
				t.Fatalf("%d bytes counted for a payload of capacity %d", held, cap(payload))
			}
			hold(-cap(payload))
		}
	})
}

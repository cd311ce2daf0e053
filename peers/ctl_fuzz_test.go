package peers

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math"
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
				return errOverBuffered
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

// FuzzWireDecode decodes any payload as each wire format: nothing may
// panic, a wrong length is an error, and whatever decodes is finite.
func FuzzWireDecode(f *testing.F) {
	f.Add(uint8(WireF32), uint16(3), make([]byte, 12))
	f.Add(uint8(WireF16), uint16(5), []byte{0, 0x7c, 0, 0x3c, 1, 2, 3, 4, 5, 6})
	f.Add(uint8(WireQ8_0), uint16(33), make([]byte, 2*q8Bytes))
	f.Fuzz(func(t *testing.T, wire uint8, count uint16, p []byte) {
		w := Wire(wire)
		x := make([]float32, int(count))
		err := w.decode(x, p)
		if err != nil {
			return
		}
		if !w.valid() || len(p) != w.bytes(len(x)) {
			t.Fatalf("wire %d: %d bytes for %d values decoded", wire, len(p), len(x))
		}
		for i, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("value %d is %v", i, v)
			}
		}
	})
}

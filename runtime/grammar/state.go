package grammar

import (
	"math/bits"
	"strconv"
)

// frame is the progress through one node; a state is a stack of frames,
// the innermost last. Frames are plain values, so a state is copied by
// copying its slice (the matcher's trie walk does that at every byte).
type frame struct {
	n  *node
	ph uint8 // phase, per kind (see step)
	// object: chosen property (-1 before the first); array: items so far;
	// string: characters so far; literal: bytes matched; integer,
	// number: digits in the current part.
	i    int32
	k    int32  // object: key bytes matched; string: hex digits of \\u left
	u8   int8   // string: UTF-8 continuation bytes still due
	neg  bool   // integer: a minus sign was written
	cand uint64 // object: candidate properties of the key; literal: candidate values
	v    int64  // integer: absolute value so far
}

// Results of offering a byte to the innermost frame.
const (
	rReject = iota
	rOK     // consumed
	rDone   // consumed, and the frame is complete
	rPass   // the frame is complete without the byte: pop it, offer the byte to its parent
	rPush   // push a frame for child and offer it the byte
)

// Object phases.
const (
	oOpen    = iota // expects '{'
	oFirst          // after '{': '}' or the first key's '"'
	oKey            // inside a listed key
	oColon          // expects ':'
	oFreeKey        // a free object's key string is on the stack; then ':'
	oValue          // expects the value
	oAfter          // after a value: ',' or '}'
	oNextKey        // after ',': the next key's '"'
)

func newFrame(n *node) frame { return frame{n: n, i: -1 * b2i(n.kind == kObject)} }

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// MaxDepth bounds the frames of a state: a JSON value nested deeper
// (each array or object level takes a frame or two) is not allowed to
// open another level. The matcher's trie walk copies the state at every
// edge, so without a bound each '[' a peer's accept list or the model
// wrote made every later mask dearer, without limit (one 19.5 MiB accept
// list took a shard's node to 4 GB and 30 s a token).
const MaxDepth = 64

// step offers byte b to state st and returns the new state (st's backing
// array is reused) and whether b is allowed.
func step(st []frame, b byte) ([]frame, bool) {
	for len(st) > 0 {
		f := &st[len(st)-1]
		r, child := f.consume(b)
		switch r {
		case rReject:
			return st, false
		case rOK:
			return st, true
		case rDone:
			return st[:len(st)-1], true
		case rPass:
			st = st[:len(st)-1]
		case rPush:
			if len(st) >= MaxDepth {
				return st, false
			}
			st = append(st, newFrame(child))
		}
	}
	return st, false // the document is complete: nothing may follow
}

// canEnd says whether the document may end in state st: every open
// frame is complete without another byte (a number at the root).
func canEnd(st []frame) bool {
	for i := len(st) - 1; i >= 0; i-- {
		if !st[i].complete() {
			return false
		}
	}
	return true
}

// complete says whether the frame could end here (only numbers and
// literals end without a closing byte of their own).
func (f *frame) complete() bool {
	switch f.n.kind {
	case kInteger:
		return (f.ph == 2 || f.ph == 3) && f.inRange()
	case kNumber:
		return f.ph == 2 || f.ph == 3 || f.ph == 5 || f.ph == 8
	case kLiteral:
		return f.litEnds()
	}
	return false
}

func (f *frame) consume(b byte) (int, *node) {
	n := f.n
	switch n.kind {
	case kAny:
		switch {
		case b == '{':
			f.n = anyObject
		case b == '[':
			f.n = anyArray
		case b == '"':
			f.n = anyString
		case b == '-' || (b >= '0' && b <= '9'):
			f.n = anyNumber
		case b == 't' || b == 'f' || b == 'n':
			f.n = anyLiterals
		default:
			return rReject, nil
		}
		*f = newFrame(f.n)
		return f.consume(b)

	case kObject:
		switch f.ph {
		case oOpen:
			if b != '{' {
				return rReject, nil
			}
			f.ph = oFirst
			return rOK, nil
		case oFirst, oNextKey:
			if b == '}' && f.ph == oFirst && f.canClose() {
				return rDone, nil
			}
			if b != '"' {
				return rReject, nil
			}
			if n.free {
				f.ph = oFreeKey
				return rPush, anyString
			}
			f.cand, f.k = f.keyCandidates(), 0
			if f.cand == 0 {
				return rReject, nil
			}
			f.ph = oKey
			return rOK, nil
		case oKey:
			if b == '"' {
				for c := f.cand; c != 0; c &= c - 1 {
					j := bits.TrailingZeros64(c)
					if len(n.props[j].key) == int(f.k) {
						f.i, f.ph = int32(j), oColon
						return rOK, nil
					}
				}
				return rReject, nil
			}
			var next uint64
			for c := f.cand; c != 0; c &= c - 1 {
				j := bits.TrailingZeros64(c)
				if key := n.props[j].key; int(f.k) < len(key) && key[f.k] == b {
					next |= 1 << j
				}
			}
			if next == 0 {
				return rReject, nil
			}
			f.cand = next
			f.k++
			return rOK, nil
		case oColon, oFreeKey:
			if b != ':' {
				return rReject, nil
			}
			f.ph = oValue
			return rOK, nil
		case oValue:
			f.ph = oAfter
			if n.free {
				return rPush, anyNode
			}
			return rPush, n.props[f.i].val
		case oAfter:
			switch {
			case b == '}' && f.canClose():
				return rDone, nil
			case b == ',' && (n.free || int(f.i)+1 < len(n.props)):
				f.ph = oNextKey
				return rOK, nil
			}
			return rReject, nil
		}

	case kArray:
		switch f.ph {
		case 0:
			if b != '[' {
				return rReject, nil
			}
			f.ph = 1
			return rOK, nil
		case 1: // after '['
			if b == ']' && n.minItems == 0 {
				return rDone, nil
			}
			if n.maxItems == 0 {
				return rReject, nil
			}
			f.ph, f.i = 2, f.i+1
			return rPush, n.items
		case 2: // after an item
			switch {
			case b == ']' && int(f.i) >= n.minItems:
				return rDone, nil
			case b == ',' && (n.maxItems < 0 || int(f.i) < n.maxItems):
				f.ph = 3
				return rOK, nil
			}
			return rReject, nil
		case 3: // after ','
			f.ph, f.i = 2, f.i+1
			return rPush, n.items
		}

	case kString:
		switch f.ph {
		case 0:
			if b != '"' {
				return rReject, nil
			}
			f.ph = 1
			return rOK, nil
		case 1:
			if f.u8 > 0 {
				if b < 0x80 || b > 0xBF {
					return rReject, nil
				}
				f.u8--
				return rOK, nil
			}
			switch {
			case b == '"':
				if int(f.i) < n.minLen {
					return rReject, nil
				}
				return rDone, nil
			case n.maxLen >= 0 && int(f.i) >= n.maxLen:
				return rReject, nil
			case b == '\\':
				f.ph = 2
			case b < 0x20:
				return rReject, nil
			case b < 0x80:
			case b >= 0xC2 && b <= 0xDF:
				f.u8 = 1
			case b >= 0xE0 && b <= 0xEF:
				f.u8 = 2
			case b >= 0xF0 && b <= 0xF4:
				f.u8 = 3
			default:
				return rReject, nil
			}
			f.i++ // a character begins (an escape counts as one)
			return rOK, nil
		case 2: // after '\\'
			switch b {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				f.ph = 1
				return rOK, nil
			case 'u':
				f.ph, f.k = 3, 4
				return rOK, nil
			}
			return rReject, nil
		case 3: // \\u hex digits
			if !isHex(b) {
				return rReject, nil
			}
			if f.k--; f.k == 0 {
				f.ph = 1
			}
			return rOK, nil
		}

	case kInteger:
		d := int64(b) - '0'
		isDigit := b >= '0' && b <= '9'
		switch f.ph {
		case 0:
			if b == '-' && n.lo < 0 {
				f.neg, f.ph = true, 1
				return rOK, nil
			}
			f.ph = 1
			return f.consume(b)
		case 1: // the first digit
			if !isDigit {
				return rReject, nil
			}
			if d == 0 {
				if f.neg || !f.viable(0, 1) {
					return rReject, nil
				}
				f.ph, f.i = 3, 1
				return rOK, nil
			}
			if !f.viable(d, 1) {
				return rReject, nil
			}
			f.v, f.i, f.ph = d, 1, 2
			return rOK, nil
		case 2:
			if isDigit && f.i < intDigits && f.viable(f.v*10+d, f.i+1) {
				f.v, f.i = f.v*10+d, f.i+1
				return rOK, nil
			}
			if f.inRange() {
				return rPass, nil
			}
			return rReject, nil
		case 3: // after a lone 0
			return rPass, nil
		}

	case kNumber:
		isDigit := b >= '0' && b <= '9'
		switch f.ph {
		case 0:
			f.ph = 1
			if b == '-' {
				return rOK, nil
			}
			return f.consume(b)
		case 1:
			switch {
			case b == '0':
				f.ph = 3
			case isDigit:
				f.ph, f.i = 2, 1
			default:
				return rReject, nil
			}
			return rOK, nil
		case 2, 3, 5, 8: // int digits, lone 0, fraction digits, exponent digits
			switch {
			case isDigit && f.ph != 3 && f.i < numDigits && !(f.ph == 8 && f.i >= 3):
				f.i++
				return rOK, nil
			case b == '.' && (f.ph == 2 || f.ph == 3):
				f.ph, f.i = 4, 0
				return rOK, nil
			case (b == 'e' || b == 'E') && f.ph != 8:
				f.ph, f.i = 6, 0
				return rOK, nil
			}
			return rPass, nil
		case 4: // after '.'
			if !isDigit {
				return rReject, nil
			}
			f.ph, f.i = 5, 1
			return rOK, nil
		case 6: // after 'e'
			if b == '+' || b == '-' {
				f.ph = 7
				return rOK, nil
			}
			f.ph = 7
			return f.consume(b)
		case 7:
			if !isDigit {
				return rReject, nil
			}
			f.ph, f.i = 8, 1
			return rOK, nil
		}

	case kLiteral:
		if f.ph == 0 {
			f.ph, f.cand = 1, 1<<len(n.lits)-1
			if len(n.lits) == 64 {
				f.cand = ^uint64(0)
			}
		}
		var next uint64
		for c := f.cand; c != 0; c &= c - 1 {
			j := bits.TrailingZeros64(c)
			if lit := n.lits[j]; int(f.i) < len(lit) && lit[f.i] == b {
				next |= 1 << j
			}
		}
		if next != 0 {
			f.cand = next
			f.i++
			return rOK, nil
		}
		if f.litEnds() {
			return rPass, nil
		}
		return rReject, nil
	}
	return rReject, nil
}

func isHex(b byte) bool {
	return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F')
}

// keyCandidates are the properties that may come next: each one from the
// one after the last written up to and including the next required one.
func (f *frame) keyCandidates() uint64 {
	var c uint64
	for j := int(f.i) + 1; j < len(f.n.props); j++ {
		c |= 1 << j
		if f.n.props[j].required {
			break
		}
	}
	return c
}

// canClose says whether no required property is left.
func (f *frame) canClose() bool {
	return f.n.free || f.n.reqTail[f.i+1] == 1
}

func (f *frame) litEnds() bool {
	if f.ph == 0 {
		return false
	}
	for c := f.cand; c != 0; c &= c - 1 {
		if len(f.n.lits[bits.TrailingZeros64(c)]) == int(f.i) {
			return true
		}
	}
	return false
}

func (f *frame) value() int64 {
	if f.neg {
		return -f.v
	}
	return f.v
}

func (f *frame) inRange() bool {
	v := f.value()
	return f.i > 0 && v >= f.n.lo && v <= f.n.hi
}

// viable says whether an integer whose digits so far (nd of them) read
// v, with the frame's sign, can still become one in [lo, hi].
func (f *frame) viable(v int64, nd int32) bool {
	lo, hi := v, v
	for k := nd; k <= intDigits; k++ {
		a, b := lo, hi
		if f.neg {
			a, b = -hi, -lo
		}
		if a <= f.n.hi && b >= f.n.lo {
			return true
		}
		if v == 0 || lo > maxInt/10 {
			return false
		}
		lo, hi = lo*10, hi*10+9
	}
	return false
}

// minRest is the fewest bytes that complete the document from state st.
func minRest(st []frame) int {
	total := 0
	for i := range st {
		total += st[i].minRest()
	}
	return total
}

// minRest is the fewest bytes that complete this frame (not counting
// the frames inside it on the stack, which count their own).
func (f *frame) minRest() int {
	n := f.n
	switch n.kind {
	case kAny:
		return n.min
	case kObject:
		if n.free {
			switch f.ph {
			case oOpen:
				return 2
			case oFirst:
				return 1
			case oFreeKey:
				return 3 // ":0}" after the key
			case oValue:
				return 2
			case oAfter:
				return 1
			case oNextKey:
				return 6 // "":0}
			}
		}
		switch f.ph {
		case oOpen:
			return n.min
		case oFirst, oNextKey:
			if f.ph == oFirst && f.canClose() {
				return 1
			}
			best := -1
			for c := f.keyCandidates(); c != 0; c &= c - 1 {
				j := bits.TrailingZeros64(c)
				p := n.props[j]
				if m := 1 + len(p.key) + 2 + p.val.min + n.reqTail[j+1]; best < 0 || m < best {
					best = m
				}
			}
			return best
		case oKey:
			best := -1
			for c := f.cand; c != 0; c &= c - 1 {
				j := bits.TrailingZeros64(c)
				p := n.props[j]
				if m := len(p.key) - int(f.k) + 2 + p.val.min + n.reqTail[j+1]; best < 0 || m < best {
					best = m
				}
			}
			return best
		case oColon:
			return 1 + n.props[f.i].val.min + n.reqTail[f.i+1]
		case oValue:
			return n.props[f.i].val.min + n.reqTail[f.i+1]
		case oAfter:
			return n.reqTail[f.i+1]
		}
	case kArray:
		item := n.items.min
		switch f.ph {
		case 0:
			return n.min
		case 1:
			if n.minItems == 0 {
				return 1
			}
			return n.minItems*item + n.minItems - 1 + 1
		case 2:
			return max(0, n.minItems-int(f.i))*(1+item) + 1
		case 3:
			return item + max(0, n.minItems-int(f.i)-1)*(1+item) + 1
		}
	case kString:
		left := max(0, n.minLen-int(f.i))
		switch f.ph {
		case 0:
			return n.min
		case 1:
			return int(f.u8) + left + 1
		case 2:
			return 1 + max(0, left-1) + 1
		case 3:
			return int(f.k) + left + 1
		}
	case kInteger:
		switch f.ph {
		case 0:
			return n.min
		case 1:
			if f.neg { // the digits of the negative value nearest zero
				return len(strconv.FormatInt(-min(n.hi, -1), 10))
			}
			return intMinLen(max(n.lo, 0), n.hi)
		case 2:
			if f.inRange() {
				return 0
			}
			lo, hi := f.v, f.v
			for k := 1; k <= intDigits; k++ {
				lo, hi = lo*10, hi*10+9
				a, b := lo, hi
				if f.neg {
					a, b = -hi, -lo
				}
				if a <= n.hi && b >= n.lo {
					return k
				}
			}
			return 0 // not reached: the prefix is viable
		case 3:
			return 0
		}
	case kNumber:
		switch f.ph {
		case 2, 3, 5, 8:
			return 0
		}
		return 1
	case kLiteral:
		if f.ph == 0 {
			return n.min
		}
		best := -1
		for c := f.cand; c != 0; c &= c - 1 {
			if m := len(n.lits[bits.TrailingZeros64(c)]) - int(f.i); best < 0 || m < best {
				best = m
			}
		}
		return best
	}
	return 0
}

package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Most pre-tokenizer expressions outside the GPT-2 and Llama 3 ones are a
// single character class with a quantifier, such as \p{N}+, [\r\n],
// \p{N}{1,3}, \s?\p{L}+ or \s+$. simpleRule matches those directly, with the same
// leftmost, greedy, backtracking result regexp2 (and std::regex) gives,
// instead of paying for a general backtracking engine. Which expressions
// qualify is decided by parseSimple on the translated expression; the
// tests check every one against regexp2.

// charClass is a bracket expression over runes of a rune view.
type charClass struct {
	neg    bool
	ascii  [2]uint64 // members below 0x80
	ranges [][2]rune // members from 0x80, inclusive ranges
}

func (c *charClass) addRange(lo, hi rune) {
	for ; lo <= hi && lo < 0x80; lo++ {
		c.ascii[lo>>6] |= 1 << (lo & 63)
	}
	if lo <= hi {
		c.ranges = append(c.ranges, [2]rune{lo, hi})
	}
}

// addSpace adds \s. On both rune views the only whitespace left is ASCII:
// non-ASCII whitespace was replaced by U+000B.
func (c *charClass) addSpace() {
	c.addRange('\t', '\r')
	c.addRange(' ', ' ')
}

func (c *charClass) has(r rune) bool {
	in := false
	if r >= 0 && r < 0x80 {
		in = c.ascii[r>>6]&(1<<(r&63)) != 0
	} else {
		for _, rg := range c.ranges {
			if r >= rg[0] && r <= rg[1] {
				in = true
				break
			}
		}
	}
	return in != c.neg
}

var spaceClass = func() *charClass { c := &charClass{}; c.addSpace(); return c }()

// simpleRule is prefix? class{min,max}, optionally anchored at the end of
// the fragment.
type simpleRule struct {
	prefix    *charClass // optional one-character prefix (\s? or " ?"), or nil
	class     *charClass
	min, max  int  // repetitions, greedy; max 0 for no limit
	anchored  bool // followed by \z
	collapsed bool
}

// parseSimple recognises the translated (regexp2-syntax) expressions
// simpleRule can run; ok is false for anything else.
func parseSimple(src string, collapsed bool) (r *simpleRule, ok bool) {
	r = &simpleRule{collapsed: collapsed}
	switch {
	case strings.HasPrefix(src, `\s?`):
		r.prefix, src = spaceClass, src[3:]
	case strings.HasPrefix(src, ` ?`):
		r.prefix = &charClass{}
		r.prefix.addRange(' ', ' ')
		src = src[2:]
	}
	atom, rest, ok := parseAtom(src)
	if !ok {
		return nil, false
	}
	r.class = atom
	switch {
	case strings.HasPrefix(rest, "+"):
		r.min, rest = 1, rest[1:]
	case strings.HasPrefix(rest, "{"):
		// {m,n} with 1 <= m <= n.
		end := strings.IndexByte(rest, '}')
		lo, hi, found := strings.Cut(rest[1:max(end, 1)], ",")
		m, err1 := strconv.Atoi(lo)
		n, err2 := strconv.Atoi(hi)
		if end < 0 || !found || err1 != nil || err2 != nil || m < 1 || n < m {
			return nil, false
		}
		r.min, r.max, rest = m, n, rest[end+1:]
	default:
		r.min = 1
		// [0-9][0-9][0-9]: the same atom repeated.
		text := src[:len(src)-len(rest)]
		for strings.HasPrefix(rest, text) {
			rest = rest[len(text):]
			r.min++
		}
		r.max = r.min
	}
	if rest == `\z` && r.prefix == nil && r.min == 1 && r.max == 0 {
		r.anchored, rest = true, ""
	}
	if rest != "" {
		return nil, false
	}
	return r, true
}

// parseAtom parses \s or a bracket expression at the start of src.
func parseAtom(src string) (c *charClass, rest string, ok bool) {
	if strings.HasPrefix(src, `\s`) {
		return spaceClass, src[2:], true
	}
	if !strings.HasPrefix(src, "[") {
		return nil, "", false
	}
	c = &charClass{}
	i := 1
	if strings.HasPrefix(src[i:], "^") {
		c.neg = true
		i++
	}
	// item reads one class member; isSet reports a multi-character escape.
	item := func() (r rune, isSet bool, ok bool) {
		if src[i] != '\\' {
			r, n := utf8.DecodeRuneInString(src[i:])
			i += n
			return r, false, r != utf8.RuneError
		}
		if i+1 >= len(src) {
			return 0, false, false
		}
		e := src[i+1]
		i += 2
		switch e {
		case 's':
			return 0, true, true
		case 'r':
			return '\r', false, true
		case 'n':
			return '\n', false, true
		case 't':
			return '\t', false, true
		case 'u':
			if i+4 > len(src) {
				return 0, false, false
			}
			v, err := strconv.ParseUint(src[i:i+4], 16, 32)
			i += 4
			return rune(v), false, err == nil
		}
		if e < 0x80 && !isWordByte(e) {
			return rune(e), false, true // an escaped punctuation character
		}
		return 0, false, false
	}
	for i < len(src) && src[i] != ']' {
		lo, isSet, ok := item()
		if !ok {
			return nil, "", false
		}
		if isSet {
			c.addSpace()
			continue
		}
		hi := lo
		if i+1 < len(src) && src[i] == '-' && src[i+1] != ']' {
			i++
			if hi, isSet, ok = item(); !ok || isSet || hi < lo {
				return nil, "", false
			}
		}
		c.addRange(lo, hi)
	}
	if i >= len(src) {
		return nil, "", false
	}
	return c, src[i+1:], true
}

func isWordByte(b byte) bool {
	return b == '_' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

// find returns the leftmost match in v at or after at.
func (r *simpleRule) find(v []rune, at int) (start, end int, ok bool) {
	n := len(v)
	if r.anchored {
		s := n
		for s > at && r.class.has(v[s-1]) {
			s--
		}
		return s, n, s < n
	}
	for i := at; i < n; i++ {
		if r.prefix != nil && r.prefix.has(v[i]) {
			if e := r.match(v, i+1); e > i+1 {
				return i, e, true
			}
		}
		if e := r.match(v, i); e > i {
			return i, e, true
		}
	}
	return 0, 0, false
}

// match returns the end of the class run the rule takes from i, or i.
func (r *simpleRule) match(v []rune, i int) int {
	end := len(v)
	if r.max > 0 {
		end = min(end, i+r.max)
	}
	e := i
	for e < end && r.class.has(v[e]) {
		e++
	}
	if e-i < r.min {
		return i
	}
	return e
}

func (r *simpleRule) split(t *text, frags, out []int) []int {
	view := t.wideRunes
	if r.collapsed {
		view = t.collapsedRunes
	}
	v := view()
	start := 0
	for _, n := range frags {
		sub := v[start : start+n]
		start += n
		at := 0
		for {
			s, e, ok := r.find(sub, at)
			if !ok {
				break
			}
			if s > at {
				out = append(out, s-at)
			}
			out = append(out, e-s)
			at = e
		}
		if at < n {
			out = append(out, n-at)
		}
	}
	return out
}

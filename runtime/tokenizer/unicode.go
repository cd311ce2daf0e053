package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// cptFlags is the per-code-point classification llama.cpp's unicode.cpp
// uses in its pre-tokenizers: exactly one general-category bit (as Python's
// `regex` module assigns them, which puts unassigned code points in \p{C})
// plus the White_Space property.
type cptFlags uint8

const (
	flagNumber      cptFlags = 1 << iota // \p{N}
	flagLetter                           // \p{L}
	flagSeparator                        // \p{Z}
	flagAccentMark                       // \p{M}
	flagPunctuation                      // \p{P}
	flagSymbol                           // \p{S}
	flagControl                          // \p{C}, including unassigned
	flagWhitespace                       // \s (Unicode White_Space)
)

func (f cptFlags) isNumber() bool     { return f&flagNumber != 0 }
func (f cptFlags) isLetter() bool     { return f&flagLetter != 0 }
func (f cptFlags) isWhitespace() bool { return f&flagWhitespace != 0 }

// classify computes the flags of r from Go's Unicode tables.
func classify(r rune) cptFlags {
	var f cptFlags
	switch {
	case unicode.IsLetter(r):
		f = flagLetter
	case unicode.IsNumber(r):
		f = flagNumber
	case unicode.Is(unicode.Z, r):
		f = flagSeparator
	case unicode.IsMark(r):
		f = flagAccentMark
	case unicode.IsPunct(r):
		f = flagPunctuation
	case unicode.IsSymbol(r):
		f = flagSymbol
	default:
		f = flagControl
	}
	if unicode.Is(unicode.White_Space, r) {
		f |= flagWhitespace
	}
	return f
}

var (
	bmpFlagsOnce sync.Once
	bmpFlags     []cptFlags // flags of U+0000..U+FFFF, built on first use (64 KiB)
)

// flagsOf returns the flags of r. Invalid runes (used here for bytes that
// are not valid UTF-8) classify as U+FFFD, a symbol: llama.cpp decodes
// each such byte to U+FFFD before splitting, which matters to expressions
// that name \p{S} (DeepSeek V3's).
func flagsOf(r rune) cptFlags {
	if r == invalidRune {
		r = utf8.RuneError
	}
	if r >= 0 && r < 0x10000 {
		bmpFlagsOnce.Do(func() {
			bmpFlags = make([]cptFlags, 0x10000)
			for c := range bmpFlags {
				bmpFlags[c] = classify(rune(c))
			}
		})
		return bmpFlags[r]
	}
	if r > unicode.MaxRune || r < 0 {
		return flagControl
	}
	return classify(r)
}

// cpt is one code point of the input and the byte offset just past it.
// Bytes that are not valid UTF-8 become one cpt each with r = invalidRune,
// so that every input byte survives pre-tokenization (llama.cpp rejects
// such input instead).
type cpt struct {
	r   rune
	end int
}

// invalidRune marks a byte that is not part of valid UTF-8. It is outside
// the Unicode range, so it never matches a character class.
const invalidRune rune = -1

// appendCodepoints appends the code points of s to out.
func appendCodepoints(out []cpt, s string) []cpt {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			out = append(out, cpt{invalidRune, i + 1})
			i++
			continue
		}
		out = append(out, cpt{r, i + n})
		i += n
	}
	return out
}

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length announced by
// a lead byte, judged by its top four bits only (continuation bytes count 1).
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// byteToRune and runeToByte are GPT-2's reversible byte-level encoding: the
// printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order, so that every token is printable text.
var (
	byteToRune [256]rune
	byteToUTF8 [256]string
	runeToByte = map[rune]byte{}
)

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = 256 + n
			n++
		}
		byteToRune[b] = r
		byteToUTF8[b] = string(r)
		runeToByte[r] = byte(b)
	}
}

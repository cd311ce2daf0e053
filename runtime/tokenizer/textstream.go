package tokenizer

import "strings"

// TextStream turns generated token ids into the text a user sees: pieces
// decoded without splitting UTF-8 characters, the dummy-prefix space
// after BOS dropped (as llama.cpp and llama2.c print it), and text that
// might begin a stop string held back until it is known not to.
type TextStream struct {
	tok        *Tokenizer
	dec        *Decoder
	stripSpace bool
	stops      []string
	pending    string
	done       bool
	text       strings.Builder
}

// NewTextStream starts a stream for a generation that follows prompt.
func NewTextStream(tok *Tokenizer, prompt []int, stops []string) *TextStream {
	s := &TextStream{tok: tok, dec: tok.NewDecoder()}
	s.stripSpace = len(prompt) > 0 && prompt[len(prompt)-1] == tok.BOS()
	for _, x := range stops {
		if x != "" {
			s.stops = append(s.stops, x)
		}
	}
	return s
}

// Add takes the next generated id and returns the text now safe to show,
// and whether generation must stop (an end-of-generation token, whose text
// is not shown, or a stop string, cut off with everything after it).
func (s *TextStream) Add(id int) (string, bool) {
	if s.done {
		return "", true
	}
	if s.tok.IsEOG(id) {
		s.done = true
		out := s.pending + s.dec.Flush()
		s.pending = ""
		s.text.WriteString(out)
		return out, true
	}
	piece := s.dec.Add(id)
	if s.stripSpace && piece != "" {
		piece = strings.TrimPrefix(piece, " ")
		s.stripSpace = false
	}
	s.pending += piece
	for _, x := range s.stops {
		if i := strings.Index(s.pending, x); i >= 0 {
			out := s.pending[:i]
			s.pending, s.done = "", true
			s.text.WriteString(out)
			return out, true
		}
	}
	// Keep the longest suffix that is a prefix of some stop string.
	keep := 0
	for _, x := range s.stops {
		for k := min(len(x)-1, len(s.pending)); k > keep; k-- {
			if strings.HasSuffix(s.pending, x[:k]) {
				keep = k
				break
			}
		}
	}
	out := s.pending[:len(s.pending)-keep]
	s.pending = s.pending[len(s.pending)-keep:]
	s.text.WriteString(out)
	return out, false
}

// Flush returns what is still held back (at the end of a generation that
// did not stop by itself).
func (s *TextStream) Flush() string {
	if s.done {
		return ""
	}
	out := s.pending + s.dec.Flush()
	s.pending = ""
	s.text.WriteString(out)
	return out
}

// Text is everything returned so far.
func (s *TextStream) Text() string { return s.text.String() }

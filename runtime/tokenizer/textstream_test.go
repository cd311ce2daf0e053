package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTextStreamStops(t *testing.T) {
	tok := loadVocab(t, filepath.Join("gguf", "stories260K.gguf"))
	s := NewTextStream(tok, []int{1, 400}, []string{"END", "xy"})
	var out strings.Builder
	// Feed byte tokens (<0xXX> is id 3+byte) spelling "abENcENDzz".
	for _, c := range []byte("abENcENDzz") {
		o, hit := s.Add(3 + int(c))
		out.WriteString(o)
		if hit {
			break
		}
	}
	if out.String() != "abENc" || s.Text() != "abENc" {
		t.Errorf("got %q", out.String())
	}
	if o, hit := s.Add(3 + 'q'); o != "" || !hit {
		t.Error("stream continued after a stop")
	}
	// End of generation stops without showing the token.
	s = NewTextStream(tok, []int{1}, nil)
	if o, hit := s.Add(tok.EOS()); o != "" || !hit {
		t.Errorf("EOS: %q %v", o, hit)
	}
}

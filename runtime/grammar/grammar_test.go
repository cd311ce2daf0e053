package grammar

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// accepts runs doc through a fresh state of s: whether every byte is
// allowed and the document may end there.
func accepts(s *Schema, doc string) bool {
	st := []frame{newFrame(s.root)}
	for i := 0; i < len(doc); i++ {
		var ok bool
		if st, ok = step(st, doc[i]); !ok {
			return false
		}
	}
	return canEnd(st)
}

const weather = `{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}`

func TestAccepts(t *testing.T) {
	for _, c := range []struct {
		schema string
		yes    []string
		no     []string
	}{
		{weather, []string{`{"city":"Paris","days":3}`, `{"city":"","days":7}`, `{"city":"a\"b\\u00e9\n","days":1}`, `{"city":"Zürich","days":2}`},
			[]string{`{"days":3,"city":"x"}`, `{"city":"x"}`, `{"city":"x","days":0}`, `{"city":"x","days":8}`, `{"city":"x","days":10}`,
				`{"city":"x","days":03}`, `{"city":"x","days":3,}`, `{ "city":"x","days":3}`, `{"city":"x","days":-1}`, `{"city":"x","days":3}x`,
				"{\"city\":\"a\x01\",\"days\":3}", "{\"city\":\"\xff\",\"days\":3}", `{"city":"x","days":3.5}`, `{"town":"x","days":3}`}},
		{`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"enum":["x","y",3]}},"required":["c"]}`,
			[]string{`{"c":"x"}`, `{"a":true,"c":3}`, `{"a":false,"b":null,"c":"y"}`, `{"b":null,"c":"x"}`},
			[]string{`{}`, `{"a":true}`, `{"c":"z"}`, `{"c":3,"a":true}`, `{"a":tru,"c":3}`, `{"c":30}`}},
		{`{"type":"array","items":{"type":"integer","minimum":-20,"maximum":-3},"minItems":1,"maxItems":3}`,
			[]string{`[-3]`, `[-20,-19,-5]`, `[-10]`}, []string{`[]`, `[-2]`, `[-21]`, `[-3,-3,-3,-3]`, `[3]`, `[-03]`}},
		{`{"type":"number"}`, []string{`0`, `-1.5e+10`, `3.25`, `12E3`}, []string{`01`, `1.`, `.5`, `-`, `1e`}},
		{`{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`, `"é\n"`}, []string{`"a"`, `"abcd"`}},
		{`{}`, []string{`{"x":[1,{"y":null}],"z":"w"}`, `[]`, `true`, `-0.5`, `"s"`}, []string{`{x:1}`, `[1,]`, `nul`}},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},"required":["o"]}`,
			[]string{`{"o":{"n":-42}}`}, []string{`{"o":{}}`, `{"o":{"n":1.0}}`}},
	} {
		s, err := Compile([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		for _, d := range c.yes {
			if !accepts(s, d) {
				t.Errorf("%s refuses %s", c.schema, d)
			}
			var v any
			if err := json.Unmarshal([]byte(d), &v); err != nil {
				t.Errorf("test document %s is not JSON", d)
			}
		}
		for _, d := range c.no {
			if accepts(s, d) {
				t.Errorf("%s accepts %s", c.schema, d)
			}
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, sc := range []string{`{"anyOf":[{"type":"string"}]}`, `{"type":["string","null"]}`, `{"type":"number","minimum":1}`,
		`{"type":"string","pattern":"a+"}`, `{"type":"integer","minimum":5,"maximum":4}`, `{"type":"object","properties":{"a":{}},"required":["b"]}`, `nope`} {
		if _, err := Compile([]byte(sc)); err == nil {
			t.Errorf("%s compiles", sc)
		}
	}
}

// toyVocab is a vocabulary of every single byte, some multi-byte pieces
// and an end-of-generation token (the last id).
type toyVocab struct{ pieces []string }

func (v toyVocab) VocabSize() int    { return len(v.pieces) + 1 }
func (v toyVocab) IsEOG(id int) bool { return id == len(v.pieces) }
func (v toyVocab) Piece(id int) string {
	if id < len(v.pieces) {
		return v.pieces[id]
	}
	return ""
}

func newToy() toyVocab {
	var p []string
	for b := 0; b < 256; b++ {
		p = append(p, string([]byte{byte(b)}))
	}
	p = append(p, `{"`, `city`, `":"`, `","`, `days`, `":`, `}`, ` the`, `Paris`, `"}`, `12`, `7}`, `,"days":5}`)
	return toyVocab{p}
}

// TestRandomWalkValidates: whatever the logits, sampling under the
// matcher with a budget yields a document that parses and validates,
// within the budget.
func TestRandomWalkValidates(t *testing.T) {
	toy := newToy()
	v := VocabOf(toy)
	s, err := Compile([]byte(weather))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, toy.VocabSize())
	for trial := 0; trial < 300; trial++ {
		budget := 22 + trial%40 // 21 bytes is the shortest document
		m := NewMatcher(s, v, budget)
		var out strings.Builder
		ended := false
		for n := 0; n < budget; n++ {
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * 3)
			}
			m.Mask(logits)
			best, bestL := -1, float32(math.Inf(-1))
			for i, l := range logits {
				if l > bestL {
					best, bestL = i, l
				}
			}
			if best < 0 {
				t.Fatalf("trial %d: every token masked after %q", trial, out.String())
			}
			m.Accept(best)
			if toy.IsEOG(best) {
				ended = true
				break
			}
			out.WriteString(toy.Piece(best))
		}
		var got struct {
			City *string
			Days *int
		}
		if err := json.Unmarshal([]byte(out.String()), &got); err != nil || got.City == nil || got.Days == nil || *got.Days < 1 || *got.Days > 7 {
			t.Fatalf("trial %d (budget %d, ended %v): %q does not validate: %v", trial, budget, ended, out.String(), err)
		}
	}
}

// A document nests at most MaxDepth frames deep: past it, no token that
// opens another level is allowed, a nested document can still be closed,
// and a Mask of the deepest state stays as cheap as a shallow one's
// times MaxDepth (attack 2 of the second hardening round: a 19.5 MiB
// accept list of '[' cost a shard 4 GB and 30 s a token).
func TestNestingBounded(t *testing.T) {
	toy := newToy()
	v := VocabOf(toy)
	m := NewMatcher(AnyJSON(), v, 0)
	open := int('[')
	for range 100_000 {
		m.Accept(open)
	}
	if len(m.st) > MaxDepth {
		t.Fatalf("a state of %d frames after 100,000 '['", len(m.st))
	}
	if !m.dead {
		t.Fatal("100,000 '[' accepted, past MaxDepth")
	}
	// Masked from a state at the bound, '[' is not allowed, ']' is.
	m = NewMatcher(AnyJSON(), v, 0)
	depth := 0
	logits := make([]float32, toy.VocabSize())
	for ; depth < 1000; depth++ {
		clear(logits)
		m.Mask(logits)
		if math.IsInf(float64(logits[open]), -1) {
			break
		}
		m.Accept(open)
	}
	if depth == 1000 || depth < MaxDepth/2 {
		t.Fatalf("'[' allowed %d levels deep (MaxDepth %d)", depth, MaxDepth)
	}
	if math.IsInf(float64(logits[']']), -1) {
		t.Fatalf("']' not allowed at depth %d", depth)
	}
	for range depth {
		m.Accept(']')
	}
	if m.dead || !m.Done() {
		t.Fatalf("%d nested arrays closed: dead %v, done %v", depth, m.dead, m.Done())
	}
}

// Nested minItems cannot overflow a document's shortest length (found by
// reading in the second hardening round: three levels of 2^20 items
// wrapped int64 to a small or negative length, and the budget check then
// allowed or refused the wrong tokens): a schema whose shortest document
// is longer than any answer is refused.
func TestHugeMinimumRefused(t *testing.T) {
	nested := `{"type":"integer"}`
	for range 4 {
		nested = `{"type":"array","minItems":1048576,"items":` + nested + `}`
	}
	if _, err := Compile([]byte(nested)); err == nil || !strings.Contains(err.Error(), "shortest document") {
		t.Fatalf("4 levels of 2^20 items: %v", err)
	}
	// A large but possible minimum still compiles.
	if _, err := Compile([]byte(`{"type":"array","minItems":1000,"items":{"type":"integer"}}`)); err != nil {
		t.Fatal(err)
	}
}

package grammar

import (
	"math"
	"slices"

	"strata/runtime/sample"
)

// Vocab is a vocabulary as the matcher needs it: each token's bytes in a
// trie, and which tokens end a generation. Build it once per tokenizer
// (VocabOf) and share it: it is read-only.
type Vocab struct {
	size   int
	pieces []string
	eog    []int32
	// The trie of token bytes, as flat arrays: node 0 is the root; the
	// edges of node x are edges[first[x]:first[x+1]], sorted by byte;
	// ends[endFirst[x]:endFirst[x+1]] are the tokens whose bytes end at x.
	first    []int32
	edges    []edge
	endFirst []int32
	ends     []int32
	depth    int // the longest token, in bytes
}

type edge struct {
	b     byte
	child int32
}

// Tokenizer is what VocabOf reads (a *tokenizer.Tokenizer).
type Tokenizer interface {
	VocabSize() int
	Piece(id int) string // the bytes a token adds to the text
	IsEOG(id int) bool
}

// VocabOf builds the token trie of tok. Tokens that add no bytes
// (control tokens) are never allowed, except the end-of-generation ones
// once the document is complete.
func VocabOf(tok Tokenizer) *Vocab {
	type tnode struct {
		kids map[byte]int32
		ends []int32
	}
	nodes := []tnode{{}}
	v := &Vocab{size: tok.VocabSize()}
	for id := 0; id < v.size; id++ {
		if tok.IsEOG(id) {
			v.eog = append(v.eog, int32(id))
			v.pieces = append(v.pieces, "")
			continue
		}
		p := tok.Piece(id)
		v.pieces = append(v.pieces, "")
		v.pieces[id] = p
		if p == "" {
			continue
		}
		v.depth = max(v.depth, len(p))
		x := int32(0)
		for i := 0; i < len(p); i++ {
			if nodes[x].kids == nil {
				nodes[x].kids = map[byte]int32{}
			}
			c, ok := nodes[x].kids[p[i]]
			if !ok {
				c = int32(len(nodes))
				nodes[x].kids[p[i]] = c
				nodes = append(nodes, tnode{})
			}
			x = c
		}
		nodes[x].ends = append(nodes[x].ends, int32(id))
	}
	v.first = make([]int32, len(nodes)+1)
	v.endFirst = make([]int32, len(nodes)+1)
	for x, nd := range nodes {
		for b := 0; b < 256; b++ {
			if c, ok := nd.kids[byte(b)]; ok {
				v.edges = append(v.edges, edge{byte(b), c})
			}
		}
		v.ends = append(v.ends, nd.ends...)
		v.first[x+1] = int32(len(v.edges))
		v.endFirst[x+1] = int32(len(v.ends))
	}
	return v
}

// Matcher constrains one generation to documents of a Schema. It is a
// sample.Constraint: Mask before each draw, Accept with the drawn token.
// Not safe for concurrent use.
type Matcher struct {
	v      *Vocab
	st     []frame
	budget int // tokens left; < 0: no budget
	// Scratch for the trie walk: the state at each depth.
	stack   [][]frame
	allowed []bool
	dead    bool
	peek    []frame // Allows' copy of the state
}

var _ sample.Lookahead = (*Matcher)(nil)

// NewMatcher starts a document of s over vocabulary v. maxTokens, when
// above 0, is the generation's token budget: tokens that would leave too
// few to finish the document are masked too.
func NewMatcher(s *Schema, v *Vocab, maxTokens int) *Matcher {
	m := &Matcher{v: v, st: []frame{newFrame(s.root)}, budget: -1, allowed: make([]bool, v.size)}
	if maxTokens > 0 {
		m.budget = maxTokens
	}
	m.stack = make([][]frame, v.depth+1)
	return m
}

// Done says whether the document is complete.
func (m *Matcher) Done() bool { return canEnd(m.st) }

// Mask sets the logits of tokens that cannot continue the document to
// -Inf. When the document may end, the end-of-generation tokens stay; when
// it is complete, only they do.
func (m *Matcher) Mask(logits []float32) {
	clear(m.allowed)
	n := 0 // tokens allowed, counted as they are marked: no second pass over the vocabulary looks for one
	if canEnd(m.st) {
		for _, t := range m.v.eog {
			m.allowed[t] = true
		}
		n = len(m.v.eog)
	}
	// The tokens left after this one must suffice for the shortest
	// ending; byte tokens write any byte, so bytes bound tokens.
	limit := math.MaxInt
	if m.budget >= 0 {
		limit = m.budget - 1
	}
	m.stack[0] = append(m.stack[0][:0], m.st...)
	n += m.walk(0, 0, limit)
	if limit != math.MaxInt && n == 0 {
		// Too few tokens left for the shortest ending counted in bytes:
		// longer tokens may still make it, so allow every valid one.
		m.walk(0, 0, math.MaxInt)
	}
	m.apply(logits)
}

// apply masks the logits of the tokens not in m.allowed.
func (m *Matcher) apply(logits []float32) {
	any := false
	for i := range logits {
		if i >= len(m.allowed) || !m.allowed[i] {
			logits[i] = float32(math.Inf(-1))
		} else {
			any = true
		}
	}
	if !any { // no way on (a vocabulary without a needed byte): let the model end it
		for _, t := range m.v.eog {
			if int(t) < len(logits) {
				logits[t] = 0
			}
		}
		m.dead = true
	}
}

// walk visits the trie below node x, whose bytes led to state
// m.stack[depth], marking the tokens that end at an allowed state, and
// returns how many it marked. A token ends at one node of the trie and
// the walk visits each node once, so none is counted twice.
func (m *Matcher) walk(x int32, depth, limit int) int {
	v := m.v
	n := 0
	for _, e := range v.edges[v.first[x]:v.first[x+1]] {
		next, ok := step(append(m.stack[depth+1][:0], m.stack[depth]...), e.b)
		m.stack[depth+1] = next
		if !ok {
			continue
		}
		if ends := v.ends[v.endFirst[e.child]:v.endFirst[e.child+1]]; len(ends) > 0 && minRest(next) <= limit {
			for _, t := range ends {
				m.allowed[t] = true
			}
			n += len(ends)
		}
		n += m.walk(e.child, depth+1, limit)
	}
	return n
}

// Allows returns how many of tokens, in order, could be drawn from here
// (sample.Lookahead): each must continue the document (an end-of-
// generation token only where it may end, and nothing after it) and,
// under a token budget, leave enough tokens for the shortest ending. It
// is never looser than Mask (whose fallback, when the budget is too
// tight for every token, allows more) and leaves the matcher as it was.
func (m *Matcher) Allows(tokens []int) int {
	if m.dead {
		return 0
	}
	st := append(m.peek[:0], m.st...)
	defer func() { m.peek = st[:0] }()
	budget := m.budget
	for i, t := range tokens {
		if slices.Contains(m.v.eog, int32(t)) {
			if canEnd(st) {
				return i + 1
			}
			return i
		}
		if t < 0 || t >= len(m.v.pieces) || m.v.pieces[t] == "" {
			return i
		}
		for _, b := range []byte(m.v.pieces[t]) {
			var ok bool
			if st, ok = step(st, b); !ok {
				return i
			}
		}
		if budget >= 0 {
			if minRest(st) > budget-1 {
				return i
			}
			budget = max(budget-1, 0)
		}
	}
	return len(tokens)
}

// Accept advances the document past token (the one drawn after Mask).
func (m *Matcher) Accept(token int) {
	if m.budget > 0 {
		m.budget--
	}
	if m.dead {
		return
	}
	p := ""
	if token >= 0 && token < len(m.v.pieces) {
		p = m.v.pieces[token]
	}
	for i := 0; i < len(p); i++ {
		var ok bool
		if m.st, ok = step(m.st, p[i]); !ok {
			m.dead = true
			return
		}
	}
}

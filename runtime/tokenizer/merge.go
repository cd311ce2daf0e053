package tokenizer

import "sync"

// This file holds the two merge loops, llama.cpp's llm_tokenizer_spm and
// llm_tokenizer_bpe sessions. Both keep the text as a linked list of
// symbols (byte ranges) and repeatedly merge the best adjacent pair found
// in a priority queue; a queued pair whose symbols have changed since it
// was queued is stale and skipped.

// symbol is a byte range text[start:start+n] in a doubly linked list; a
// symbol merged into its left neighbour keeps n = 0.
type symbol struct {
	start, n   int
	prev, next int
}

// prioritized is implemented by queue entries; a.before(b) means a is
// merged first.
type prioritized[T any] interface {
	before(other T) bool
}

func heapPush[T prioritized[T]](h []T, x T) []T {
	h = append(h, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop[T prioritized[T]](h []T) (T, []T) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].before(h[m]) {
			m = l
		}
		if r < len(h) && h[r].before(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}

// splitSymbols resets syms to one symbol per UTF-8 sequence of text, with
// sequence lengths taken from lead bytes as llama.cpp does (so invalid
// UTF-8 still splits, into runs of at most four bytes).
func splitSymbols[S string | []byte](syms []symbol, text S) []symbol {
	syms = syms[:0]
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		next := len(syms) + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: off, n: n, prev: len(syms) - 1, next: next})
		off += n
	}
	return syms
}

// merge joins syms[left] and its right neighbour syms[right].
func merge(syms []symbol, left, right int) {
	l, r := &syms[left], &syms[right]
	l.n += r.n
	r.n = 0
	l.next = r.next
	if r.next >= 0 {
		syms[r.next].prev = left
	}
}

// spmBigram is a candidate SentencePiece merge: the highest score first,
// then the leftmost.
type spmBigram struct {
	left, right int
	score       float32
	size        int
}

func (a spmBigram) before(b spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// spmSession holds scratch space reused across the fragments of one Encode.
type spmSession struct {
	syms  []symbol
	queue []spmBigram
}

// encode appends the tokens of text, whose spaces are already '▁'.
func (s *spmSession) encode(t *Tokenizer, text string, out []int) []int {
	s.syms = splitSymbols(s.syms, text)
	s.queue = s.queue[:0]
	for i := 1; i < len(s.syms); i++ {
		s.tryAdd(t, text, i-1, i)
	}
	for len(s.queue) > 0 {
		var b spmBigram
		b, s.queue = heapPop(s.queue)
		l, r := &s.syms[b.left], &s.syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		merge(s.syms, b.left, b.right)
		s.tryAdd(t, text, s.syms[b.left].prev, b.left)
		s.tryAdd(t, text, b.left, s.syms[b.left].next)
	}
	for i := 0; i != -1 && i < len(s.syms); i = s.syms[i].next {
		sym := s.syms[i]
		piece := text[sym.start : sym.start+sym.n]
		// Every merged symbol is a token by construction, so llama.cpp's
		// resegment reduces to: the token, or one byte token per byte.
		if id, ok := t.toID[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id := t.byteTok[piece[j]]; id != NoToken {
				out = append(out, id)
			}
		}
	}
	return out
}

func (s *spmSession) tryAdd(t *Tokenizer, text string, left, right int) {
	if left < 0 || right < 0 {
		return
	}
	start := s.syms[left].start
	size := s.syms[left].n + s.syms[right].n
	id, ok := t.toID[text[start:start+size]]
	if !ok {
		return
	}
	var score float32
	if t.v.Scores != nil {
		score = t.v.Scores[id]
	}
	s.queue = heapPush(s.queue, spmBigram{left: left, right: right, score: score, size: size})
}

// bpeBigram is a candidate BPE merge: the lowest rank first, then the
// leftmost.
type bpeBigram struct {
	left, right int
	rank        int
	size        int
}

func (a bpeBigram) before(b bpeBigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

// bpeSession holds scratch space reused across the words of one Encode.
type bpeSession struct {
	split splitScratch
	syms  []symbol
	queue []bpeBigram
	key   []byte
	word  []byte
}

// encode pre-tokenizes text and appends the tokens of every word.
func (s *bpeSession) encode(t *Tokenizer, text string, out []int) []int {
	start := 0
	for _, end := range t.pre.words(&s.split, text) {
		s.word = s.word[:0]
		for i := start; i < end; i++ {
			s.word = append(s.word, byteToUTF8[text[i]]...)
		}
		start = end
		out = s.encodeWord(t, s.word, out)
	}
	return out
}

// encodeWord merges one byte-level encoded word.
func (s *bpeSession) encodeWord(t *Tokenizer, word []byte, out []int) []int {
	if t.ignoreMg {
		if id, ok := t.toID[string(word)]; ok {
			return append(out, id)
		}
	}
	s.syms = splitSymbols(s.syms, word)
	s.queue = s.queue[:0]
	for i := 1; i < len(s.syms); i++ {
		s.tryAdd(t, word, i-1, i)
	}
	for len(s.queue) > 0 {
		var b bpeBigram
		b, s.queue = heapPop(s.queue)
		l, r := &s.syms[b.left], &s.syms[b.right]
		// The symbols' starts never move, so unchanged lengths mean
		// unchanged texts (llama.cpp compares the strings).
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		merge(s.syms, b.left, b.right)
		s.tryAdd(t, word, s.syms[b.left].prev, b.left)
		s.tryAdd(t, word, b.left, s.syms[b.left].next)
	}
	for _, sym := range s.syms {
		if sym.n == 0 {
			continue
		}
		piece := word[sym.start : sym.start+sym.n]
		if id, ok := t.toID[string(piece)]; ok {
			out = append(out, id)
			continue
		}
		// llama.cpp then tries every byte of the encoded text as a token
		// and drops the bytes that are not.
		for j := range piece {
			if id, ok := t.toID[string(piece[j:j+1])]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

func (s *bpeSession) tryAdd(t *Tokenizer, word []byte, left, right int) {
	if left < 0 || right < 0 {
		return
	}
	l, r := s.syms[left], s.syms[right]
	s.key = append(s.key[:0], word[l.start:l.start+l.n]...)
	s.key = append(s.key, ' ')
	s.key = append(s.key, word[r.start:r.start+r.n]...)
	rank, ok := t.ranks[string(s.key)]
	if !ok {
		return
	}
	s.queue = heapPush(s.queue, bpeBigram{left: left, right: right, rank: rank, size: l.n + r.n})
}

var (
	spmPool = sync.Pool{New: func() any { return new(spmSession) }}
	bpePool = sync.Pool{New: func() any { return new(bpeSession) }}
)

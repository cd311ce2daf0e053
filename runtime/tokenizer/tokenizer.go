package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Errors returned by New and FromGGUF wrap one of these.
var (
	// ErrUnknownModel is returned for a tokenizer.ggml.model other than
	// "llama" (SentencePiece) or "gpt2" (byte-level BPE).
	ErrUnknownModel = errors.New("tokenizer: unsupported tokenizer model")
	// ErrUnknownPre is returned for a tokenizer.ggml.pre value llama.cpp
	// does not know.
	ErrUnknownPre = errors.New("tokenizer: unknown pre-tokenizer")
	// ErrInvalidVocab is returned for inconsistent vocabulary data: no
	// tokens, arrays of different lengths, missing merges.
	ErrInvalidVocab = errors.New("tokenizer: invalid vocabulary")
)

// NoToken is the id of an absent special token.
const NoToken = -1

// TokenType is the GGUF tokenizer.ggml.token_type of a token.
type TokenType int32

// Token types, as numbered in GGUF (and llama.cpp's llama_token_type).
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// Tokenizer models (tokenizer.ggml.model).
const (
	ModelSPM = "llama" // SentencePiece with byte fallback
	ModelBPE = "gpt2"  // byte-level BPE
)

// Vocab is the resolved vocabulary a Tokenizer is built from: what
// FromGGUF reads from tokenizer.ggml.*, with llama.cpp's per-model defaults
// already applied. Special token ids use NoToken (-1) for "none"; since 0
// is a valid id, start from DefaultVocab rather than a zero Vocab.
type Vocab struct {
	Model string // ModelSPM or ModelBPE
	Pre   string // BPE pre-tokenizer preset (tokenizer.ggml.pre); "" means "default"; ignored for SPM
	Name  string // general.name; only consulted for llama.cpp's Phi-3 special-token stripping rule

	Tokens []string    // token texts, indexed by id; required
	Scores []float32   // SPM merge priorities, same length as Tokens; nil = all 0
	Types  []TokenType // same length as Tokens; nil = all TypeNormal
	Merges []string    // BPE merges "left right", highest priority first; required for BPE

	// Special tokens. EOT, EOM and the FIM tokens are looked up by their
	// usual texts (<|eot_id|>, <|im_end|>, <|fim_prefix|>, ...) when NoToken.
	BOS, EOS, EOT, EOM, UNK, SEP, PAD, MASK        int
	FIMPre, FIMSuf, FIMMid, FIMPad, FIMRep, FIMSep int

	AddBOS         bool // Encode with addSpecial prepends BOS
	AddEOS         bool // Encode with addSpecial appends EOS
	AddSpacePrefix bool // SPM: prepend a space to text at the start and after a special token

	ChatTemplate string // tokenizer.chat_template, passed through
}

// DefaultVocab returns the Vocab llama.cpp assumes for a tokenizer model
// and pre-tokenizer before reading any tokenizer.ggml.* key: for SPM
// ("llama") BOS 1, EOS 2, UNK 0, AddBOS and AddSpacePrefix; for BPE
// ("gpt2") BOS = EOS = 11 and AddBOS only for the presets that ask for it
// (llama3, tekken, chameleon; chatglm-bpe has no BOS). Every other special
// id is NoToken. The caller fills in Tokens, Scores, Types and Merges.
func DefaultVocab(model, pre string) (Vocab, error) {
	v := Vocab{Model: model, Pre: pre,
		BOS: NoToken, EOS: NoToken, EOT: NoToken, EOM: NoToken, UNK: NoToken, SEP: NoToken, PAD: NoToken, MASK: NoToken,
		FIMPre: NoToken, FIMSuf: NoToken, FIMMid: NoToken, FIMPad: NoToken, FIMRep: NoToken, FIMSep: NoToken,
	}
	switch model {
	case ModelSPM:
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS, v.AddSpacePrefix = true, true
	case ModelBPE:
		p, err := lookupPreset(pre)
		if err != nil {
			return Vocab{}, err
		}
		v.BOS, v.EOS = 11, 11
		if p.noBOS {
			v.BOS = NoToken
		}
		v.AddBOS = p.addBOS
	default:
		return Vocab{}, fmt.Errorf("%w: %q (want %q or %q)", ErrUnknownModel, model, ModelSPM, ModelBPE)
	}
	return v, nil
}

// Token attributes (llama.cpp's llama_token_attr): one type bit plus the
// strip bits some special tokens carry.
type attr uint16

const (
	attrUndefined attr = 0
	attrUnknown   attr = 1 << 0
	attrUnused    attr = 1 << 1
	attrNormal    attr = 1 << 2
	attrControl   attr = 1 << 3
	attrUserDef   attr = 1 << 4
	attrByte      attr = 1 << 5
	attrLStrip    attr = 1 << 7
	attrRStrip    attr = 1 << 8
)

func attrOf(t TokenType) attr {
	switch t {
	case TypeNormal:
		return attrNormal
	case TypeUnknown:
		return attrUnknown
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDef
	case TypeUnused:
		return attrUnused
	case TypeByte:
		return attrByte
	}
	return attrUndefined
}

// Tokenizer encodes text to token ids and back, bit-compatible with
// llama.cpp's llama_tokenize for the SPM ("llama") and BPE ("gpt2")
// models. It is immutable after construction and safe for concurrent use.
type Tokenizer struct {
	v        Vocab
	spm      bool
	attrs    []attr
	toID     map[string]int // token text -> id (a later duplicate wins; llama.cpp rejects duplicates)
	ranks    map[string]int // BPE merge "left right" -> rank (first occurrence wins)
	pre      *pretokenizer
	ignoreMg bool
	special  []int // control, user-defined and unknown tokens, longest text first
	eog      map[int]bool
	pieces   []string // Piece(id), precomputed
	maxBytes int      // longest token text
	byteTok  [256]int // SPM byte-fallback token per byte value; UNK when absent
}

// New builds a Tokenizer from a resolved vocabulary.
func New(v Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrInvalidVocab)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("%w: %d scores for %d tokens", ErrInvalidVocab, len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("%w: %d token types for %d tokens", ErrInvalidVocab, len(v.Types), n)
	}
	t := &Tokenizer{v: v}
	switch v.Model {
	case ModelSPM:
		t.spm = true
	case ModelBPE:
		if v.Merges == nil {
			return nil, fmt.Errorf("%w: BPE vocabulary without merges", ErrInvalidVocab)
		}
		p, err := lookupPreset(v.Pre)
		if err != nil {
			return nil, err
		}
		if t.pre, err = newPretokenizer(p); err != nil {
			return nil, err
		}
		t.ignoreMg = p.ignoreMerges
	default:
		return nil, fmt.Errorf("%w: %q (want %q or %q)", ErrUnknownModel, v.Model, ModelSPM, ModelBPE)
	}
	// Copy the slices the tokenizer keeps so the caller may reuse theirs.
	t.v.Tokens = slices.Clone(v.Tokens)
	t.v.Scores = slices.Clone(v.Scores)
	t.v.Merges = nil
	t.v.Types = nil

	t.toID = make(map[string]int, n)
	t.attrs = make([]attr, n)
	for id, s := range t.v.Tokens {
		if s == "" {
			s = "[EMPTY_" + strconv.Itoa(id) + "]"
			t.v.Tokens[id] = s
		}
		t.toID[s] = id
		t.maxBytes = max(t.maxBytes, len(s))
		t.attrs[id] = attrNormal
		if v.Types != nil {
			t.attrs[id] = attrOf(v.Types[id])
		}
	}
	if !t.spm {
		t.ranks = make(map[string]int, len(v.Merges))
		for i, m := range v.Merges {
			if strings.IndexByte(m[min(1, len(m)):], ' ') < 0 {
				m = " " // llama.cpp files such a line under ("", ""), which never matches
			}
			if _, dup := t.ranks[m]; !dup {
				t.ranks[m] = i
			}
		}
	}
	for _, p := range []*int{&t.v.BOS, &t.v.EOS, &t.v.EOT, &t.v.EOM, &t.v.UNK, &t.v.SEP, &t.v.PAD, &t.v.MASK,
		&t.v.FIMPre, &t.v.FIMSuf, &t.v.FIMMid, &t.v.FIMPad, &t.v.FIMRep, &t.v.FIMSep} {
		if *p < 0 || *p >= n {
			*p = NoToken
		}
	}
	t.findSpecialByText()
	t.setStripAttrs()

	for id, a := range t.attrs {
		if a&(attrControl|attrUserDef|attrUnknown) != 0 {
			t.special = append(t.special, id)
		}
	}
	// llama.cpp sorts by length only (std::sort, unstable); ties go to the
	// lower id here so that the result is deterministic.
	slices.SortStableFunc(t.special, func(a, b int) int { return len(t.v.Tokens[b]) - len(t.v.Tokens[a]) })

	if t.spm {
		for b := range 256 {
			t.byteTok[b] = t.spmByteToken(byte(b))
		}
	}
	t.pieces = make([]string, n)
	for id := range t.pieces {
		t.pieces[id] = t.piece(id, false)
	}
	return t, nil
}

// eogTexts are the texts llama.cpp treats as end of generation ([EOT] and
// [EOS] are Kimi K2's). llama.cpp also lists some whose handling comes with
// per-model exceptions (gpt-oss's <|return|>, Gemma 4's <turn|>, </s>);
// those are left out here.
var eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
	"<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<｜end▁of▁sentence｜>", "[e~["}

// findSpecialByText fills unset EOT/EOM/FIM ids from well-known token
// texts, marks those tokens as control, and builds the end-of-generation
// set, following llama_vocab::impl::load.
func (t *Tokenizer) findSpecialByText() {
	byText := []struct {
		id    *int
		texts []string
	}{
		{&t.v.EOT, []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
		{&t.v.EOM, []string{"<|eom_id|>"}},
		{&t.v.FIMPre, []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
		{&t.v.FIMSuf, []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
		{&t.v.FIMMid, []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}},
		{&t.v.FIMPad, []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
		{&t.v.FIMRep, []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
		{&t.v.FIMSep, []string{"<|file_sep|>"}},
	}
	for _, s := range byText {
		if *s.id != NoToken {
			continue
		}
		// llama.cpp walks a hash map, so which of several candidates wins
		// is unspecified there; the lowest id wins here.
		for _, text := range s.texts {
			if id, ok := t.toID[text]; ok && (*s.id == NoToken || id < *s.id) {
				*s.id = id
			}
		}
		if *s.id != NoToken {
			t.attrs[*s.id] = t.attrs[*s.id]&^(attrNormal|attrUserDef|attrUnknown|attrUnused|attrByte) | attrControl
		}
	}
	t.eog = map[int]bool{}
	for _, id := range []int{t.v.FIMPad, t.v.FIMRep, t.v.FIMSep, t.v.EOS, t.v.EOT, t.v.EOM} {
		if id != NoToken {
			t.eog[id] = true
		}
	}
	for _, text := range eogTexts {
		if id, ok := t.toID[text]; ok {
			t.eog[id] = true
			t.attrs[id] = t.attrs[id]&^(attrNormal|attrUserDef|attrUnknown|attrUnused|attrByte) | attrControl
		}
	}
}

// setStripAttrs applies llama.cpp's per-model whitespace stripping around
// special tokens (the only ones it knows: jina-v2 <mask>, Phi-3).
func (t *Tokenizer) setStripAttrs() {
	set := func(text string, a attr, on bool) {
		if id, ok := t.toID[text]; ok {
			if on {
				t.attrs[id] |= a
			} else {
				t.attrs[id] &^= a
			}
		}
	}
	name := strings.ToLower(t.v.Name)
	switch {
	case strings.Contains(t.v.Pre, "jina-v2-de") || strings.Contains(t.v.Pre, "jina-v2-es") || strings.Contains(t.v.Pre, "jina-v2-code"):
		set("<mask>", attrLStrip, true)
	case strings.Contains(name, "phi-3") || strings.Contains(name, "phi3"):
		for id, a := range t.attrs {
			if a&(attrControl|attrUserDef|attrUnknown) != 0 {
				t.attrs[id] |= attrRStrip
			}
		}
		set("</s>", attrRStrip, true)
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			set(s, attrRStrip, false)
		}
	}
}

// spmByteToken is llama.cpp's byte_to_token for SPM: the <0xXX> token, else
// the one-byte token, else (where llama.cpp throws) UNK.
func (t *Tokenizer) spmByteToken(b byte) int {
	const hex = "0123456789ABCDEF"
	if id, ok := t.toID[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
		return id
	}
	if id, ok := t.toID[string([]byte{b})]; ok {
		return id
	}
	return t.v.UNK
}

// Model returns tokenizer.ggml.model: ModelSPM or ModelBPE.
func (t *Tokenizer) Model() string { return t.v.Model }

// Pre returns tokenizer.ggml.pre as given ("" when absent). Only BPE
// vocabularies use it.
func (t *Tokenizer) Pre() string { return t.v.Pre }

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.v.Tokens) }

// BOS returns the beginning-of-sequence token id, or NoToken.
func (t *Tokenizer) BOS() int { return t.v.BOS }

// EOS returns the end-of-sequence token id, or NoToken.
func (t *Tokenizer) EOS() int { return t.v.EOS }

// EOT returns the end-of-turn token id (<|eot_id|>, <|im_end|>, ...), or NoToken.
func (t *Tokenizer) EOT() int { return t.v.EOT }

// UNK returns the unknown token id, or NoToken.
func (t *Tokenizer) UNK() int { return t.v.UNK }

// PAD returns the padding token id, or NoToken.
func (t *Tokenizer) PAD() int { return t.v.PAD }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.v.AddBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.v.AddEOS }

// ChatTemplate returns tokenizer.chat_template, or "".
func (t *Tokenizer) ChatTemplate() string { return t.v.ChatTemplate }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, the FIM
// pad/repo/file-separator tokens, and every token whose text is one of
// <|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>,
// <|eom_id|>, <EOT> (llama.cpp's special_eog_ids).
func (t *Tokenizer) IsEOG(id int) bool { return t.eog[id] }

// IsControl reports whether id is a control token (BOS, EOS, <|im_start|>,
// ...), after llama.cpp's promotion of end-of-turn-looking tokens.
func (t *Tokenizer) IsControl(id int) bool {
	return id >= 0 && id < len(t.attrs) && t.attrs[id]&attrControl != 0
}

// Token returns the raw vocabulary text of id (SPM "▁Hello", GPT-2
// "ĠHello", "<|im_start|>"), or "" when id is out of range.
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.v.Tokens) {
		return ""
	}
	return t.v.Tokens[id]
}

// TokenID returns the id of the token whose vocabulary text is exactly s.
func (t *Tokenizer) TokenID(s string) (int, bool) {
	id, ok := t.toID[s]
	return id, ok
}

// Piece returns the bytes id contributes to decoded text: SPM '▁' becomes
// ' ' and byte tokens <0xXX> that byte; GPT-2 byte-level characters map
// back to bytes; user-defined tokens are their text; control, unknown and
// unused tokens, and ids out of range, are "". The result need not be
// valid UTF-8 (see Decoder).
func (t *Tokenizer) Piece(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// PieceSpecial is Piece except that control and unknown tokens render as
// their text ("<s>", "<|im_end|>"), as llama.cpp does with special=true.
func (t *Tokenizer) PieceSpecial(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	if t.attrs[id]&(attrControl|attrUnknown) != 0 {
		return t.v.Tokens[id]
	}
	return t.pieces[id]
}

// piece is llama.cpp's token_to_piece without lstrip.
func (t *Tokenizer) piece(id int, special bool) string {
	a := t.attrs[id]
	text := t.v.Tokens[id]
	if a&(attrControl|attrUnknown) != 0 {
		if special {
			return text
		}
		return ""
	}
	if a&attrUserDef != 0 {
		return text
	}
	if t.spm {
		switch {
		case a&attrNormal != 0:
			return strings.ReplaceAll(text, "▁", " ")
		case a&attrByte != 0:
			// "<0xXX>"; llama.cpp reads the two hex digits at offset 3.
			if len(text) >= 5 {
				if b, err := strconv.ParseUint(text[3:5], 16, 8); err == nil {
					return string([]byte{byte(b)})
				}
			}
			return ""
		}
		return ""
	}
	if a&attrNormal != 0 {
		return decodeByteLevel(text)
	}
	return ""
}

// decodeByteLevel maps GPT-2 byte-level text back to bytes. A character
// outside the byte alphabet (llama.cpp writes "[UNK_BYTE_0x…]" for it) is
// kept as its UTF-8 encoding.
func decodeByteLevel(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if c, ok := runeToByte[r]; ok {
			b = append(b, c)
		} else {
			b = append(b, string(r)...)
		}
	}
	return string(b)
}

// Decode concatenates the pieces of ids (see Piece). It is faithful to the
// token stream: unlike llama.cpp's llama_detokenize it does not drop the
// leading space an SPM vocabulary's dummy prefix produces ("▁Hello" decodes
// to " Hello"; callers that print llama2.c-style strip one leading space
// from the first piece after BOS themselves), and it does not apply the
// "clean up tokenization spaces" rewrite (" ," -> ",") some BPE
// vocabularies request, which is lossy. Control tokens decode to "".
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(t.Piece(id))
	}
	return b.String()
}

// fragment kinds of the special-token partition.
type part struct {
	tok        int // token id, or NoToken for raw text
	start, end int // byte range of raw text
}

// partition splits text around special tokens, as llama.cpp's
// tokenizer_st_partition: user-defined tokens always, control and unknown
// tokens only when parseSpecial. Longer tokens are matched first.
func (t *Tokenizer) partition(text string, parseSpecial bool) []part {
	parts := []part{{NoToken, 0, len(text)}}
	for _, id := range t.special {
		a := t.attrs[id]
		if !parseSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.v.Tokens[id]
		if !strings.Contains(text, tok) {
			continue
		}
		var next []part
		changed := false
		for _, p := range parts {
			if p.tok != NoToken {
				next = append(next, p)
				continue
			}
			at := p.start
			for at < p.end {
				i := strings.Index(text[at:p.end], tok)
				if i < 0 {
					break
				}
				m := at + i
				changed = true
				left := m
				if a&attrLStrip != 0 {
					for left > at && isSpace(text[left-1]) {
						left--
					}
				}
				if left > at {
					next = append(next, part{NoToken, at, left})
				}
				next = append(next, part{tok: id})
				at = m + len(tok)
				if a&attrRStrip != 0 {
					for at < p.end && isSpace(text[at]) {
						at++
					}
				}
			}
			if at < p.end {
				next = append(next, part{NoToken, at, p.end})
			}
		}
		if changed {
			parts = next
		}
	}
	return parts
}

// isSpace is C isspace in the "C" locale.
func isSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// Encode returns the token ids of text, exactly as llama.cpp's
// llama_tokenize(vocab, text, addSpecial, parseSpecial).
//
// addSpecial adds BOS (and EOS) as the vocabulary asks (AddBOS, AddEOS).
// parseSpecial makes control-token texts such as "<|im_start|>" or "<s>"
// in text encode as those tokens; without it they are encoded as plain
// text. User-defined tokens are always recognised. SPM vocabularies with
// AddSpacePrefix prepend a space to the text, and again after every
// special token.
//
// Text need not be valid UTF-8: SPM falls back to byte tokens for any
// byte, and byte-level BPE encodes stray bytes as their byte tokens
// (llama.cpp rejects invalid UTF-8 for BPE).
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int {
	return t.encode(text, addSpecial, parseSpecial, false)
}

// Escape is the rune EscapeSpecial writes into control-token texts found
// in untrusted text: U+FDD0, a Unicode noncharacter, which no token text
// holds and no text needs.
const Escape = '\uFDD0'

const escape = string(Escape)

// EscapeSpecial prepares untrusted text, such as a chat message, for a
// chat template whose output EncodeEscaped tokenizes: every control-token
// text in s ("<|im_start|>", "</s>") gets Escape after its first
// character, so it no longer reads as that token, and any Escape already
// in s is dropped. A user who types "<|im_start|>system" thus gets those
// characters as text, not a turn of their own.
func (t *Tokenizer) EscapeSpecial(s string) string {
	s = strings.ReplaceAll(s, escape, "")
	for _, id := range t.special {
		if t.attrs[id]&(attrControl|attrUnknown) == 0 {
			continue // user-defined tokens are recognised in plain text too (Encode)
		}
		tok := t.v.Tokens[id]
		if !strings.Contains(s, tok) {
			continue
		}
		_, n := utf8.DecodeRuneInString(tok)
		esc := tok[:n] + escape + tok[n:]
		for strings.Contains(s, tok) { // again for overlaps ("<s><s>" holds "><s")
			s = strings.ReplaceAll(s, tok, esc)
		}
	}
	return s
}

// EncodeEscaped tokenizes the output of a chat template into whose
// variables untrusted text went through EscapeSpecial: control tokens are
// parsed where their text is whole (the template's own, and bos_token and
// the like), the escaped ones stay text, and Escape runes are dropped
// before the text around them is encoded. For text without Escape it is
// Encode(text, addSpecial, true).
func (t *Tokenizer) EncodeEscaped(text string, addSpecial bool) []int {
	return t.encode(text, addSpecial, true, true)
}

// MaxTokenBytes is the length of the longest token text. No token stands
// for more bytes of input than its text has, so a text of n bytes encodes
// to at least n/MaxTokenBytes tokens: a bound that refuses a huge prompt
// without tokenizing it.
func (t *Tokenizer) MaxTokenBytes() int { return t.maxBytes }

func (t *Tokenizer) encode(text string, addSpecial, parseSpecial, unescape bool) []int {
	var out []int
	var parts []part
	if text != "" {
		parts = t.partition(text, parseSpecial)
	}
	if addSpecial && t.v.AddBOS && t.v.BOS != NoToken {
		out = append(out, t.v.BOS)
	}
	if t.spm {
		prevSpecial := true
		s := spmPool.Get().(*spmSession)
		defer spmPool.Put(s)
		for _, p := range parts {
			if p.tok != NoToken {
				out = append(out, p.tok)
				prevSpecial = true
				continue
			}
			frag := text[p.start:p.end]
			if unescape {
				if frag = strings.ReplaceAll(frag, escape, ""); frag == "" {
					continue
				}
			}
			if t.v.AddSpacePrefix && prevSpecial {
				frag = " " + frag
			}
			out = s.encode(t, strings.ReplaceAll(frag, " ", "▁"), out)
			prevSpecial = false
		}
	} else {
		s := bpePool.Get().(*bpeSession)
		defer bpePool.Put(s)
		for _, p := range parts {
			if p.tok != NoToken {
				out = append(out, p.tok)
				continue
			}
			frag := text[p.start:p.end]
			if unescape {
				frag = strings.ReplaceAll(frag, escape, "")
			}
			out = s.encode(t, frag, out)
		}
	}
	if addSpecial && t.v.AddEOS && t.v.EOS != NoToken {
		out = append(out, t.v.EOS)
	}
	return out
}

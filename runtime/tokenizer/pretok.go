package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// This file is the BPE pre-tokenizer: it cuts text into words before the
// merges run. It follows llama.cpp's unicode_regex_split: a preset is a
// list of regular expressions applied in order, each one refining the
// fragments left by the previous one (a match and the unmatched stretches
// between matches all become fragments; no text is ever dropped).
//
// The expressions llama.cpp implements by hand (they are linear and it uses
// them instead of the regex) are implemented by hand here too, with the
// same results: GPT-2's, Llama 3's, Qwen2's (the Llama 3 splitter with
// single digits) and Kimi K2's, whose preset is the placeholder \p{Han}+
// that stands for the whole Kimi expression (see kimiRule). Single-class
// expressions such as \p{N}+ have a fast path (simple.go). Every other
// expression runs through a backtracking engine (regexp2, standing in for
// C++ std::regex in ECMAScript mode) over one of two rune views of the
// text, as llama.cpp does:
//
//   - "collapsed", when the expression names a category llama.cpp knows
//     (\p{N}, \p{L}, \p{P}, \p{M}, \p{S}, \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm},
//     \p{Lo}; the letter subclasses all mean \p{L}): every non-ASCII code
//     point is replaced by one stand-in per category (number U+00D1, letter
//     U+00D2, punctuation U+00D3, mark U+00D4, symbol U+00D5, whitespace
//     U+000B, anything else U+00D0) and each \p{X} in the expression by the
//     stand-in plus the ASCII members of X.
//   - "wide" otherwise: the code points themselves, non-ASCII whitespace
//     replaced by U+000B.

// Expressions with a hand-written splitter in llama.cpp (unicode.cpp).
const (
	reGPT2       = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	reLlama3     = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reLlama3Orig = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2      = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen35     = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	rePoro       = ` ?[^(\s|.,!?…。，、।۔،)]+`
	// reKimiK2 is not Kimi K2's expression but llama.cpp's placeholder for
	// it: the preset's only entry, which selects the hand-written splitter.
	reKimiK2 = `\p{Han}+`
)

// preset is one llama.cpp pre-tokenizer type (LLAMA_VOCAB_PRE_TYPE_*).
type preset struct {
	name         string   // the canonical tokenizer.ggml.pre value
	exprs        []string // applied in order
	ignoreMerges bool     // a word that is itself a token is not merged (Llama 3)
	addBOS       bool     // default for tokenizer.ggml.add_bos_token
	noBOS        bool     // the preset has no BOS token (chatglm-bpe)
}

var (
	presetDefault = preset{name: "default", exprs: []string{
		`[\p{P}\$\+<=>\^~\|]+`,
		reGPT2,
		`\p{N}+`,
		`[0-9][0-9][0-9]`,
	}}
	presetLlama3 = preset{name: "llama3", exprs: []string{reLlama3}, ignoreMerges: true, addBOS: true}
	presetDBRX   = preset{name: "dbrx", exprs: []string{reLlama3}}
	presetGPT2   = preset{name: "gpt-2", exprs: []string{reGPT2}}
	presetQwen2  = preset{name: "qwen2", exprs: []string{reQwen2}}
	presetQwen35 = preset{name: "qwen35", exprs: []string{reQwen35}}
	// GPT-4o's expression (also Llama 4's and MiniMax M2's) with its case
	// classes written as lookaheads, as llama.cpp adapts it for std::regex.
	presetGPT4o = preset{name: "gpt-4o", exprs: []string{
		`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}}
	// DeepSeek LLM: the letter class is the explicit list of code points
	// that tokenizer.json spells out, so this set runs on the "wide" view.
	presetDeepseekLLM = preset{name: "deepseek-llm", exprs: []string{
		"[\r\n]",
		"\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
		`\s?[!-/:-~！-／：-～‘-‟　-。]+`,
		`\s+$`,
		`[一-龥ࠀ-一가-퟿]+`,
		`\p{N}+`,
	}}
	presetDeepseek3 = preset{name: "deepseek-v3", exprs: []string{
		`\p{N}{1,3}`,
		`[一-龥぀-ゟ゠-ヿ]+`,
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
	}}
	presetDeepseekCoder = preset{name: "deepseek-coder", exprs: []string{
		"[\r\n]",
		`\s?\p{L}+`,
		`\s?\p{P}+`,
		`[一-龥ࠀ-一가-퟿]+`,
		`\p{N}`,
	}}
	presetFalcon = preset{name: "falcon", exprs: []string{
		"[\\p{P}\\$\\+<=>\\^~\\|`]+",
		reGPT2,
		`[0-9][0-9][0-9]`,
	}}
	presetStarcoder = preset{name: "starcoder", exprs: []string{`\p{N}`, reGPT2}}
	presetKimiK2    = preset{name: "kimi-k2", exprs: []string{reKimiK2}}
	presetPoro      = preset{name: "poro-chat", exprs: []string{rePoro}}
	presetChatGLM4  = preset{name: "chatglm-bpe", exprs: []string{reLlama3}, noBOS: true}
	presetViking    = preset{name: "viking", exprs: []string{rePoro, `\p{N}`}}
	presetTekken    = preset{name: "tekken", exprs: []string{
		`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}, ignoreMerges: true, addBOS: true}
	presetChameleon = preset{name: "chameleon", exprs: []string{
		`<sentinel:[0-9]+>`,
		`(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`,
		`([\t\n]|    |  )`,
		`\p{N}`,
		`[\p{P}!-/:-@\[-` + "`" + `{-~]`,
		reGPT2,
	}, addBOS: true}
)

// presets maps the tokenizer.ggml.pre values strata supports to their
// presets, as llama.cpp's llama_vocab::impl::load maps them
// (llama-vocab.cpp); llama.cpp knows a few more, which are refused here
// with ErrUnknownPre rather than guessed.
var presets = map[string]preset{
	"default":          presetDefault,
	"llama3":           presetLlama3,
	"llama-v3":         presetLlama3,
	"llama-bpe":        presetLlama3,
	"falcon3":          presetLlama3,
	"dbrx":             presetDBRX,
	"smaug-bpe":        presetDBRX,
	"deepseek-llm":     presetDeepseekLLM,
	"deepseek-coder":   presetDeepseekCoder,
	"deepseek-v3":      presetDeepseek3,
	"hunyuan-dense":    presetDeepseek3,
	"joyai-llm":        presetDeepseek3,
	"kimi-k2":          presetKimiK2,
	"falcon":           presetFalcon,
	"mpt":              presetGPT2,
	"gpt-2":            presetGPT2,
	"phi-2":            presetGPT2,
	"jina-es":          presetGPT2,
	"jina-de":          presetGPT2,
	"gigachat":         presetGPT2,
	"jina-v1-en":       presetGPT2,
	"jina-v2-es":       presetGPT2,
	"jina-v2-de":       presetGPT2,
	"jina-v2-code":     presetGPT2,
	"roberta-bpe":      presetGPT2,
	"olmo":             presetGPT2,
	"jais":             presetGPT2,
	"starcoder":        presetStarcoder,
	"refact":           presetStarcoder,
	"command-r":        presetStarcoder,
	"smollm":           presetStarcoder,
	"codeshell":        presetStarcoder,
	"exaone":           presetStarcoder,
	"minerva-7b":       presetStarcoder,
	"qwen2":            presetQwen2,
	"deepseek-r1-qwen": presetQwen2,
	"hunyuan":          presetQwen2,
	"solar-open":       presetQwen2,
	"grok-2":           presetQwen2,
	"qwen35":           presetQwen35,
	"gpt-4o":           presetGPT4o,
	"llama4":           presetGPT4o,
	"minimax-m2":       presetGPT4o,
	"stablelm2":        presetQwen2,
	"megrez":           presetQwen2,
	"poro-chat":        presetPoro,
	"bloom":            presetPoro,
	"gpt3-finnish":     presetPoro,
	"chatglm-bpe":      presetChatGLM4,
	"glm4":             presetChatGLM4,
	"viking":           presetViking,
	"tekken":           presetTekken,
	"chameleon":        presetChameleon,
}

// lookupPreset returns the preset for a tokenizer.ggml.pre value. An empty
// value selects "default", as llama.cpp does (with a warning there).
func lookupPreset(pre string) (preset, error) {
	if pre == "" {
		return presetDefault, nil
	}
	p, ok := presets[pre]
	if !ok {
		return preset{}, fmt.Errorf("%w: %q", ErrUnknownPre, pre)
	}
	return p, nil
}

// text is the input of one pre-tokenization: its code points, their flags
// and, built on demand, the two rune views the regex rules run on.
type text struct {
	cps       []cpt
	flags     []cptFlags
	collapsed []rune
	wide      []rune
}

// reset makes t describe s, reusing t's buffers.
func (t *text) reset(s string) {
	t.cps = appendCodepoints(t.cps[:0], s)
	t.flags = slices.Grow(t.flags[:0], len(t.cps))[:len(t.cps)]
	for i, c := range t.cps {
		t.flags[i] = flagsOf(c.r)
	}
	t.collapsed = t.collapsed[:0]
	t.wide = t.wide[:0]
}

// Collapsed-view stand-ins (llama.cpp's k_ucat_cpt and its fallbacks).
const (
	collapsedOther  rune = 0xD0
	collapsedNumber rune = 0xD1
	collapsedLetter rune = 0xD2
	collapsedPunct  rune = 0xD3
	collapsedMark   rune = 0xD4
	collapsedSymbol rune = 0xD5
	collapsedSpace  rune = 0x0B
)

func (t *text) collapsedRunes() []rune {
	if len(t.collapsed) != len(t.cps) {
		t.collapsed = slices.Grow(t.collapsed[:0], len(t.cps))[:len(t.cps)]
		for i, c := range t.cps {
			f := t.flags[i]
			switch {
			case c.r >= 0 && c.r < 0x80:
				t.collapsed[i] = c.r
			case f.isWhitespace():
				t.collapsed[i] = collapsedSpace
			case f&flagNumber != 0:
				t.collapsed[i] = collapsedNumber
			case f&flagLetter != 0:
				t.collapsed[i] = collapsedLetter
			case f&flagPunctuation != 0:
				t.collapsed[i] = collapsedPunct
			case f&flagAccentMark != 0:
				t.collapsed[i] = collapsedMark
			case f&flagSymbol != 0:
				t.collapsed[i] = collapsedSymbol
			default:
				t.collapsed[i] = collapsedOther
			}
		}
	}
	return t.collapsed
}

func (t *text) wideRunes() []rune {
	if len(t.wide) != len(t.cps) {
		t.wide = slices.Grow(t.wide[:0], len(t.cps))[:len(t.cps)]
		for i, c := range t.cps {
			switch {
			case c.r == invalidRune:
				t.wide[i] = utf8.RuneError
			case c.r > 0x7F && t.flags[i].isWhitespace():
				t.wide[i] = collapsedSpace
			default:
				t.wide[i] = c.r
			}
		}
	}
	return t.wide
}

// rule refines fragments. frags are consecutive lengths in code points
// that cover the whole text; split appends the refined lengths, which
// cover it too, to out.
type rule interface {
	split(t *text, frags, out []int) []int
}

type gpt2Rule struct{}

// llama3Rule is the Llama 3 splitter. With maxDigits 1 instead of 3 it is
// the Qwen2 one (\p{N} for \p{N}{1,3}); with marks as well, where \p{L}
// becomes [\p{L}\p{M}], the Qwen3.5 one. llama.cpp has a hand-written
// splitter for each; the tests check all three against the expressions.
type llama3Rule struct {
	maxDigits int
	word      cptFlags // flagLetter, or flagLetter|flagAccentMark for Qwen3.5
}

// regexRule runs one expression through regexp2.
type regexRule struct {
	re        *regexp2.Regexp
	collapsed bool
}

// pretokenizer is a compiled preset.
type pretokenizer struct {
	rules []rule
}

var (
	compiledMu sync.Mutex
	compiled   = map[string]rule{} // by expression; rules are immutable and shared
)

// compileRule returns the rule for one expression of a preset.
func compileRule(expr string) (rule, error) {
	switch expr {
	case reGPT2:
		return gpt2Rule{}, nil
	case reLlama3, reLlama3Orig:
		return llama3Rule{maxDigits: 3, word: flagLetter}, nil
	case reQwen2:
		return llama3Rule{maxDigits: 1, word: flagLetter}, nil
	case reQwen35:
		return llama3Rule{maxDigits: 1, word: flagLetter | flagAccentMark}, nil
	case reKimiK2:
		return kimiRule{}, nil
	}
	compiledMu.Lock()
	defer compiledMu.Unlock()
	if r, ok := compiled[expr]; ok {
		return r, nil
	}
	src, collapsed, err := translateRegex(expr)
	if err != nil {
		return nil, err
	}
	// Compile with regexp2 even when the fast path applies, so that a
	// malformed expression is reported the same way either way.
	re, err := compileRegexp2(src)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: pre-tokenizer regex %q: %w", expr, err)
	}
	var r rule = &regexRule{re: re, collapsed: collapsed}
	if sr, ok := parseSimple(src, collapsed); ok {
		r = sr
	}
	compiled[expr] = r
	return r, nil
}

func newPretokenizer(p preset) (*pretokenizer, error) {
	pt := &pretokenizer{}
	for _, e := range p.exprs {
		r, err := compileRule(e)
		if err != nil {
			return nil, err
		}
		pt.rules = append(pt.rules, r)
	}
	return pt, nil
}

// splitScratch is the reusable state of one pre-tokenization.
type splitScratch struct {
	text
	frags, next, ends []int
}

// words splits s into pre-tokenized words, returned as byte offsets: word
// i is s[ends[i-1]:ends[i]] (ends[-1] = 0). The result aliases sc.
func (pt *pretokenizer) words(sc *splitScratch, s string) []int {
	sc.reset(s)
	sc.ends = sc.ends[:0]
	if len(sc.cps) == 0 {
		return sc.ends
	}
	sc.frags = append(sc.frags[:0], len(sc.cps))
	for _, r := range pt.rules {
		sc.next = r.split(&sc.text, sc.frags, sc.next[:0])
		sc.frags, sc.next = sc.next, sc.frags
	}
	i := 0
	for _, n := range sc.frags {
		if n == 0 {
			continue
		}
		i += n
		sc.ends = append(sc.ends, sc.cps[i-1].end)
	}
	return sc.ends
}

// collapsedClasses are the categories llama.cpp rewrites for the collapsed
// view, each with what it becomes inside a bracket expression: its
// stand-in and its ASCII members (unicode.cpp, k_ucat_*).
var collapsedClasses = func() map[string]string {
	letter := `\u00D2A-Za-z`
	return map[string]string{
		`\p{N}`:  `\u00D10-9`,
		`\p{L}`:  letter,
		`\p{Lu}`: letter,
		`\p{Ll}`: letter,
		`\p{Lt}`: letter,
		`\p{Lm}`: letter,
		`\p{Lo}`: letter,
		`\p{P}`:  `\u00D3!-#%-*,-/:-;?-@\[-\]_\{\}`,
		`\p{M}`:  `\u00D4`,
		`\p{S}`:  `\u00D5\$\+<->\^` + "`" + `\|\~`,
	}
}()

// translateRegex turns a llama.cpp pre-tokenizer expression into the
// regexp2 expression that behaves like it under std::regex. It reports
// whether the expression runs on the collapsed view.
func translateRegex(expr string) (string, bool, error) {
	collapsed := false
	for name := range collapsedClasses {
		collapsed = collapsed || strings.Contains(expr, name)
	}
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if collapsed && c >= 0x80 {
			return "", false, fmt.Errorf("tokenizer: pre-tokenizer regex %q mixes unicode categories and non-ASCII characters", expr)
		}
		if c == '\\' && i+1 < len(expr) {
			if collapsed && strings.HasPrefix(expr[i:], `\p{`) {
				if j := strings.IndexByte(expr[i:], '}'); j > 0 {
					if class, ok := collapsedClasses[expr[i:i+j+1]]; ok {
						if !inside {
							b.WriteByte('[')
						}
						b.WriteString(class)
						if !inside {
							b.WriteByte(']')
						}
						i += j
						continue
					}
				}
			}
			// An escape pair is copied whole so that "\[" or "\$" is not
			// mistaken for a bracket or an anchor.
			b.WriteByte(c)
			b.WriteByte(expr[i+1])
			i++
			continue
		}
		switch {
		case c == '[' && !inside:
			inside = true
		case c == ']' && inside:
			inside = false
		case c == '$' && !inside:
			// ECMAScript's $ is the end of the input only; .NET's also
			// matches before a final newline.
			b.WriteString(`\z`)
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), collapsed, nil
}

func compileRegexp2(src string) (*regexp2.Regexp, error) {
	return regexp2.Compile(src, regexp2.None)
}

func (r *regexRule) split(t *text, frags, out []int) []int {
	runes := t.wideRunes
	if r.collapsed {
		runes = t.collapsedRunes
	}
	view := runes()
	start := 0
	for _, n := range frags {
		sub := view[start : start+n : start+n]
		start += n
		at := 0
		m, _ := r.re.FindRunesMatch(sub) // errors are timeouts only, and none is set
		for m != nil {
			if m.Index > at {
				out = append(out, m.Index-at)
			}
			if m.Length > 0 {
				out = append(out, m.Length)
			}
			at = m.Index + m.Length
			m, _ = r.re.FindNextMatch(m)
		}
		if at < n {
			out = append(out, n-at)
		}
	}
	return out
}

// outOfRange is what a splitter sees past either end of its fragment.
const outOfRange rune = -2

// fragment is a cursor over one fragment for the hand-written splitters.
type fragment struct {
	t        *text
	ini, end int
	prev     int
	out      []int
}

func (f *fragment) cp(pos int) rune {
	if pos >= f.ini && pos < f.end {
		return f.t.cps[pos].r
	}
	return outOfRange
}

func (f *fragment) fl(pos int) cptFlags {
	if pos >= f.ini && pos < f.end {
		return f.t.flags[pos]
	}
	return 0
}

// add ends the current word at end and returns its length.
func (f *fragment) add(end int) int {
	n := end - f.prev
	if n > 0 {
		f.out = append(f.out, n)
	}
	f.prev = end
	return n
}

// notWLN reports [^\s\p{L}\p{N}] for an in-range code point (flags of a
// position past the fragment are 0 and fail).
func notWLN(fl cptFlags) bool {
	return fl != 0 && fl&(flagWhitespace|flagLetter|flagNumber) == 0
}

// split implements 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// as llama.cpp's unicode_regex_split_custom_gpt2.
func (gpt2Rule) split(t *text, frags, out []int) []int {
	start := 0
	for _, n := range frags {
		f := fragment{t: t, ini: start, end: start + n, prev: start, out: out}
		start += n
		for pos := f.ini; pos < f.end; {
			c := f.cp(pos)
			fl := f.fl(pos)
			if c == '\'' && pos+1 < f.end {
				c1 := f.cp(pos + 1)
				if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
					pos += f.add(pos + 2)
					continue
				}
				if pos+2 < f.end {
					c2 := f.cp(pos + 2)
					if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
						pos += f.add(pos + 3)
						continue
					}
				}
			}
			fl2 := fl
			if c == ' ' {
				fl2 = f.fl(pos + 1)
			}
			if fl2.isLetter() || fl2.isNumber() || notWLN(fl2) {
				if c == ' ' {
					pos++
				}
				switch {
				case fl2.isLetter():
					for f.fl(pos).isLetter() {
						pos++
					}
				case fl2.isNumber():
					for f.fl(pos).isNumber() {
						pos++
					}
				default:
					for notWLN(f.fl(pos)) {
						pos++
					}
				}
				f.add(pos)
				continue
			}
			ws := 0
			for f.fl(pos + ws).isWhitespace() {
				ws++
			}
			if ws > 1 && f.cp(pos+ws) != outOfRange { // \s+(?!\S)
				pos += ws - 1
				f.add(pos)
				continue
			}
			if ws > 0 { // \s+
				pos += ws
				f.add(pos)
				continue
			}
			pos++
			f.add(pos)
		}
		out = f.out
	}
	return out
}

// contraction returns the length of the contraction
// (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos, or 0.
func (f *fragment) contraction(pos int) int {
	if f.cp(pos) != '\'' || pos+1 >= f.end {
		return 0
	}
	c1 := toLower(f.cp(pos + 1))
	if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
		return 2
	}
	if pos+2 < f.end {
		c2 := toLower(f.cp(pos + 2))
		if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
			return 3
		}
	}
	return 0
}

// rest takes the word at pos for the alternatives the Llama 3, Qwen2 and
// Kimi K2 expressions end with,
// \p{N}{1,maxDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+,
// or a single code point when none matches, and returns where it ends.
// word is the letter class (flagLetter; Qwen3.5 adds flagAccentMark).
func (f *fragment) rest(pos, maxDigits int, word cptFlags) int {
	c := f.cp(pos)
	fl := f.fl(pos)
	// \p{N}{1,maxDigits}: a run of digits is cut into words of maxDigits.
	if fl.isNumber() {
		ini := pos
		for f.fl(pos).isNumber() {
			pos++
			if pos-ini >= maxDigits {
				f.add(pos)
				ini = pos
			}
		}
		f.add(pos)
		return pos
	}
	// <space>?[^\s\p{L}\p{N}]+[\r\n]*; a space that ends the fragment
	// is taken alone here, as \s+ would.
	fl2 := fl
	if c == ' ' {
		fl2 = f.fl(pos + 1)
	}
	notWord := func(fl cptFlags) bool { return fl != 0 && fl&(flagWhitespace|word|flagNumber) == 0 }
	if fl2&(flagWhitespace|word|flagNumber) == 0 && fl != 0 {
		if c == ' ' {
			pos++
		}
		for notWord(f.fl(pos)) {
			pos++
		}
		for c2 := f.cp(pos); c2 == '\r' || c2 == '\n'; c2 = f.cp(pos) {
			pos++
		}
		f.add(pos)
		return pos
	}
	ws, lastRN := 0, 0
	for f.fl(pos + ws).isWhitespace() {
		if c2 := f.cp(pos + ws); c2 == '\r' || c2 == '\n' {
			lastRN = pos + ws + 1
		}
		ws++
	}
	switch {
	case lastRN > 0: // \s*[\r\n]+
		pos = lastRN
	case ws > 1 && f.cp(pos+ws) != outOfRange: // \s+(?!\S)
		pos += ws - 1
	case ws > 0: // \s+
		pos += ws
	default:
		pos++
	}
	f.add(pos)
	return pos
}

// split implements the Llama 3 expression (or Qwen2's, see llama3Rule)
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// as llama.cpp's unicode_regex_split_custom_llama3 (and _qwen2).
func (lr llama3Rule) split(t *text, frags, out []int) []int {
	start := 0
	for _, n := range frags {
		f := fragment{t: t, ini: start, end: start + n, prev: start, out: out}
		start += n
		for pos := f.ini; pos < f.end; {
			if k := f.contraction(pos); k > 0 {
				pos += f.add(pos + k)
				continue
			}
			// [^\r\n\p{L}\p{N}]?\p{L}+
			if c, fl := f.cp(pos), f.fl(pos); !(c == '\r' || c == '\n' || fl.isNumber()) {
				if fl&lr.word != 0 || f.fl(pos+1)&lr.word != 0 {
					pos++
					for f.fl(pos)&lr.word != 0 {
						pos++
					}
					f.add(pos)
					continue
				}
			}
			pos = f.rest(pos, lr.maxDigits, lr.word)
		}
		out = f.out
	}
	return out
}

// kimiRule splits as llama.cpp does for Kimi K2. Moonshot's expression is
//
//	[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// but llama.cpp (unicode_regex_split_custom_kimi_k2) runs a simpler one,
// and strata follows llama.cpp, its oracle:
//
//	H+|[^\r\n\p{L}\p{N}]?(?:(?!H)\p{L})+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// where H is the CJK ideograph blocks of isHan rather than the Han script.
// So letter case plays no part (a run of letters is one word: "camelCase",
// not "camel" "Case"), a contraction joins the word before it ("it's"),
// marks do not join the letters before them ("e\u0301" is "e" "\u0301"),
// and Han-script characters outside those blocks split by their general
// category (々 is a letter, 〇 a number, the radicals ⺀ ⼀ symbols).
type kimiRule struct{}

func (kimiRule) split(t *text, frags, out []int) []int {
	start := 0
	for _, n := range frags {
		f := fragment{t: t, ini: start, end: start + n, prev: start, out: out}
		start += n
		for pos := f.ini; pos < f.end; {
			c, fl := f.cp(pos), f.fl(pos)
			// H+, unassigned code points of the blocks included.
			if isHan(c) {
				for isHan(f.cp(pos)) {
					pos++
				}
				f.add(pos)
				continue
			}
			// [^\r\n\p{L}\p{N}]?(?:(?!H)\p{L})+ and a contraction.
			lead := !(c == '\r' || c == '\n' || fl.isLetter() || fl.isNumber())
			if fl.isLetter() || (lead && f.letterNotHan(pos+1)) {
				if lead {
					pos++
				}
				for f.letterNotHan(pos) {
					pos++
				}
				pos += f.contraction(pos)
				f.add(pos)
				continue
			}
			pos = f.rest(pos, 3, flagLetter)
		}
		out = f.out
	}
	return out
}

func (f *fragment) letterNotHan(pos int) bool {
	return f.fl(pos).isLetter() && !isHan(f.cp(pos))
}

// isHan is llama.cpp's unicode_cpt_is_han: the CJK Unified Ideographs,
// Extensions A to F and the two compatibility blocks, assigned or not.
func isHan(r rune) bool {
	switch {
	case r < 0x3400:
		return false
	case r <= 0x4DBF, r >= 0x4E00 && r <= 0x9FFF, r >= 0xF900 && r <= 0xFAFF:
		return true
	case r < 0x20000:
		return false
	}
	return r <= 0x2A6DF || (r >= 0x2A700 && r <= 0x2EBEF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

// toLower is unicode_tolower, which the contractions need only for ASCII.
func toLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + ('a' - 'A')
	}
	return r
}

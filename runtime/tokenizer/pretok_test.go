package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/dlclark/regexp2"
)

// splitWith pre-tokenizes s with the given rules.
func splitWith(s string, rules ...rule) []string {
	pt := &pretokenizer{rules: rules}
	var words []string
	start := 0
	for _, end := range pt.words(new(splitScratch), s) {
		words = append(words, s[start:end])
		start = end
	}
	return words
}

func splitPreset(t testing.TB, pre, s string) []string {
	t.Helper()
	p, err := lookupPreset(pre)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := newPretokenizer(p)
	if err != nil {
		t.Fatal(err)
	}
	return splitWith(s, pt.rules...)
}

// regexOnly compiles expr for the regexp2 engine even where llama.cpp has
// a hand-written splitter, to check one against the other.
func regexOnly(t testing.TB, expr string) rule {
	t.Helper()
	src, collapsed, err := translateRegex(expr)
	if err != nil {
		t.Fatal(err)
	}
	r, err := compileRegexp2(src)
	if err != nil {
		t.Fatal(err)
	}
	return &regexRule{re: r, collapsed: collapsed}
}

// extraSplitInputs are tricky strings beyond the vector inputs.
var extraSplitInputs = []string{
	"it'sa", "DON'T", "We'Ve a'lL", "a  b", "x\r\n\r\ny", "   ", "a\u00a0b", "12345", "...!!!", "x !!\n\ny",
	"\t\t\n \n", "🦙🦙 🦙", "a\u3000\u3000b", "٣٤٥٦", "Ⅻ3", "e\u0301", "\xff\xfea", "'", "''s", " '", "a'",
}

// oracleInputs are texts for the pre-tokenizers that the big models ship
// (Qwen2/3, DeepSeek V3, Kimi K2): Han and Latin mixed, kana and hangul,
// digit runs of one to five, contractions in mixed case, letter case
// changes (Kimi K2's expression splits on them, llama.cpp does not),
// combining marks, symbols, emoji, whitespace runs and newlines.
var oracleInputs = []string{
	"我想在apple工作", "Hello世界 world世界", " 世界", "世界 ", "中文English中文", "北京2024年", "１２３４５",
	"日本語のテキストです。カタカナ", "한국어 텍스트입니다", "々〇〻⺀⼀", "㐀䶿\U00020000\U0002A6DF丽", "a豈b\uFA6E!\U0002F800\U0002FA1F\U0002A6E0x\u4DC0\u9FFF\u4DBF\u3400", "你好，世界！「引用」",
	"Hello, World! 123456", "🦙🦙 🦙 👍🏽", "it's IT'S",
	"1", "12", "123", "1234", "12345", "a1b22c333d4444e55555", "٣٤٥٦٧", "Ⅻ3", "3.14159 -42 +7",
	"it's IT'S It'S we'Re I'd they'LL you've", "DON'T don't Don'T", "'s 's' ''s", "camelCase PascalCase HTTPServer iPhone",
	"ÉCOLE école Ǆungla ǅungla", "e\u0301te\u0301 cafe\u0301", "naïve résumé", "Ω≈ç√∫ ©®™ €£¥", "$var @user #tag %x",
	"🦙🦙 🦙 👍🏽 👨‍👩‍👧 🇫🇷", "a  b   c    d", "\t\t\n \n", "line1\r\nline2\n\n\nline3", "  leading", "trailing  ",
	"x\u00a0y\u3000z\u2003w", "!!!\n\n??? ...", " ?!\r\n", "(a|b) [c] {d} <e>", "`code` ~tilde~ ^caret^",
	"print(\"hello\")\n    return x**2 // 3", "العربية والعبرية עברית", "Ελληνικά Кириллица",
	"मैं हिंदी बोलता हूँ", "ภาษาไทย", "ℕ ℤ ℚ ℝ", "ｆｕｌｌｗｉｄｔｈ ＦＵＬＬ", "a\u200bb\u200cc", "〜～・",
}

// kimiRegex is what llama.cpp's Kimi K2 splitter does (see kimiRule),
// as an expression for regexp2 on the wide view: H is isHan's blocks and
// \p{L}, \p{N}, \s are Go's Unicode tables, as cptFlags are.
func kimiRegex(t testing.TB) rule {
	t.Helper()
	const han = "[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\U00020000-\U0002A6DF\U0002A700-\U0002EBEF\U0002F800-\U0002FA1F]"
	expr := han + `+` +
		`|[^\r\n\p{L}\p{N}]?(?:(?!` + han + `)\p{L})+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?` +
		`|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	re, err := regexp2.Compile(expr, regexp2.None)
	if err != nil {
		t.Fatal(err)
	}
	return &regexRule{re: re}
}

// TestSplitters checks the hand-written GPT-2, Llama 3, Qwen2 and Kimi K2
// splitters (llama.cpp's custom code, which it uses instead of the regex)
// against the regexes run through the regexp2 engine: llama.cpp's own
// expressions for the first three, a regex of llama.cpp's Kimi K2 code for
// the last (llama.cpp does not run Moonshot's expression).
func TestSplitters(t *testing.T) {
	inputs, _ := readVectors(t, "ggml-vocab-llama-bpe.gguf")
	inputs = slices.Concat(inputs, extraSplitInputs, oracleInputs)
	for _, c := range []struct {
		name   string
		custom rule
		re     rule
	}{
		{"gpt2", gpt2Rule{}, regexOnly(t, reGPT2)},
		{"llama3", llama3Rule{3, flagLetter}, regexOnly(t, reLlama3)},
		{"qwen2", llama3Rule{1, flagLetter}, regexOnly(t, reQwen2)},
		{"qwen35", llama3Rule{1, flagLetter | flagAccentMark}, regexOnly(t, reQwen35)},
		{"kimi-k2", kimiRule{}, kimiRegex(t)},
	} {
		re := c.re
		for _, in := range inputs {
			got, want := splitWith(in, c.custom), splitWith(in, re)
			if !slices.Equal(got, want) {
				t.Errorf("%s: %q\ncustom %q\n regex %q", c.name, in, got, want)
			}
		}
	}
}

// TestLlama3Qwen2Split covers the two presets whose vocabularies are too
// big for the test data (only their .inp/.out vectors exist): the split of
// tricky inputs is checked by hand, and against the .out files where they
// show it (digit runs: Llama 3 groups of up to three digits, one token
// each; Qwen2 single digits, id 18 = "3" in both vocabularies).
func TestLlama3Qwen2Split(t *testing.T) {
	inputs, llamaOut := readVectors(t, "ggml-vocab-llama-bpe.gguf")
	_, qwenOut := readVectors(t, "ggml-vocab-qwen2.gguf")

	hand := []struct {
		in     string
		llama3 []string // nil: same as qwen2
		qwen2  []string
	}{
		{inputs[0], nil, []string{"ied", " ", "4", " ", "½", " months"}},
		{inputs[4], nil, []string{"  "}},
		{inputs[10], nil, []string{"\t\n"}},
		{inputs[19], []string{"w", "048", " ", "7", "tuijk", " dsdfhu"}, []string{"w", "0", "4", "8", " ", "7", "tuijk", " dsdfhu"}},
		{inputs[26], nil, []string{"  ", " Hello"}},
		{inputs[28], nil, []string{"   ", " Hello", "\n", "   ", " Hello"}},
		{inputs[30], nil, []string{"\n", " ="}},
		{inputs[31], nil, []string{"'", " era"}},
		{inputs[32],
			[]string{"Hello", ",", " y", "'all", "!", " How", " are", " you", " 😁", " ?", "我想在apple工作", "131", "415", "1", "天", "～"},
			[]string{"Hello", ",", " y", "'all", "!", " How", " are", " you", " 😁", " ?", "我想在apple工作", "1", "3", "1", "4", "1", "5", "1", "天", "～"}},
		{inputs[41], []string{"333", "333", "33"}, []string{"3", "3", "3", "3", "3", "3", "3", "3"}},
		{"it'sa DON'T", []string{"it", "'s", "a", " DON", "'T"}, nil},
		{"a  b", nil, []string{"a", " ", " b"}},
		{"x\r\n\r\ny", nil, []string{"x", "\r\n\r\n", "y"}},
		{"x !!\n\ny", nil, []string{"x", " !!\n\n", "y"}},
		{"a\u00a0b   ", nil, []string{"a", "\u00a0b", "   "}},
		{"12345", []string{"123", "45"}, []string{"1", "2", "3", "4", "5"}},
	}
	for _, h := range hand {
		if h.llama3 == nil {
			h.llama3 = h.qwen2
		}
		if h.qwen2 == nil {
			h.qwen2 = h.llama3
		}
		if got := splitPreset(t, "llama-bpe", h.in); !slices.Equal(got, h.llama3) {
			t.Errorf("llama3 split %q = %q, want %q", h.in, got, h.llama3)
		}
		if got := splitPreset(t, "qwen2", h.in); !slices.Equal(got, h.qwen2) {
			t.Errorf("qwen2 split %q = %q, want %q", h.in, got, h.qwen2)
		}
	}

	isDigits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	for i, in := range inputs {
		lw, qw := splitPreset(t, "llama-bpe", in), splitPreset(t, "qwen2", in)
		if strings.Join(lw, "") != in || strings.Join(qw, "") != in {
			t.Errorf("case %d: split loses text", i)
		}
		// Every word becomes at least one token.
		if len(llamaOut[i]) < len(lw) || len(qwenOut[i]) < len(qw) {
			t.Errorf("case %d %q: %d/%d llama3 tokens/words, %d/%d qwen2", i, in, len(llamaOut[i]), len(lw), len(qwenOut[i]), len(qw))
		}
		// Qwen2 is Llama 3 with every digit its own word.
		var derived []string
		for _, w := range lw {
			if w != "" && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsNumber(r) }) < 0 {
				for _, r := range w {
					derived = append(derived, string(r))
				}
			} else {
				derived = append(derived, w)
			}
		}
		if !slices.Equal(qw, derived) {
			t.Errorf("case %d %q: qwen2 %q, llama3 with digits split %q", i, in, qw, derived)
		}
		if isDigits(in) {
			if len(llamaOut[i]) != len(lw) || len(qwenOut[i]) != len(qw) {
				t.Errorf("case %d %q: digit words %q / %q vs ids %v / %v", i, in, lw, qw, llamaOut[i], qwenOut[i])
			}
			for _, id := range qwenOut[i] {
				if id != 18 {
					t.Errorf("case %d: qwen2 id %d, want 18", i, id)
				}
			}
		}
	}
}

func TestTranslateRegex(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{`\p{N}`, `[\u00D10-9]`},
		{`[^\s\p{L}\p{N}]+`, `[^\s\u00D2A-Za-z\u00D10-9]+`},
		{`\s+$`, `\s+\z`},
		{`[\p{P}\$\+<=>\^~\|]+`, `[\u00D3!-#%-*,-/:-;?-@\[-\]_\{\}\$\+<=>\^~\|]+`},
	} {
		got, _, err := translateRegex(c.in)
		if err != nil || got != c.out {
			t.Errorf("translateRegex(%q) = %q, %v; want %q", c.in, got, err, c.out)
		}
	}
	if _, _, err := translateRegex(`\p{L}é`); err == nil {
		t.Error("a regex mixing \\p{..} and non-ASCII must be rejected, as in llama.cpp")
	}
}

// simpleExprs are the preset expressions that run on the fast path.
func simpleExprs(t testing.TB) map[string]*simpleRule {
	t.Helper()
	out := map[string]*simpleRule{}
	for _, p := range presets {
		for _, e := range p.exprs {
			src, collapsed, err := translateRegex(e)
			if err != nil {
				t.Fatal(err)
			}
			if r, ok := parseSimple(src, collapsed); ok {
				out[e] = r
			}
		}
	}
	return out
}

// TestSimpleRules checks the fast path against regexp2 for every preset
// expression it takes over.
func TestSimpleRules(t *testing.T) {
	inputs, _ := readVectors(t, "ggml-vocab-llama-bpe.gguf")
	inputs = append(inputs, extraSplitInputs...)
	inputs = append(inputs, " a", "a ", "  \t", "x  ", "٣", "a1b22c333d4444", "。 。", "(a|b) c.d")
	simple := simpleExprs(t)
	for _, want := range []string{`\p{N}`, `\p{N}+`, `\p{N}{1,3}`, `[0-9][0-9][0-9]`, "[\r\n]", `\s?\p{L}+`, `\s+$`, rePoro} {
		if simple[want] == nil {
			t.Errorf("%q should take the fast path", want)
		}
	}
	for expr, sr := range simple {
		re := regexOnly(t, expr)
		for _, in := range inputs {
			if got, want := splitWith(in, sr), splitWith(in, re); !slices.Equal(got, want) {
				t.Errorf("%q on %q:\nsimple %q\nregex  %q", expr, in, got, want)
			}
		}
	}
}

// TestBigModelSplits pins the words of the big models' pre-tokenizers on
// inputs that tell them apart. The inputs are oracleInputs too, so the
// ids they give are also checked against llama.cpp.
func TestBigModelSplits(t *testing.T) {
	for _, c := range []struct {
		pre, in string
		want    []string
	}{
		{"kimi-k2", "我想在apple工作", []string{"我想在", "apple", "工作"}},
		{"kimi-k2", "Hello世界 world世界", []string{"Hello", "世界", " world", "世界"}},
		{"kimi-k2", " 世界", []string{" ", "世界"}},
		{"kimi-k2", "camelCase PascalCase HTTPServer iPhone", []string{"camelCase", " PascalCase", " HTTPServer", " iPhone"}},
		{"kimi-k2", "it's IT'S It'S we'Re I'd they'LL you've", []string{"it's", " IT'S", " It'S", " we'Re", " I'd", " they'LL", " you've"}},
		{"kimi-k2", "'s 's' ''s", []string{"'s", " '", "s", "'", " ''", "s"}},
		{"kimi-k2", "12345", []string{"123", "45"}},
		{"kimi-k2", "e\u0301te\u0301 cafe\u0301", []string{"e", "\u0301te", "\u0301", " cafe", "\u0301"}},
		{"kimi-k2", "々〇〻⺀⼀", []string{"々", "〇", "〻", "⺀⼀"}},
		{"kimi-k2", "日本語のテキストです。カタカナ", []string{"日本語", "のテキストです", "。カタカナ"}},
		{"deepseek-v3", "Hello, World! 123456", []string{"Hello", ",", " World", "!", " ", "123", "456"}},
		{"deepseek-v3", "$var @user #tag %x", []string{"$var", " @", "user", " #", "tag", " %", "x"}},
		{"deepseek-v3", "e\u0301te\u0301 cafe\u0301", []string{"e\u0301te\u0301", " cafe\u0301"}},
		{"deepseek-v3", "Ω≈ç√∫ ©®™ €£¥", []string{"Ω", "≈", "ç", "√∫", " ©®™", " €£¥"}},
		{"deepseek-v3", "🦙🦙 🦙 👍🏽", []string{"🦙🦙", " 🦙", " 👍🏽"}},
		{"deepseek-v3", "日本語のテキストです。カタカナ", []string{"日本語のテキストです", "。", "カタカナ"}},
		{"deepseek-v3", "中文English中文", []string{"中文", "English", "中文"}},
		{"qwen2", "我想在apple工作", []string{"我想在apple工作"}},
		{"qwen2", "北京2024年", []string{"北京", "2", "0", "2", "4", "年"}},
		{"qwen2", "it's IT'S", []string{"it", "'s", " IT", "'S"}},
	} {
		if got := splitPreset(t, c.pre, c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s %q:\n got %q\nwant %q", c.pre, c.in, got, c.want)
		}
		if !slices.Contains(oracleInputs, c.in) {
			t.Errorf("%q is not among oracleInputs", c.in)
		}
	}
}

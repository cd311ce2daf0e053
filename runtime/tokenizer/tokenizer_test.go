package tokenizer

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"strata/runtime/gguf"
)

func vocabPath(name string) string {
	return filepath.Join("llama.cpp-vocab", "ggml-vocab-"+name+".gguf")
}

// TestRoundTrip checks Decode(Encode(s)) on every vector input: BPE
// vocabularies are byte-level and lossless; SPM ones give back the text
// with the dummy-prefix space in front.
func TestRoundTrip(t *testing.T) {
	for _, name := range vocabs {
		t.Run(name, func(t *testing.T) {
			tk := loadVocab(t, vocabPath(name))
			inputs, _ := readVectors(t, "ggml-vocab-"+name+".gguf")
			for i, in := range inputs {
				want := in
				if tk.Model() == ModelSPM && in != "" {
					want = " " + in
				}
				ids := tk.Encode(in, false, false)
				if got := tk.Decode(ids); got != want {
					t.Errorf("case %d: Decode(Encode(%q)) = %q, want %q", i, in, got, want)
				}
				var streamed strings.Builder
				d := tk.NewDecoder()
				for _, id := range ids {
					streamed.WriteString(d.Add(id))
				}
				streamed.WriteString(d.Flush())
				if streamed.String() != want {
					t.Errorf("case %d: Decoder gave %q, want %q", i, streamed.String(), want)
				}
			}
		})
	}
}

func TestStories260K(t *testing.T) {
	tk := loadVocab(t, filepath.Join("gguf", "stories260K.gguf"))
	if tk.VocabSize() != 512 || tk.BOS() != 1 || tk.EOS() != 2 || tk.Model() != ModelSPM || !tk.AddBOS() {
		t.Fatalf("vocab %d BOS %d EOS %d model %q addBOS %v; want 512, 1, 2, llama, true",
			tk.VocabSize(), tk.BOS(), tk.EOS(), tk.Model(), tk.AddBOS())
	}
	ids := tk.Encode("Once upon a time", true, false)
	want := []int{1, 403, 407, 261, 378} // <s> ▁Once ▁upon ▁a ▁time
	if !slices.Equal(ids, want) {
		t.Fatalf("Encode = %v, want %v", ids, want)
	}
	if got := tk.Decode(ids); got != " Once upon a time" {
		t.Errorf("Decode = %q, want the text with its dummy-prefix space", got)
	}
	if !tk.IsEOG(2) || tk.IsEOG(1) {
		t.Errorf("IsEOG(2) = %v, IsEOG(1) = %v", tk.IsEOG(2), tk.IsEOG(1))
	}
	// The start of llama2.c's greedy sample (SOURCES.md); id 13 is <0x0A>.
	sample := []int{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}
	text := tk.Decode(sample)
	if text != " Once upon a time, there was a little girl named Lily." {
		t.Errorf("Decode(sample) = %q", text)
	}
	if got := tk.Piece(13); got != "\n" {
		t.Errorf("Piece(13) = %q, want newline", got)
	}
}

func TestSpecialTokens(t *testing.T) {
	spm := loadVocab(t, vocabPath("llama-spm"))
	gpt2 := loadVocab(t, vocabPath("gpt-2"))
	phi3 := loadVocab(t, vocabPath("phi-3"))

	tests := []struct {
		name         string
		tk           *Tokenizer
		text         string
		addSpecial   bool
		parseSpecial bool
		want         []int
	}{
		// BOS from addSpecial, then "<s>" in the text parsed as another BOS,
		// then the space prefix again after a special token.
		{"spm parse", spm, "<s>Hi</s>", true, true, []int{1, 1, 6324, 2}},
		{"spm no parse", spm, "<s>", false, false, spm.Encode("<s>", false, false)},
		{"gpt2 parse", gpt2, "<|endoftext|>Hello", false, true, []int{50256, 15496}},
		// Phi-3 special tokens strip the whitespace after them (llama.cpp's
		// RSTRIP rule for models named phi3).
		{"phi3 chat", phi3, "<|user|>\nHello<|end|>\n<|assistant|>", false, true, []int{32010, 15043, 32007, 32001}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tk.Encode(tc.text, tc.addSpecial, tc.parseSpecial)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Encode(%q, %v, %v) = %v, want %v", tc.text, tc.addSpecial, tc.parseSpecial, got, tc.want)
			}
		})
	}
	if ids := spm.Encode("<s>", false, false); slices.Contains(ids, 1) {
		t.Errorf("without parseSpecial, <s> must be text: %v", ids)
	}
	if ids := gpt2.Encode("<|endoftext|>", false, false); slices.Contains(ids, 50256) || gpt2.Decode(ids) != "<|endoftext|>" {
		t.Errorf("without parseSpecial, <|endoftext|> must be text: %v", ids)
	}
	if got := gpt2.Encode("", true, false); len(got) != 0 {
		t.Errorf("gpt-2 adds no BOS: %v", got)
	}
	if got := spm.Encode("", true, false); !slices.Equal(got, []int{1}) {
		t.Errorf("SPM Encode(\"\", addSpecial) = %v, want [1]", got)
	}

	for _, c := range []struct {
		tk  *Tokenizer
		id  int
		eog bool
	}{{spm, 2, true}, {spm, 1, false}, {gpt2, 50256, true}, {phi3, 32000, true}, {phi3, 32007, true}, {phi3, 32010, false}} {
		if got := c.tk.IsEOG(c.id); got != c.eog {
			t.Errorf("%s IsEOG(%d %q) = %v", c.tk.Model(), c.id, c.tk.Token(c.id), got)
		}
	}
}

func TestPiece(t *testing.T) {
	spm := loadVocab(t, vocabPath("llama-spm"))
	gpt2 := loadVocab(t, vocabPath("gpt-2"))
	for _, c := range []struct {
		tk       *Tokenizer
		id       int
		piece    string
		special  string
		rawToken string
	}{
		{spm, 1, "", "<s>", "<s>"},
		{spm, 0, "", "<unk>", "<unk>"},
		{spm, 13, "\n", "\n", "<0x0A>"},
		{spm, 15043, " Hello", " Hello", "▁Hello"},
		{gpt2, 50256, "", "<|endoftext|>", "<|endoftext|>"},
		{gpt2, 18435, " Hello", " Hello", "ĠHello"},
		{gpt2, 198, "\n", "\n", "Ċ"},
		{gpt2, -1, "", "", ""},
		{gpt2, 1 << 20, "", "", ""},
	} {
		if got := c.tk.Piece(c.id); got != c.piece {
			t.Errorf("Piece(%d) = %q, want %q", c.id, got, c.piece)
		}
		if got := c.tk.PieceSpecial(c.id); got != c.special {
			t.Errorf("PieceSpecial(%d) = %q, want %q", c.id, got, c.special)
		}
		if got := c.tk.Token(c.id); got != c.rawToken {
			t.Errorf("Token(%d) = %q, want %q", c.id, got, c.rawToken)
		}
	}
}

func TestDecoder(t *testing.T) {
	spm := loadVocab(t, vocabPath("llama-spm"))
	// 🦙 has no token in the Llama 2 vocabulary: four byte tokens.
	ids := spm.Encode("a🦙b", false, false)
	d := spm.NewDecoder()
	var steps []string
	var all strings.Builder
	for _, id := range ids {
		s := d.Add(id)
		if !utf8.ValidString(s) {
			t.Fatalf("Add(%d) returned invalid UTF-8 %q", id, s)
		}
		steps = append(steps, s)
		all.WriteString(s)
	}
	all.WriteString(d.Flush())
	if got := all.String(); got != " a🦙b" {
		t.Errorf("streamed %q (steps %q), want \" a🦙b\"", got, steps)
	}
	if !slices.Contains(steps, "🦙") {
		t.Errorf("the emoji should come out whole in one step: %q", steps)
	}

	// An incomplete sequence at the end comes out of Flush; bytes that can
	// never become UTF-8 are not held back.
	b0, b1 := spm.byteTok[0xF0], spm.byteTok[0x9F]
	d = spm.NewDecoder()
	if s := d.Add(b0) + d.Add(b1); s != "" {
		t.Errorf("partial emoji emitted %q", s)
	}
	if s := d.Flush(); s != "\xF0\x9F" {
		t.Errorf("Flush = %q", s)
	}
	if s := d.Add(spm.byteTok[0xFF]); s != "\xFF" {
		t.Errorf("Add(<0xFF>) = %q, want it passed through", s)
	}
	if s := d.Add(b0) + d.Add(spm.byteTok['A']); s != "\xF0A" {
		t.Errorf("broken sequence = %q, want passed through", s)
	}

	d = spm.NewDecoder()
	d.Special = true
	if s := d.Add(1); s != "<s>" {
		t.Errorf("Special decoder Add(BOS) = %q", s)
	}
}

func TestErrors(t *testing.T) {
	if _, err := DefaultVocab("bert", ""); !errors.Is(err, ErrUnknownModel) || !strings.Contains(err.Error(), "bert") {
		t.Errorf("model bert: %v", err)
	}
	if _, err := DefaultVocab(ModelBPE, "no-such-pre"); !errors.Is(err, ErrUnknownPre) || !strings.Contains(err.Error(), "no-such-pre") {
		t.Errorf("unknown pre: %v", err)
	}
	v, _ := DefaultVocab(ModelSPM, "")
	if _, err := New(v); !errors.Is(err, ErrInvalidVocab) {
		t.Errorf("no tokens: %v", err)
	}
	v.Tokens, v.Scores = []string{"a", "b"}, []float32{0}
	if _, err := New(v); !errors.Is(err, ErrInvalidVocab) {
		t.Errorf("short scores: %v", err)
	}
	v, _ = DefaultVocab(ModelBPE, "gpt-2")
	v.Tokens = []string{"a"}
	if _, err := New(v); !errors.Is(err, ErrInvalidVocab) {
		t.Errorf("BPE without merges: %v", err)
	}
	for pre := range presets {
		v, err := DefaultVocab(ModelBPE, pre)
		if err != nil {
			t.Fatal(err)
		}
		v.Tokens, v.Merges = []string{"a", "b", "ab"}, []string{"a b"}
		tk, err := New(v)
		if err != nil {
			t.Errorf("preset %q: %v", pre, err)
			continue
		}
		if got := tk.Decode(tk.Encode("ab ba", false, false)); got != "abba" {
			t.Errorf("preset %q: Decode(Encode(\"ab ba\")) = %q (the space has no token)", pre, got)
		}
	}
}

// TestFromGGUFMetadata builds metadata by hand to cover key handling.
func TestFromGGUFMetadata(t *testing.T) {
	strs := func(s ...string) gguf.Array { return gguf.Array{Type: gguf.TypeString, Values: s} }
	build := func(kv ...any) *gguf.Metadata {
		md := gguf.NewMetadata()
		for i := 0; i < len(kv); i += 2 {
			if err := md.Set(kv[i].(string), kv[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		return md
	}
	if _, err := FromGGUF(build("tokenizer.ggml.model", "t5", "tokenizer.ggml.tokens", strs("a"))); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("t5: %v", err)
	}
	if _, err := FromGGUF(build("tokenizer.ggml.model", "gpt2", "tokenizer.ggml.pre", "brand-new",
		"tokenizer.ggml.tokens", strs("a"), "tokenizer.ggml.merges", strs())); !errors.Is(err, ErrUnknownPre) || !strings.Contains(err.Error(), "brand-new") {
		t.Errorf("unknown pre: %v", err)
	}
	if _, err := FromGGUF(build("tokenizer.ggml.model", "llama")); !errors.Is(err, ErrInvalidVocab) {
		t.Errorf("no tokens: %v", err)
	}
	tk, err := FromGGUF(build(
		"tokenizer.ggml.model", "llama",
		"tokenizer.ggml.tokens", strs("<unk>", "<s>", "</s>", "▁", "a", "▁a", "<|im_end|>"),
		"tokenizer.ggml.scores", gguf.Array{Type: gguf.TypeFloat32, Values: []float32{0, 0, 0, -1, -2, -0.5, 0}},
		"tokenizer.ggml.token_type", gguf.Array{Type: gguf.TypeInt32, Values: []int32{2, 3, 3, 1, 1, 1, 4}},
		"tokenizer.ggml.eos_token_id", uint32(99), // out of range: default 2 stays
		"tokenizer.ggml.add_bos_token", false,
		"tokenizer.ggml.add_eos_token", true,
		"tokenizer.chat_template", "{{ messages }}",
	))
	if err != nil {
		t.Fatal(err)
	}
	if tk.BOS() != 1 || tk.EOS() != 2 || tk.UNK() != 0 || tk.AddBOS() || !tk.AddEOS() || tk.ChatTemplate() != "{{ messages }}" {
		t.Errorf("BOS %d EOS %d UNK %d AddBOS %v AddEOS %v template %q", tk.BOS(), tk.EOS(), tk.UNK(), tk.AddBOS(), tk.AddEOS(), tk.ChatTemplate())
	}
	// <|im_end|> is user-defined in this vocabulary but ends generation and
	// is promoted to control, as llama.cpp does.
	if !tk.IsEOG(6) || !tk.IsControl(6) || tk.Piece(6) != "" || tk.EOT() != 6 {
		t.Errorf("<|im_end|>: IsEOG %v IsControl %v Piece %q EOT %d", tk.IsEOG(6), tk.IsControl(6), tk.Piece(6), tk.EOT())
	}
	if got := tk.Encode("a", true, false); !slices.Equal(got, []int{5, 2}) {
		t.Errorf("Encode(a) = %v, want [5 2] (▁a, then EOS)", got)
	}
}

// byteLevelVocab is a tiny hand-made byte-level BPE vocabulary: the 256
// byte characters, then the merges' results, then extra tokens.
func byteLevelVocab(pre string, merges []string, extra ...string) Vocab {
	v, err := DefaultVocab(ModelBPE, pre)
	if err != nil {
		panic(err)
	}
	v.BOS, v.EOS, v.Merges = NoToken, NoToken, merges
	for b := range 256 {
		v.Tokens = append(v.Tokens, byteToUTF8[b])
	}
	for _, m := range merges {
		v.Tokens = append(v.Tokens, strings.Replace(m, " ", "", 1))
	}
	v.Tokens = append(v.Tokens, extra...)
	return v
}

// TestIgnoreMerges covers the Llama 3 rule that a whole pre-token word
// found in the vocabulary is used as is, without merging.
func TestIgnoreMerges(t *testing.T) {
	merges := []string{"h e", "l l", "he ll"} // "hello" merges to hell + o
	for _, c := range []struct {
		pre  string
		want []int
	}{
		{"llama-bpe", []int{259}},  // the word "hello" is token 259
		{"gpt-2", []int{258, 'o'}}, // merges only: "hell" "o"
	} {
		tk, err := New(byteLevelVocab(c.pre, merges, "hello"))
		if err != nil {
			t.Fatal(err)
		}
		// ids 256.. are he, ll, hell, then "hello" = 259
		if got := tk.Encode("hello", false, false); !slices.Equal(got, c.want) {
			t.Errorf("%s: Encode(hello) = %v, want %v", c.pre, got, c.want)
		}
		if got := tk.Decode(tk.Encode("hello \xff\xfe", false, false)); got != "hello \xff\xfe" {
			t.Errorf("%s: invalid UTF-8 round trip = %q", c.pre, got)
		}
	}
}

// TestConcurrentEncode runs Encode from several goroutines (run with -race).
func TestConcurrentEncode(t *testing.T) {
	for _, name := range []string{"llama-spm", "deepseek-llm"} {
		tk := loadVocab(t, vocabPath(name))
		inputs, outputs := readVectors(t, "ggml-vocab-"+name+".gguf")
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range inputs {
					i = (i + g) % len(inputs)
					if got := tk.Encode(inputs[i], false, false); !slices.Equal(got, outputs[i]) {
						t.Errorf("%s case %d: %v", name, i, got)
					}
				}
			}()
		}
		wg.Wait()
	}
}

// TestKimiSpecialTokens covers the special tokens llama.cpp finds by text
// in Kimi K2's vocabulary: [EOT] is the end of turn, [PAD] the FIM pad,
// and both, with [EOS], end generation.
func TestKimiSpecialTokens(t *testing.T) {
	v := byteLevelVocab("kimi-k2", []string{}, "[EOS]", "[EOT]", "[PAD]", "[BOS]")
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	eos, eot, pad, bos := 256, 257, 258, 259
	if tk.EOT() != eot {
		t.Errorf("EOT %d, want %d", tk.EOT(), eot)
	}
	for _, id := range []int{eos, eot, pad} {
		if !tk.IsEOG(id) || !tk.IsControl(id) {
			t.Errorf("%s: IsEOG %v IsControl %v", tk.Token(id), tk.IsEOG(id), tk.IsControl(id))
		}
	}
	if tk.IsEOG(bos) {
		t.Error("[BOS] ends generation")
	}
}

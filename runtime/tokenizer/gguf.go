package tokenizer

import (
	"fmt"

	"strata/runtime/gguf"
)

// GGUF metadata keys read by FromGGUF.
const (
	keyModel        = "tokenizer.ggml.model"
	keyPre          = "tokenizer.ggml.pre"
	keyTokens       = "tokenizer.ggml.tokens"
	keyScores       = "tokenizer.ggml.scores"
	keyTypes        = "tokenizer.ggml.token_type"
	keyMerges       = "tokenizer.ggml.merges"
	keyAddBOS       = "tokenizer.ggml.add_bos_token"
	keyAddEOS       = "tokenizer.ggml.add_eos_token"
	keyAddPrefix    = "tokenizer.ggml.add_space_prefix"
	keyChatTemplate = "tokenizer.chat_template"
	keyName         = "general.name"
)

// FromGGUF builds the tokenizer described by a GGUF file's tokenizer.ggml.*
// metadata, resolving defaults the way llama.cpp's llama_vocab::load does:
// DefaultVocab's values, overridden by the keys present (an id key out of
// range is ignored, as there). A model other than "llama" or "gpt2" fails
// with ErrUnknownModel, an unknown tokenizer.ggml.pre with ErrUnknownPre.
func FromGGUF(md *gguf.Metadata) (*Tokenizer, error) {
	model, ok := md.String(keyModel)
	if !ok {
		return nil, fmt.Errorf("%w: no %s", ErrInvalidVocab, keyModel)
	}
	pre, _ := md.String(keyPre)
	v, err := DefaultVocab(model, pre)
	if err != nil {
		return nil, err
	}
	v.Name, _ = md.String(keyName)
	v.ChatTemplate, _ = md.String(keyChatTemplate)
	if model == ModelBPE {
		if v.Merges, ok = md.Strings(keyMerges); !ok {
			return nil, fmt.Errorf("%w: no %s", ErrInvalidVocab, keyMerges)
		}
	}

	if v.Tokens, ok = md.Strings(keyTokens); !ok {
		return nil, fmt.Errorf("%w: no %s", ErrInvalidVocab, keyTokens)
	}
	if _, present := md.Get(keyScores); present {
		if v.Scores, ok = md.Float32s(keyScores); !ok {
			return nil, fmt.Errorf("%w: %s is not a float array", ErrInvalidVocab, keyScores)
		}
	}
	if _, present := md.Get(keyTypes); present {
		types, ok := md.Int32s(keyTypes)
		if !ok {
			return nil, fmt.Errorf("%w: %s is not an integer array", ErrInvalidVocab, keyTypes)
		}
		v.Types = make([]TokenType, len(types))
		for i, x := range types {
			v.Types[i] = TokenType(x)
		}
	}

	ids := []struct {
		key string
		id  *int
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.eom_token_id", &v.EOM},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.seperator_token_id", &v.SEP}, // sic, as llama.cpp spells it
		{"tokenizer.ggml.padding_token_id", &v.PAD},
		{"tokenizer.ggml.mask_token_id", &v.MASK},
		{"tokenizer.ggml.fim_pre_token_id", &v.FIMPre},
		{"tokenizer.ggml.fim_suf_token_id", &v.FIMSuf},
		{"tokenizer.ggml.fim_mid_token_id", &v.FIMMid},
		{"tokenizer.ggml.fim_pad_token_id", &v.FIMPad},
		{"tokenizer.ggml.fim_rep_token_id", &v.FIMRep},
		{"tokenizer.ggml.fim_sep_token_id", &v.FIMSep},
		// deprecated spellings
		{"tokenizer.ggml.prefix_token_id", &v.FIMPre},
		{"tokenizer.ggml.suffix_token_id", &v.FIMSuf},
		{"tokenizer.ggml.middle_token_id", &v.FIMMid},
	}
	for _, k := range ids {
		if x, ok := md.Uint(k.key); ok && x < uint64(len(v.Tokens)) {
			*k.id = int(x)
		}
	}
	if b, ok := md.Bool(keyAddBOS); ok {
		v.AddBOS = b
	}
	if b, ok := md.Bool(keyAddEOS); ok {
		v.AddEOS = b
	}
	if b, ok := md.Bool(keyAddPrefix); ok {
		v.AddSpacePrefix = b
	}
	return New(v)
}

// Package tokenizer implements the tokenizers of GGUF models, bit-compatible
// with llama.cpp (llama-vocab.cpp and unicode.cpp): the same text gives the
// same token ids as llama_tokenize.
//
// Two tokenizer.ggml.model kinds are supported:
//
//   - "llama": SentencePiece BPE as llama.cpp's llm_tokenizer_spm runs it.
//     Spaces become '▁', a space is prepended to the text (and after every
//     special token) when add_space_prefix is set, adjacent symbols are
//     merged best score first, and characters without a token fall back to
//     <0xXX> byte tokens.
//   - "gpt2": byte-level BPE. The text is first cut into words by the
//     pre-tokenizer that tokenizer.ggml.pre names (gpt-2, llama3/llama-bpe,
//     qwen2 for Qwen2/Qwen3, qwen35, deepseek-v3, kimi-k2, llama4/gpt-4o,
//     glm4, deepseek-llm, deepseek-coder, falcon, mpt, starcoder, refact and
//     most other presets llama.cpp knows; an unknown name is an
//     ErrUnknownPre error, never a guess), with llama.cpp's exact regular
//     expressions and its hand-written GPT-2, Llama 3, Qwen2, Qwen3.5 and
//     Kimi K2 splitters; each
//     word's bytes are mapped to GPT-2's printable byte alphabet and merged
//     by merge rank.
//
// Special tokens are split out of the text first, longest first, as in
// llama.cpp: user-defined tokens always, control tokens such as
// "<|im_start|>" only when Encode's parseSpecial is set.
//
// Decode is faithful to the token stream: an SPM vocabulary's dummy-prefix
// space comes back (" Hello"), and no clean-up of spaces is applied. A
// program printing llama2.c-style output strips one leading space from the
// first piece after BOS itself. Decoder streams pieces without splitting a
// UTF-8 character.
//
// Usage, from a GGUF file (see strata/runtime/gguf):
//
// FromGGUF builds the tokenizer from a model file's metadata; Encode
// adds BOS when the vocabulary wants it and parses special tokens when
// asked; a Decoder turns ids back into text as they come, holding back
// incomplete UTF-8 (Example).
//
// A Tokenizer is immutable and safe for concurrent use.
package tokenizer

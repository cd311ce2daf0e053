package stage

import (
	"fmt"

	"strata/messages"
	"strata/runtime/grammar"
	"strata/runtime/sample"
)

// Structured output on a cluster: the sampler runs on the last stage, so
// the JSON schema travels there in Sampling (as text: a peer's schema is
// untrusted input, compiled here under grammar's limits and a size cap),
// and the last stage masks every sampled token with the grammar. The
// origin sees the tokens as usual.

// maxSchemaBytes bounds the schema text one session may send.
const maxSchemaBytes = 64 << 10

// maxSchemas bounds the compiled schemas a shard keeps (agents send the
// same few tool schemas turn after turn).
const maxSchemas = 32

// grammars is a last stage's structured-output state: the vocabulary
// trie (the node's, from its description of the model) and compiled
// schemas by text. Touched only on the shard actor's goroutine.
type grammars struct {
	vocab   *grammar.Vocab
	schemas map[string]*grammar.Schema
}

// constrain attaches a matcher for the session's schema to its sampler.
func (s *shard) constrain(ss *shardSession, sp *sample.Sampler, p *messages.Sampling) error {
	text := p.GetJsonSchema()
	if len(text) > maxSchemaBytes {
		return fmt.Errorf("a JSON schema of %d bytes; at most %d allowed", len(text), maxSchemaBytes)
	}
	var sc *grammar.Schema
	if text == "" {
		sc = grammar.AnyJSON()
	} else if sc = s.gram.schemas[text]; sc == nil {
		var err error
		if sc, err = grammar.Compile([]byte(text)); err != nil {
			return err
		}
		if s.gram.schemas == nil || len(s.gram.schemas) >= maxSchemas {
			s.gram.schemas = map[string]*grammar.Schema{}
		}
		s.gram.schemas[text] = sc
	}
	if s.gram.vocab == nil {
		if s.file == nil {
			return fmt.Errorf("structured output: stage %s has no tokenizer", s.pid.Id)
		}
		// The node's description of the model: its API and sessions
		// tokenize with the same tokenizer, and its vocabulary trie is
		// built once per node.
		in, err := s.host.infoOf(s.file)
		if err != nil {
			return fmt.Errorf("structured output: %w", err)
		}
		if in.Tokenizer.VocabSize() > s.m.Vocab {
			return fmt.Errorf("structured output: the tokenizer has %d tokens, the output head only %d", in.Tokenizer.VocabSize(), s.m.Vocab)
		}
		s.gram.vocab = in.Vocab()
	}
	ss.matcher = grammar.NewMatcher(sc, s.gram.vocab, int(p.GetSchemaBudget()))
	ss.schemaFrom = int(p.GetSchemaFrom())
	sp.Constrain(ss.matcher)
	return nil
}

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"strata/actors/origin"
	"strata/runtime/engine"
	"strata/runtime/grammar"
	"strata/runtime/sample"
	"strata/runtime/tokenizer"
)

// Structured output: a JSON schema (OpenAI's response_format, Ollama's
// format, the input schema of a forced tool) compiled into a grammar that
// masks, at every sampling step, the tokens that cannot continue a valid
// document (package grammar). The sampler runs where the last layer runs,
// so the generator must take the constraint: the single-node engine
// (Local) takes a Matcher; a cluster (RemoteConstrainedGenerator) takes
// the schema, which its last stage compiles and applies.

// ConstrainedGenerator is a Generator that can restrict its sampling to
// a constraint (one per generation).
type ConstrainedGenerator interface {
	GenerateConstrained(ctx context.Context, req engine.Request, c sample.Constraint, onToken func(engine.Token) error) (engine.Result, error)
}

var _ ConstrainedGenerator = (*Local)(nil)

// RemoteConstrainedGenerator is a Generator whose Generate honours
// engine.Request.Schema: the schema travels to wherever sampling runs (a
// cluster's last stage). origin.Origin is one.
type RemoteConstrainedGenerator interface {
	Generator
	ConstrainsRemotely()
}

var _ RemoteConstrainedGenerator = (*origin.Origin)(nil)

// GenerateConstrained implements ConstrainedGenerator on the engine.
func (l *Local) GenerateConstrained(ctx context.Context, req engine.Request, c sample.Constraint, onToken func(engine.Token) error) (engine.Result, error) {
	if req.Model != l.name {
		return l.Generate(ctx, req, onToken)
	}
	return l.e.Generate(ctx, engine.Request{Tokens: req.Tokens, Prompt: req.Prompt, MaxTokens: req.MaxTokens, Sampling: req.Sampling, Stop: req.Stop, Constraint: c}, onToken)
}

// toolCall is the forced tool of a request: its output is the tool's
// input, a JSON document of the tool's schema.
type toolCall struct {
	name string
	id   string
}

// compileSchema compiles a request's JSON schema; nil or {} is any JSON.
func compileSchema(param string, raw json.RawMessage) (*grammar.Schema, *Error) {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return grammar.AnyJSON(), nil
	}
	s, err := grammar.Compile(raw)
	if err != nil {
		return nil, badRequest(param, "unsupported_value", "%v", err)
	}
	return s, nil
}

// vocabs caches each tokenizer's token trie (kept for the few models in
// use). A trie takes hundreds of milliseconds to build for a large
// vocabulary, so it is built outside the lock: the first request for a
// tokenizer builds it while the others for that tokenizer wait for it,
// and requests for other tokenizers go on meanwhile.
type vocabs struct {
	mu sync.Mutex
	m  map[*tokenizer.Tokenizer]*vocabBuild
	// build makes a trie; nil is grammar.VocabOf (tests count the builds).
	build func(grammar.Tokenizer) *grammar.Vocab
}

// vocabBuild is one tokenizer's trie, built once.
type vocabBuild struct {
	once sync.Once
	v    *grammar.Vocab
}

func (v *vocabs) of(tok *tokenizer.Tokenizer) *grammar.Vocab {
	v.mu.Lock()
	b, ok := v.m[tok]
	if !ok {
		if v.m == nil || len(v.m) >= maxFileModels {
			v.m = map[*tokenizer.Tokenizer]*vocabBuild{} // a build under way still finishes for those waiting on it
		}
		b = &vocabBuild{}
		v.m[tok] = b
	}
	build := v.build
	v.mu.Unlock()
	if build == nil {
		build = grammar.VocabOf
	}
	b.once.Do(func() { b.v = build(tok) })
	return b.v
}

// noConstraints refuses structured output on a generator that cannot
// constrain its sampling.
func noConstraints() *Error {
	return badRequest("", "unsupported_value", "Structured output and forced tool calls need constrained sampling, which this node's generator does not offer.")
}

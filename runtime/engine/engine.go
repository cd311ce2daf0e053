// Package engine is the one-node library entry point: open a GGUF model,
// then generate text with a per-token callback. It ties together the
// model, tokenizer and sampler of strata/runtime; distributed generation
// lives in strata/actors and uses the same pieces shard by shard.
//
//	e, err := engine.Open("stories260K.gguf", engine.Options{})
//	if err != nil { ... }
//	defer e.Close()
//	res, err := e.Generate(ctx, engine.Request{Prompt: "Once upon a time", MaxTokens: 64},
//		func(t engine.Token) error { fmt.Print(t.Text); return nil })
package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"strata/runtime/gguf"
	"strata/runtime/model"
	"strata/runtime/sample"
	"strata/runtime/tensor"
	"strata/runtime/tokenizer"
)

// Options configures Open. Zero values pick the defaults noted.
type Options struct {
	Threads int // worker threads; 0 = GOMAXPROCS
	Context int // KV cache positions per generation; 0 = the model's context_length, at most 4096
	Batch   int // prompt tokens per prefill step; 0 = 64
}

// Engine is an open model. Generate may be called from several goroutines;
// each call has its own KV cache and scratch, and they share the worker pool.
type Engine struct {
	File      *gguf.File
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	pool      *tensor.Pool
	ctxLen    int
	batch     int
}

// Open memory-maps the model at path and prepares it for generation.
func Open(path string, opts Options) (*Engine, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	e, err := New(f, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return e, nil
}

// New builds an Engine over an already open file; Close closes it.
func New(f *gguf.File, opts Options) (*Engine, error) {
	cfg, err := model.ConfigOf(f.Metadata())
	if err != nil {
		return nil, err
	}
	m, err := model.Load(f, 0, cfg.Layers)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f.Metadata())
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > m.Vocab {
		return nil, fmt.Errorf("engine: tokenizer has %d tokens, the embedding only %d", tok.VocabSize(), m.Vocab)
	}
	e := &Engine{File: f, Model: m, Tokenizer: tok, ctxLen: opts.Context, batch: opts.Batch}
	if e.ctxLen <= 0 {
		e.ctxLen = min(cfg.Context, 4096)
	}
	if e.batch <= 0 {
		e.batch = 64
	}
	e.pool = tensor.NewPool(opts.Threads)
	return e, nil
}

// Close releases the worker pool and unmaps the file.
func (e *Engine) Close() error {
	e.pool.Close()
	return e.File.Close()
}

// ContextLength is the most positions (prompt + generated) one generation holds.
func (e *Engine) ContextLength() int { return e.ctxLen }

// Request is one generation, on one node or across a cluster.
type Request struct {
	// Model names the model on a cluster (strata/actors); an Engine runs
	// the model it opened and does not read it.
	Model  string
	Prompt string
	// Tokens, when set, is used instead of encoding Prompt (no BOS is added).
	Tokens    []int
	MaxTokens int // 0 = until end of generation or the context is full
	Sampling  sample.Params
	Stop      []string // generation stops before any of these strings
	// Constraint, when set, restricts the sampled tokens (a grammar); see
	// sample.Sampler.Constrain. It serves one generation.
	Constraint sample.Constraint
}

// Token is one generated token as delivered to the callback.
type Token struct {
	ID    int
	Index int    // 0 for the first generated token
	Text  string // the text this token completes: never half a UTF-8 character; may be ""
}

// Finish reasons.
const (
	FinishStop   = "stop"   // end-of-generation token or a stop string
	FinishLength = "length" // MaxTokens or the context length reached
)

// Result summarises a finished generation.
type Result struct {
	PromptTokens    int
	Tokens          []int // generated ids
	Text            string
	FinishReason    string
	PrefillDuration time.Duration
	DecodeDuration  time.Duration
	Stats           Stats // this generation's decode steps
}

// Encode tokenizes a prompt the way llama.cpp and llama2.c do for the
// model: BOS (when the vocabulary asks for it), then the text.
func (e *Engine) Encode(prompt string) []int {
	return e.Tokenizer.Encode(prompt, true, false)
}

// Generate runs one generation, calling onToken for each generated token
// in order. It stops at an end-of-generation token, a stop string,
// MaxTokens, a full context, an error from onToken, or when ctx is done
// (returning ctx.Err() with the partial Result).
func (e *Engine) Generate(ctx context.Context, req Request, onToken func(Token) error) (res Result, err error) {
	if err := req.Sampling.Validate(); err != nil {
		return res, err
	}
	prompt := req.Tokens
	if prompt == nil {
		prompt = e.Encode(req.Prompt)
	}
	if len(prompt) == 0 {
		return res, errors.New("engine: empty prompt (the vocabulary adds no BOS)")
	}
	if len(prompt) >= e.ctxLen {
		return res, fmt.Errorf("engine: prompt of %d tokens does not fit the context of %d", len(prompt), e.ctxLen)
	}
	sampler, err := sample.New(req.Sampling, e.Model.Vocab)
	if err != nil {
		return res, err
	}
	for _, t := range prompt {
		sampler.Accept(t)
	}
	if req.Constraint != nil {
		sampler.Constrain(req.Constraint)
	}
	m := e.Model
	st := m.NewState(e.pool, min(e.batch, len(prompt)), e.ctxLen)
	steps := &localSteps{prompt: prompt, st: st, cache: m.NewCache(e.ctxLen), sampler: sampler}
	return Loop(ctx, e.Tokenizer, prompt, req, e.ctxLen, steps, onToken)
}

// localSteps runs a generation's forward passes on this node.
type localSteps struct {
	prompt  []int
	st      *model.State
	cache   *model.Cache
	sampler *sample.Sampler
	next    [1]int // the token fed back each step, without a new slice per token
	steps   int
	time    time.Duration
}

// Prefill runs the prompt in batches of st.Batch.
func (l *localSteps) Prefill(ctx context.Context) (int, error) {
	st := l.st
	for i := 0; i < len(l.prompt); i += st.Batch {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		chunk := l.prompt[i:min(i+st.Batch, len(l.prompt))]
		if err := st.Embed(chunk); err != nil {
			return 0, err
		}
		if err := st.Forward(l.cache, len(chunk)); err != nil {
			return 0, err
		}
	}
	return l.sample((len(l.prompt) - 1) % st.Batch)
}

// Step runs one token.
func (l *localSteps) Step(ctx context.Context, fed int) (int, error) {
	start := time.Now()
	l.next[0] = fed
	if err := l.st.Embed(l.next[:]); err != nil {
		return 0, err
	}
	if err := l.st.Forward(l.cache, 1); err != nil {
		return 0, err
	}
	id, err := l.sample(0)
	l.time += time.Since(start)
	l.steps++
	return id, err
}

func (l *localSteps) sample(row int) (int, error) {
	logits, err := l.st.LogitsOf(row)
	if err != nil {
		return 0, err
	}
	id := l.sampler.Sample(logits)
	l.sampler.Accept(id)
	return id, nil
}

// Stats implements Stepper: every step is compute.
func (l *localSteps) Stats() Stats {
	if l.steps == 0 {
		return Stats{}
	}
	mean := l.time / time.Duration(l.steps)
	return Stats{Steps: l.steps, Round: mean, Compute: mean}
}

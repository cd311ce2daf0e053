// Package engine is the one-node library entry point: open a GGUF model,
// then generate text with a per-token callback. It ties together the
// model, tokenizer and sampler of strata/runtime; distributed generation
// lives in strata/actors and uses the same pieces shard by shard.
//
// Open a model, then Generate with a callback for each token (Example).
package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"strata/runtime/gguf"
	"strata/runtime/gpu"
	"strata/runtime/grammar"
	"strata/runtime/model"
	"strata/runtime/modelinfo"
	"strata/runtime/sample"
	"strata/runtime/tensor"
	"strata/runtime/tokenizer"
)

// Options configures Open. Zero values pick the defaults noted.
type Options struct {
	Threads int // worker threads; 0 = GOMAXPROCS
	Context int // KV cache positions per generation; 0 = the model's context_length, at most model.DefaultContext
	Batch   int // prompt tokens per prefill step; 0 = 64
	// KVType is the KV cache's element type; the zero value is f16 (the
	// default), model.KVQ8_0 halves it again, model.KVF32 keeps every bit.
	KVType model.KVType
	// PromptCache is how many finished generations' KV caches are kept
	// for prompt caching: a request whose prompt starts with what one of
	// them holds (a conversation's next turn) reuses it and prefills only
	// the rest. Each costs one context's KV cache; 0 = 1, negative = none.
	PromptCache int
	// Draft is a GGUF model of the same vocabulary whose greedy guesses
	// speculative decoding checks (Request.Speculate "draft"); it shares
	// the worker pool. Empty = none.
	Draft string
	// Speculate is the speculation source of requests that do not name
	// one: "" or "off", "ngram", "draft" (see speculate.go).
	Speculate string
	// GuessEveryStep guesses at every step, also where plain steps are
	// measured faster (pace.go): for tests, and for measuring speculation
	// itself.
	GuessEveryStep bool
	// GPU is the device that computes the matrix products of the last
	// GPULayers layers (gpu.AllLayers: all, with the output head; 0:
	// none): "" or off (none), auto (the first GPU, if any), or a device
	// index.
	GPU       string
	GPULayers int
}

// Engine is an open model. Generate may be called from several goroutines;
// each call has its own KV cache and scratch, and they share the worker pool.
type Engine struct {
	File      *gguf.File
	Model     *model.Model
	Info      *modelinfo.Info      // the model's description, read once
	Tokenizer *tokenizer.Tokenizer // Info's
	pool      *tensor.Pool
	ownPool   bool // the pool is the engine's (a draft shares its target's)
	ctxLen    int
	batch     int
	batcher   *batcher // runs every generation's forward passes

	draft          *Engine      // the draft model, nil without one
	speculate      string       // the default speculation source
	guessEveryStep bool         // Options.GuessEveryStep
	gpu            *gpu.Offload // the matrix products on a device; nil = none
	active         atomic.Int32 // generations running now

	mu   sync.Mutex
	kept []keptCache // prompt cache, least recently kept first
	keep int         // its capacity
}

// Footprint is the memory the engine holds as a draft model: its weights
// and the KV cache of one generation of its whole context (a draft's
// cache is made at its session's first guess).
func (e *Engine) Footprint() uint64 {
	var weights uint64
	for _, t := range e.File.Tensors() {
		weights += uint64(len(e.File.Data(t)))
	}
	return weights + e.Model.CacheBytes(e.ctxLen)
}

// keptCache is a finished generation's KV cache and the tokens it holds.
type keptCache struct {
	cache  *model.Cache
	tokens []int
}

// minCachedPrefix is the shortest shared prefix worth reusing.
const minCachedPrefix = 16

// takeCached removes and returns the kept cache that shares the longest
// prefix with prompt, truncated to that prefix (at most len(prompt)-1:
// the last prompt token must run to give logits), and its length; nil
// when none shares minCachedPrefix tokens. Truncation is exact: attention
// reads only positions below Cache.Len.
func (e *Engine) takeCached(prompt []int) (*model.Cache, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	best, bestN := -1, 0
	for i, k := range e.kept {
		n := 0
		for n < len(k.tokens) && n < len(prompt) && k.tokens[n] == prompt[n] {
			n++
		}
		if n > bestN {
			best, bestN = i, n
		}
	}
	bestN = min(bestN, len(prompt)-1)
	if best < 0 || bestN < minCachedPrefix {
		return nil, 0
	}
	c := e.kept[best].cache
	e.kept = slices.Delete(e.kept, best, best+1)
	c.Len = bestN
	return c, bestN
}

// keepCache keeps a finished generation's cache, which holds tokens.
func (e *Engine) keepCache(c *model.Cache, tokens []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.keep <= 0 {
		return
	}
	if len(e.kept) >= e.keep {
		e.kept = slices.Delete(e.kept, 0, 1)
	}
	e.kept = append(e.kept, keptCache{cache: c, tokens: tokens})
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
	if err := CheckSpeculate(opts.Speculate); err != nil {
		return nil, err
	}
	e, err := newEngine(f, opts, nil)
	if err != nil {
		return nil, err
	}
	e.speculate, e.guessEveryStep = opts.Speculate, opts.GuessEveryStep
	if opts.Draft != "" {
		df, err := gguf.Open(opts.Draft)
		if err != nil {
			e.stop()
			return nil, fmt.Errorf("draft model: %w", err)
		}
		d, err := newEngine(df, Options{Context: e.ctxLen, Batch: e.batch, KVType: opts.KVType, PromptCache: -1}, e.pool)
		if err == nil {
			err = DraftFits(e.Tokenizer, d)
			if err != nil {
				d.Close()
			}
		} else {
			df.Close()
		}
		if err != nil {
			e.stop()
			return nil, fmt.Errorf("draft model %s: %w", opts.Draft, err)
		}
		e.draft = d
	} else if opts.Speculate == SpeculateDraft {
		e.stop()
		return nil, errors.New("engine: speculation from a draft model needs one (Options.Draft)")
	}
	return e, nil
}

// newEngine builds an Engine over f; pool, when not nil, is shared (a
// draft model's) and not closed with it.
func newEngine(f *gguf.File, opts Options, pool *tensor.Pool) (*Engine, error) {
	in, err := modelinfo.Read(f)
	if err != nil {
		return nil, err
	}
	cfg, tok := in.Config, in.Tokenizer
	m, err := model.Load(f, 0, cfg.Layers)
	if err != nil {
		return nil, err
	}
	if err := m.SetKVType(opts.KVType); err != nil {
		return nil, err
	}
	if tok.VocabSize() > m.Vocab {
		return nil, fmt.Errorf("engine: tokenizer has %d tokens, the embedding only %d", tok.VocabSize(), m.Vocab)
	}
	e := &Engine{File: f, Model: m, Info: in, Tokenizer: tok, ctxLen: opts.Context, batch: opts.Batch}
	if e.ctxLen <= 0 {
		e.ctxLen = model.SessionContext(cfg.Context, 0)
	}
	if e.batch <= 0 {
		e.batch = 64
	}
	e.keep = opts.PromptCache
	if e.keep == 0 {
		e.keep = 1
	}
	e.pool, e.ownPool = pool, pool == nil
	if e.ownPool {
		e.pool = tensor.NewPool(opts.Threads)
	}
	st := m.NewState(e.pool, e.batch, e.ctxLen)
	if e.gpu, err = gpu.Accelerate(m, opts.GPU, opts.GPULayers); err != nil {
		if e.ownPool {
			e.pool.Close()
		}
		return nil, err
	}
	if e.gpu != nil {
		st.Accelerate(e.gpu)
	}
	e.batcher = newBatcher(st, m.Vocab, m.InvariantRows())
	return e, nil
}

// GPU says which device computes the model's matrix products, and which;
// "" when the CPU computes them all.
func (e *Engine) GPU() string {
	if e.gpu == nil {
		return ""
	}
	return e.gpu.String()
}

// Close stops the engine's batcher (generations still running fail),
// releases the worker pool and unmaps the file.
func (e *Engine) Close() error {
	e.stop()
	return e.File.Close()
}

// stop is Close without closing the file (New's caller owns it when New
// fails).
func (e *Engine) stop() {
	e.batcher.close()
	if e.draft != nil {
		e.draft.Close()
	}
	if e.ownPool {
		e.pool.Close()
	}
	if e.gpu != nil {
		e.gpu.Close()
	}
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
	// sample.Sampler.Constrain. It serves one generation, in this process.
	Constraint sample.Constraint
	// Schema, when set (and Constraint is not), constrains the output to
	// a JSON document of this schema (structured output): on a cluster it
	// travels to the last stage, which masks its sampling.
	Schema *grammar.Schema
	// Speculate chooses where guessed tokens come from (speculative
	// decoding): "off", "ngram" or "draft"; "" = the engine's default.
	// The answer is the same with each (see speculate.go); only its speed
	// differs.
	Speculate string
}

// Token is one generated token as delivered to the callback.
type Token struct {
	ID    int
	Index int    // 0 for the first generated token
	Text  string // the text this token completes: never half a UTF-8 character; may be ""
	// More says that the next token follows at once, without a forward
	// pass (a speculative step checked several): a stream may write them
	// out together.
	More bool
}

// Finish reasons.
const (
	FinishStop   = "stop"   // end-of-generation token or a stop string
	FinishLength = "length" // MaxTokens or the context length reached
)

// ErrBusy says a generation found no room: the memory of the stages (the
// KV caches) is held by other sessions now. Nothing was generated; the
// same request can be sent again later (the API answers 503 with
// Retry-After).
var ErrBusy = errors.New("the cluster is busy: no memory for another session's KV cache now")

// Result summarises a finished generation.
type Result struct {
	PromptTokens    int
	CachedTokens    int   // prompt tokens whose KV came from a cached earlier generation
	Tokens          []int // generated ids
	Text            string
	FinishReason    string
	PrefillDuration time.Duration
	DecodeDuration  time.Duration
	Stats           Stats // this generation's decode steps
	// Speculative decoding: tokens guessed, and those of them the model
	// agreed with (each one a token that cost no step of its own).
	Drafted, Accepted int
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
	if req.Constraint == nil && req.Schema != nil {
		// The document starts after the prompt; its budget is MaxTokens
		// or what the context leaves, whichever is less.
		budget := e.ctxLen - len(prompt)
		if req.MaxTokens > 0 {
			budget = min(budget, req.MaxTokens)
		}
		sampler.Constrain(grammar.NewMatcher(req.Schema, e.grammarVocab(), budget))
	}
	source := req.Speculate
	if source == "" {
		source = e.speculate
	}
	spec, err := NewSpeculator(source, e.draft, e.ctxLen, e.Model.Vocab, min(e.batch, e.Model.InvariantRows())-1)
	if err != nil {
		return res, fmt.Errorf("engine: %w", err)
	}
	if spec != nil && e.guessEveryStep {
		spec.GuessEveryStep()
	}
	e.active.Add(1)
	defer e.active.Add(-1)
	m := e.Model
	cache, cached := e.takeCached(prompt)
	if cache == nil {
		cache = m.NewCache(e.ctxLen)
	}
	steps := &localSteps{prompt: prompt, from: cached, b: e.batcher, batch: e.batch, cache: cache, sampler: sampler,
		w: work{cache: cache, logits: make([]float32, m.Vocab), done: make(chan error, 1)}, active: &e.active, vocab: m.Vocab}
	if spec != nil {
		steps.spec = spec
		steps.seq = append(make([]int, 0, len(prompt)+256), prompt...)
		steps.sw = work{cache: cache, logits: make([]float32, (spec.Most()+1)*m.Vocab), every: true, done: make(chan error, 1)}
	}
	res, err = Loop(ctx, e.Tokenizer, prompt, req, e.ctxLen, steps, onToken)
	res.CachedTokens = cached
	if spec != nil {
		// Checked tokens the answer stopped before did not count.
		res.Drafted, res.Accepted = spec.Drafted, spec.Accepted-len(steps.ahead)
	}
	if err == nil {
		// A clean end: the next turn of the conversation may resume it.
		// The cache may hold verified tokens the answer stopped before.
		cache.Len = min(cache.Len, len(prompt)+len(res.Tokens))
		e.keepCache(cache, seen(prompt, res.Tokens, cache.Len))
	}
	return res, err
}

// grammarVocab is the vocabulary trie structured output matches tokens
// against, built on first use.
func (e *Engine) grammarVocab() *grammar.Vocab { return e.Info.Vocab() }

// seen is what a finished generation's KV cache holds: the prompt, then
// every generated token fed back (all but the last one sampled; an
// end-of-generation token is never fed).
func seen(prompt, generated []int, n int) []int {
	return append(append(make([]int, 0, len(prompt)+len(generated)), prompt...), generated...)[:n]
}

// localSteps runs a generation's forward passes on this node, through
// the engine's batcher (in company of the generations running with it).
type localSteps struct {
	prompt  []int
	from    int // prompt positions the cache already holds (prompt caching)
	b       *batcher
	batch   int // prompt tokens per step
	cache   *model.Cache
	sampler *sample.Sampler
	w       work   // this generation's work, reused every step
	next    [1]int // the token fed back each step, without a new slice per token
	steps   int
	time    time.Duration

	// Speculative decoding (nil spec: none): the prompt and every token
	// fed, the verified tokens not yet returned, a step's tokens (the fed
	// one, then the guesses) and its work (every row's logits).
	spec   *Speculator
	seq    []int
	ahead  []int
	rows   []int
	sw     work
	active *atomic.Int32 // the engine's running generations
	vocab  int
}

// Prefill runs the prompt, after what the cache holds, in chunks of
// batch tokens (so that a long prompt does not stall the others).
func (l *localSteps) Prefill(ctx context.Context) (int, error) {
	for i := l.from; i < len(l.prompt); i += l.batch {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		l.w.tokens = l.prompt[i:min(i+l.batch, len(l.prompt))]
		if err := l.b.do(&l.w); err != nil {
			return 0, err
		}
	}
	return l.sample()
}

// Step runs one token, or returns the next of the tokens a speculative
// step verified.
func (l *localSteps) Step(ctx context.Context, fed int) (int, error) {
	if l.spec != nil {
		l.spec.Tick(len(l.ahead))
		l.seq = append(l.seq, fed)
		if len(l.ahead) > 0 {
			id := l.ahead[0]
			l.ahead = l.ahead[1:]
			return id, nil
		}
		if l.active.Load() == 1 {
			return l.speculate(fed)
		}
		// Other generations share the steps: batching already reads the
		// weights once for several tokens, so speculation steps aside.
	}
	start := time.Now()
	l.next[0] = fed
	l.w.tokens = l.next[:]
	if err := l.b.do(&l.w); err != nil {
		return 0, err
	}
	id, err := l.sample()
	l.time += time.Since(start)
	l.steps++
	return id, err
}

// Ready implements engine.Ready: the checked tokens not yet returned.
func (l *localSteps) Ready() int { return len(l.ahead) }

// speculate runs fed and the guesses for its successors as one step,
// keeps the longest run of guesses the sampler agrees with, and returns
// the first token of the answer (the others wait in ahead).
func (l *localSteps) speculate(fed int) (int, error) {
	start := time.Now()
	guesses, err := l.spec.Guess(l.seq, l.cache.Capacity-l.cache.Len-1)
	if err != nil {
		guesses = nil // the draft failed: this generation goes on without guesses
	}
	// Structured output: no row for a guess the grammar would mask.
	guesses = guesses[:l.sampler.Allows(guesses)]
	at := l.cache.Len
	l.rows = append(append(l.rows[:0], fed), guesses...)
	l.sw.tokens = l.rows
	if err := l.b.do(&l.sw); err != nil {
		return 0, err
	}
	var id int
	for i := range l.rows {
		t := l.sampler.Sample(l.sw.logits[i*l.vocab : (i+1)*l.vocab])
		l.sampler.Accept(t)
		if i == 0 {
			id = t
		} else {
			l.ahead = append(l.ahead, t)
		}
		if i == len(guesses) || t != guesses[i] {
			break
		}
	}
	// The cache keeps fed and the guesses that were right; the keys and
	// values of the others are cut off.
	kept := len(l.ahead)
	l.cache.Len = at + 1 + kept
	l.spec.Learn(len(guesses), kept)
	l.time += time.Since(start)
	l.steps++
	return id, nil
}

// sample draws the next token from the last step's logits.
func (l *localSteps) sample() (int, error) {
	id := l.sampler.Sample(l.w.logits)
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

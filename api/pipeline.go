package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"strata/runtime/engine"
	"strata/runtime/grammar"
	"strata/runtime/sample"
	"strata/runtime/tokenizer"
	"strata/runtime/toolcall"
)

// The request pipeline every surface shares. A surface (openai.go,
// anthropic.go, ollama.go, responses.go) decodes its own request shape
// into a job: messages rendered through the model's chat template (or a
// prompt), token-bounded, with sampling settings; then run queues it,
// generates, and hands the text to the surface's streamer, which writes
// the answer in that surface's shape. Errors go out in the surface's
// error shape (Server.fail by endpoint).

// job is one validated generation request, ready to queue.
type job struct {
	endpoint string // for metrics and the error shape: "chat", "completions", "messages", "ollama", "responses"
	model    string
	tok      *tokenizer.Tokenizer
	ctxLen   int // the model's context length (ModelInfo.ContextLength), from the lookup that gave tok
	tokens   []int
	echo     string // prompt text to send before the answer (completions echo)
	maxTok   int
	params   sample.Params
	stop     []string
	stream   bool
	usage    bool // stream a usage chunk
	id       string
	created  int64
	schema   *grammar.Schema // structured output: the document must match it
	tool     *toolCall       // a forced tool: the document is its input
	tools    *toolUse        // tools the model may call (tool_choice auto)
}

// finish is how a generation ended, in the terms every surface needs.
type finish struct {
	reason  string // engine.FinishStop or engine.FinishLength
	stopSeq string // the stop string that ended it, if one did
	usage   Usage
	tokens  []int           // the generated ids
	calls   []toolcall.Call // the tool calls parsed out of the answer (tools.go)
}

// streamer receives the answer as it is generated and writes it in one
// surface's shape: collected into one JSON answer, or streamed.
type streamer interface {
	// text is the next piece of the answer.
	text(s string) error
	// finish ends a successful answer.
	finish(f finish) error
	// failed reports an error that came after the answer began (in the
	// stream, as the surface does) and returns true; false when nothing
	// was sent yet, so that the caller answers with an HTTP error.
	failed(e *Error) bool
}

// chatPrompt renders msgs for j's model into j.tokens (and j.tok),
// bounded by bytes before tokenizing and by tokens after. A nil *Error
// with ctx done means the client left.
func (s *Server) chatPrompt(ctx context.Context, j *job, msgs []Message, param string) *Error {
	info, tok, e := s.lookup(j.model)
	if e != nil {
		return e
	}
	j.tok, j.ctxLen = tok, info.ContextLength
	prompt, err := renderJob(ctx, j, tok, msgs)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return badRequest(param, "invalid_value", "The model's chat template refused the messages: %v", err)
	}
	if prompt.Fallback != nil {
		warnFallback(s.cfg.Logger, j.model, tok.ChatTemplate(), prompt.Fallback)
	}
	if e := s.fitsBytes(info, tok, prompt.TextBytes(), param); e != nil {
		return e
	}
	j.tokens = prompt.Encode(tok)
	if e := s.fits(info, len(j.tokens)); e != nil {
		e.Param = strPtr(param)
		return e
	}
	return nil
}

// prepareChat is chatPrompt for a handler: when there is no prompt to
// run, it has answered the request (the error in the surface's shape, or
// an error when its context ended: contextEnded) and returns false.
func (s *Server) prepareChat(w http.ResponseWriter, r *http.Request, j *job, msgs []Message, param string) bool {
	e := s.chatPrompt(r.Context(), j, msgs, param)
	switch {
	case e != nil:
		s.fail(w, j.endpoint, e)
	case r.Context().Err() != nil:
		s.contextEnded(r.Context(), w, j.endpoint, nil)
	default:
		return true
	}
	return false
}

// enter waits until the queue admits a generation request. Admitted, it
// says on w's headers where the request stood in line on arrival (0: a
// slot was free) and how long it waited — X-Strata-Queue-Position and
// X-Strata-Queue-Wait-Ms, sent with the answer's first bytes — and
// returns true; the caller must Release. Refused (the line is full, the
// node is leaving), it has answered; a client that went away while
// waiting is counted.
func (s *Server) enter(ctx context.Context, w http.ResponseWriter, endpoint string) bool {
	arrived := time.Now()
	place, err := s.queue.Acquire(ctx)
	switch {
	case errors.Is(err, ErrQueueFull):
		_, waiting := s.queue.Len()
		s.fail(w, endpoint, queueFull(waiting))
	case errors.Is(err, ErrLeaving):
		s.fail(w, endpoint, leaving())
	case err != nil:
		s.contextEnded(ctx, w, endpoint, nil)
	}
	if err != nil {
		return false
	}
	waited := time.Since(arrived)
	s.metrics.queued(waited)
	w.Header().Set("X-Strata-Queue-Position", strconv.Itoa(place))
	w.Header().Set("X-Strata-Queue-Wait-Ms", strconv.FormatInt(waited.Milliseconds(), 10))
	return true
}

// contextEnded answers a request whose context ended before its answer
// was complete: the node stopping, or mostly a client that hung up (it
// reads nothing of what follows). Either way an answer begun (out, where
// not nil, has started its stream) ends with an error the client can act
// on, not as if complete, and one not begun gets a 503: an empty 200 reads
// as a stream that ended without [DONE], a lost answer (the soak found
// one: a context ended under a client still reading, cause unknown). The
// metrics count a cause other than the node stopping as 499.
func (s *Server) contextEnded(ctx context.Context, w http.ResponseWriter, endpoint string, out streamer) {
	e, status := stopped(), http.StatusServiceUnavailable
	if !errors.Is(context.Cause(ctx), errStopping) {
		e, status = cancelled(ctx), 499
	}
	if out != nil && out.failed(e) {
		if status != 499 {
			status = http.StatusOK // the stream's 200 went out
		}
	} else {
		writeErrorShape(w, shapeOf(endpoint), e)
	}
	s.metrics.request(endpoint, status)
}

// run queues j, generates, and answers through out. The generation runs
// under the request's context: a client that goes away cancels it, and
// so does a failed write.
func (s *Server) run(w http.ResponseWriter, r *http.Request, j *job, out streamer, start time.Time) {
	ctx := r.Context()
	cg, constrained := s.cfg.Generator.(ConstrainedGenerator)
	_, remote := s.cfg.Generator.(RemoteConstrainedGenerator)
	if j.schema != nil && !constrained && !remote {
		s.fail(w, j.endpoint, noConstraints())
		return
	}
	if !s.enter(ctx, w, j.endpoint) {
		return
	}
	defer s.queue.Release()

	if j.echo != "" {
		out.text(j.echo)
	}
	if j.tools != nil {
		out = newToolOut(j.tools, out)
	}
	first := true
	lastEOG := false
	req := engine.Request{Model: j.model, Tokens: j.tokens, MaxTokens: j.maxTok, Sampling: j.params, Stop: j.stop}
	generate := s.cfg.Generator.Generate
	if j.schema != nil && !constrained {
		req.Schema = j.schema // the cluster's last stage masks its sampling
	} else if j.schema != nil {
		budget := j.maxTok
		if j.ctxLen > 0 && (budget == 0 || j.ctxLen-len(j.tokens) < budget) {
			budget = j.ctxLen - len(j.tokens)
		}
		m := grammar.NewMatcher(j.schema, s.vocabs.of(j.tok), budget)
		generate = func(ctx context.Context, req engine.Request, on func(engine.Token) error) (engine.Result, error) {
			return cg.GenerateConstrained(ctx, req, m, on)
		}
	}
	res, err := generate(ctx, req,
		func(t engine.Token) error {
			if first {
				s.metrics.firstToken(time.Since(start))
				first = false
			}
			s.metrics.token(j.model)
			lastEOG = j.tok != nil && j.tok.IsEOG(t.ID)
			text := t.Text
			if j.tools != nil {
				text = j.tools.piece(t)
			}
			if text == "" {
				return nil
			}
			return holdFlushes(w, t.More, func() error { return out.text(text) })
		})
	s.metrics.finished(j.model, res)
	usage := Usage{PromptTokens: len(j.tokens), CompletionTokens: len(res.Tokens), PromptTokensDetails: &PromptTokensDetails{CachedTokens: res.CachedTokens}}
	if res.Drafted > 0 {
		usage.CompletionTokensDetails = &CompletionTokensDetails{AcceptedPredictionTokens: res.Accepted, RejectedPredictionTokens: res.Drafted - res.Accepted}
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	if err != nil {
		if ctx.Err() != nil {
			s.contextEnded(ctx, w, j.endpoint, out)
			return
		}
		e := serverError(err)
		if errors.Is(err, ErrModelNotFound) {
			e = modelNotFound(j.model)
		}
		if errors.Is(err, engine.ErrBusy) {
			e = busy(err)
		}
		if s.cfg.Logger != nil {
			s.cfg.Logger.Warn("generation failed", "model", j.model, "err", err)
		}
		if out.failed(e) {
			s.metrics.request(j.endpoint, http.StatusOK)
			return
		}
		s.fail(w, j.endpoint, e)
		return
	}
	f := finish{reason: res.FinishReason, usage: usage, tokens: res.Tokens}
	if f.reason == "" {
		f.reason = engine.FinishStop
	}
	if f.reason == engine.FinishStop && !lastEOG && j.tok != nil {
		f.stopSeq = stopHit(j.tok.Decode(res.Tokens), j.stop)
	}
	if err := out.finish(f); err == nil {
		s.metrics.request(j.endpoint, http.StatusOK)
	}
}

// stopHit is the stop string that ended a generation whose tokens decode
// to full (the text before the stop string, then the token that
// completed it): the one found earliest.
func stopHit(full string, stops []string) string {
	best, at := "", len(full)+1
	for _, st := range stops {
		if i := strings.Index(full, st); st != "" && i >= 0 && i < at {
			best, at = st, i
		}
	}
	return best
}

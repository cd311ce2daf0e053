package engine

import (
	"context"
	"time"

	"strata/runtime/tokenizer"
)

// Stepper runs a model for the generation loop: one node's forward pass
// (Engine) or a ring of stages across a cluster (strata/actors). The loop
// owns what the user sees (text, stop strings, limits); the Stepper owns
// positions and KV caches.
type Stepper interface {
	// Prefill runs the prompt and returns the first generated token.
	Prefill(ctx context.Context) (int, error)
	// Step feeds back the token returned last and returns the next one.
	Step(ctx context.Context, fed int) (int, error)
	// Stats summarises the steps run so far.
	Stats() Stats
}

// Ready is what a Stepper that checks several tokens in one step
// (speculative decoding) also implements: how many checked tokens wait,
// to be returned by the next Steps without a forward pass.
type Ready interface {
	Ready() int
}

// Stats summarises the decode steps of one generation.
type Stats struct {
	Steps int // decode steps timed (a cluster leaves out the first after a recovery)
	// Stages is the ring's stages at the end; 0 on one node (no ring).
	Stages     int
	Recoveries int           // times a cluster rebuilt its ring
	Round      time.Duration // mean time of one step
	Compute    time.Duration // mean compute of all stages within it
}

// HopOverhead is the mean transport time per hop (a ring of k stages has
// k+1 hops, counting the session's own); 0 on one node.
func (s Stats) HopOverhead() time.Duration {
	if s.Stages == 0 {
		return 0
	}
	return (s.Round - s.Compute) / time.Duration(s.Stages+1)
}

// Loop is the one generation loop of strata: it turns a Stepper's tokens
// into the text a user sees, stops at an end-of-generation token, a stop
// string, req.MaxTokens or when room positions have been fed (prompt and
// fed-back tokens), calls onToken for each token in order, and returns
// the Result. On an error (the Stepper's, onToken's, or ctx's) the
// partial Result comes back with it.
func Loop(ctx context.Context, tok *tokenizer.Tokenizer, prompt []int, req Request, room int, s Stepper, onToken func(Token) error) (res Result, err error) {
	res.PromptTokens = len(prompt)
	text := tokenizer.NewTextStream(tok, prompt, req.Stop)
	defer func() {
		res.Text = text.Text()
		res.Stats = s.Stats()
	}()
	start := time.Now()
	id, err := s.Prefill(ctx)
	if err != nil {
		return res, err
	}
	res.PrefillDuration = time.Since(start)
	start = time.Now()
	defer func() { res.DecodeDuration = time.Since(start) }()
	fed := len(prompt)
	ready, _ := s.(Ready)
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		piece, stop := text.Add(id)
		if !tok.IsEOG(id) {
			res.Tokens = append(res.Tokens, id)
		}
		full := (req.MaxTokens > 0 && len(res.Tokens) >= req.MaxTokens) || fed >= room
		if piece != "" || !stop {
			more := ready != nil && ready.Ready() > 0 && !stop && !full
			if err := onToken(Token{ID: id, Index: len(res.Tokens) - 1, Text: piece, More: more}); err != nil {
				return res, err
			}
		}
		if stop {
			res.FinishReason = FinishStop
			return res, nil
		}
		if full {
			res.FinishReason = FinishLength
			if rest := text.Flush(); rest != "" {
				if err := onToken(Token{ID: id, Index: len(res.Tokens) - 1, Text: rest}); err != nil {
					return res, err
				}
			}
			return res, nil
		}
		if id, err = s.Step(ctx, id); err != nil {
			return res, err
		}
		fed++
	}
}

package sample

import (
	"errors"
	"fmt"
	"math"
)

// DefaultPenaltyLastN is the penalty window used when Params.PenaltyLastN
// is 0: the last 64 accepted tokens, as in llama.cpp.
const DefaultPenaltyLastN = 64

// ErrInvalidParams is wrapped by every error that Params.Validate returns.
var ErrInvalidParams = errors.New("sample: invalid params")

// ErrVocabSize is returned by New for a vocabulary size outside
// [1, math.MaxInt32].
var ErrVocabSize = errors.New("sample: invalid vocabulary size")

// Params configures a Sampler. The zero value is greedy decoding with every
// filter and penalty off. Fields are applied in llama.cpp's default order:
// penalties, TopK, TopP, MinP, Temperature, then a seeded draw.
type Params struct {
	// Temperature divides the surviving logits before the final softmax.
	// 0 means greedy: the highest logit after penalties wins, ties going to
	// the lowest token id, and no random number is drawn. Negative values
	// are rejected.
	Temperature float32

	// TopK keeps only the TopK highest logits (ties to the lowest id).
	// 0 is off; values above the vocabulary size keep everything.
	TopK int

	// TopP keeps the smallest set of most likely tokens whose probability
	// sums to at least TopP (nucleus sampling). 0 or 1 is off.
	// Probabilities are computed at temperature 1, before Temperature is
	// applied, as in llama.cpp.
	TopP float32

	// MinP keeps tokens whose probability is at least MinP times that of
	// the most likely token (computed at temperature 1). 0 is off.
	MinP float32

	// RepeatPenalty divides positive logits and multiplies non-positive
	// logits of tokens seen in the penalty window (llama.cpp semantics),
	// once per token however often it occurred. 0 or 1 is off.
	RepeatPenalty float32

	// PresencePenalty is subtracted once from the logit of every token seen
	// in the penalty window (OpenAI semantics). 0 is off; may be negative.
	PresencePenalty float32

	// FrequencyPenalty is subtracted from a token's logit once per
	// occurrence in the penalty window (OpenAI semantics). 0 is off; may be
	// negative.
	FrequencyPenalty float32

	// PenaltyLastN is how many of the most recently accepted tokens the
	// penalties look at. 0 means DefaultPenaltyLastN; -1 means the whole
	// history since New or Reset.
	PenaltyLastN int

	// Seed seeds the PCG generator used for the draw. Equal seeds and equal
	// sequences of Sample/Accept calls give equal tokens. 0 is a seed like
	// any other: callers who want varied output must vary it.
	Seed uint64
}

// Validate reports every invalid field, each error wrapping
// ErrInvalidParams; it returns nil if p is usable.
func (p Params) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidParams}, args...)...))
	}
	switch {
	case !finite(p.Temperature):
		bad("Temperature %v is not finite", p.Temperature)
	case p.Temperature < 0:
		bad("Temperature %v is negative (use 0 for greedy)", p.Temperature)
	}
	if p.TopK < 0 {
		bad("TopK %d is negative (use 0 for off)", p.TopK)
	}
	if !(p.TopP >= 0 && p.TopP <= 1) { // also catches NaN
		bad("TopP %v is outside [0, 1]", p.TopP)
	}
	if !(p.MinP >= 0 && p.MinP <= 1) {
		bad("MinP %v is outside [0, 1]", p.MinP)
	}
	switch {
	case !finite(p.RepeatPenalty):
		bad("RepeatPenalty %v is not finite", p.RepeatPenalty)
	case p.RepeatPenalty < 0:
		bad("RepeatPenalty %v is negative (use 1 or 0 for off)", p.RepeatPenalty)
	}
	if !finite(p.PresencePenalty) {
		bad("PresencePenalty %v is not finite", p.PresencePenalty)
	}
	if !finite(p.FrequencyPenalty) {
		bad("FrequencyPenalty %v is not finite", p.FrequencyPenalty)
	}
	if p.PenaltyLastN < -1 {
		bad("PenaltyLastN %d is below -1 (use -1 for the whole history)", p.PenaltyLastN)
	}
	return errors.Join(errs...)
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// repeatOn, penaltiesOn and window interpret the documented zero values.
func (p Params) repeatOn() bool { return p.RepeatPenalty != 0 && p.RepeatPenalty != 1 }

func (p Params) penaltiesOn() bool {
	return p.repeatOn() || p.PresencePenalty != 0 || p.FrequencyPenalty != 0
}

// window returns the penalty window length, or -1 for the whole history.
func (p Params) window() int {
	if p.PenaltyLastN == 0 {
		return DefaultPenaltyLastN
	}
	return p.PenaltyLastN
}

// Constraint restricts which tokens may come next, e.g. a grammar
// (package grammar). A Sampler with a Constraint calls Mask on the logits
// before everything else, and Accept with the token it draws.
type Constraint interface {
	// Mask sets the logits of tokens that may not come next to -Inf.
	Mask(logits []float32)
	// Accept advances past token, the one just drawn.
	Accept(token int)
}

// Lookahead is a Constraint that can also say, without changing its
// state, how many of a run of tokens it would allow one after another:
// speculative decoding cuts its guesses at the first one the constraint
// would mask, so a check spends no row on a token that cannot be drawn.
type Lookahead interface {
	Constraint
	// Allows returns the length of the longest prefix of tokens that
	// could be drawn in turn from here.
	Allows(tokens []int) int
}

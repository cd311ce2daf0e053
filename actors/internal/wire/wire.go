// Package wire converts between the protobuf messages the origin and the
// stages exchange (strata/messages) and the Go types each side works with.
package wire

import (
	"github.com/asynkron/protoactor-go/actor"

	"strata/messages"
	"strata/runtime/sample"
)

// MaxBatch is the most positions one Forward may carry: the origin's
// prompt chunks are no longer, and a stage refuses longer ones.
const MaxBatch = 64

// MaxGuesses is the most speculative guesses one Forward may carry: the
// origin guesses no more than 8, and a last stage keeps the logits of
// every checked row (MaxGuesses+1 rows of the vocabulary).
const MaxGuesses = 16

// PID is the actor PID a message names.
func PID(p *messages.PID) *actor.PID {
	return &actor.PID{Address: p.GetAddress(), Id: p.GetId()}
}

// FromPID is an actor PID as a message carries it.
func FromPID(p *actor.PID) *messages.PID {
	return &messages.PID{Address: p.Address, Id: p.Id}
}

// Params are the sampling parameters a message carries.
func Params(s *messages.Sampling) sample.Params {
	return sample.Params{
		Temperature: s.GetTemperature(), TopK: int(s.GetTopK()), TopP: s.GetTopP(), MinP: s.GetMinP(),
		RepeatPenalty: s.GetRepeatPenalty(), PresencePenalty: s.GetPresencePenalty(), FrequencyPenalty: s.GetFrequencyPenalty(),
		PenaltyLastN: int(s.GetPenaltyLastN()), Seed: s.GetSeed(),
	}
}

// Sampling is p as a message carries it (without the schema, which the
// origin adds).
func Sampling(p sample.Params) *messages.Sampling {
	return &messages.Sampling{
		Temperature: p.Temperature, TopK: int32(p.TopK), TopP: p.TopP, MinP: p.MinP,
		RepeatPenalty: p.RepeatPenalty, PresencePenalty: p.PresencePenalty, FrequencyPenalty: p.FrequencyPenalty,
		PenaltyLastN: int32(p.PenaltyLastN), Seed: p.Seed,
	}
}

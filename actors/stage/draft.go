package stage

import (
	"strata/actors/internal/wire"
	"strata/messages"
	"strata/runtime/engine"
)

// Speculation on the last stage (Forward.draft). A session that guesses
// by n-gram lookup lets the last stage draft the guesses itself: it knows
// every token of the session (the accept list, then its own draws), so
// the step it feeds to the first stage through the shortcut can carry
// the guesses at once. The session's round trip then stays off the
// critical path, as for plain steps; on one node that round trip costs
// about a quarter of a token of stories260K (docs/performance.md).

// stageDraft is a session's drafting state on its last stage.
type stageDraft struct {
	guesser *engine.Speculator
	until   int   // no guess at a position past it (Forward.draft_until)
	tokens  []int // the session's tokens by position, as far as known
}

// noteDraft takes a step's drafting settings on the last stage (the
// session's own Forwards carry them), and its accept list, the session's
// tokens from position 0, as what the guesses are looked up in.
func (ss *shardSession) noteDraft(m *messages.Forward, vocab int) {
	if m.Draft == 0 {
		return
	}
	if ss.draft == nil {
		g, _ := engine.NewSpeculator(engine.SpeculateNGram, nil, 0, vocab, min(int(m.Draft), wire.MaxGuesses))
		if g == nil {
			return
		}
		// The shortcut runs plain and checked steps alike: no pacing
		// against plain steps (misses still make it rest).
		g.GuessEveryStep()
		ss.draft = &stageDraft{guesser: g}
	}
	d := ss.draft
	d.until = int(m.DraftUntil)
	if len(m.Accept) > 0 {
		d.tokens = d.tokens[:0]
		for _, t := range m.Accept {
			d.tokens = append(d.tokens, int(t))
		}
	}
}

// drew records the tokens the last stage drew for the positions from
// first on. The tokens before first must be known: else the record stops
// (no more guesses until a new accept list).
func (ss *shardSession) drew(first int, ids ...int32) {
	d := ss.draft
	if d == nil {
		return
	}
	if len(d.tokens) < first {
		d.tokens = d.tokens[:0]
		return
	}
	d.tokens = d.tokens[:first]
	for _, t := range ids {
		d.tokens = append(d.tokens, int(t))
	}
}

// guessesAfter drafts the guesses for the step that feeds the token at
// pos: none when the session does not draft here, its tokens up to pos
// are not all known, or other sessions shared the batch (batching reads
// the weights for them already; guesses would only widen the pass).
func (s *shard) guessesAfter(ss *shardSession, pos int) []int32 {
	d := ss.draft
	if d == nil || len(d.tokens) != pos+1 || len(s.batch.steps) > 1 {
		return nil
	}
	// No guess past draft_until (the caller stops before), nor past the
	// KV cache's room.
	room := min(d.until, ss.kv().Capacity-1) - pos
	guesses, _ := d.guesser.Guess(d.tokens, min(room, wire.MaxBatch-1))
	if len(guesses) == 0 {
		return nil
	}
	// A new slice: the step that carries it may be read after the next
	// draft (a held step, a message on its way).
	out := make([]int32, len(guesses))
	for i, t := range guesses {
		out[i] = int32(t)
	}
	return out
}

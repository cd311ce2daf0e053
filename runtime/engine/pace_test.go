package engine

import (
	"testing"
	"time"
)

// simulatePace runs n tokens through a pacer: a plain step makes one token
// in plainStep; a guessing step makes perTrip tokens in guessStep. It
// returns the share of tokens made the plain way, and the time taken.
func simulatePace(n int, plainStep, guessStep time.Duration, perTrip int) (float64, time.Duration) {
	var now time.Time
	now = now.Add(time.Hour)
	p := newPacer(func() time.Time { return now })
	plain := 0
	for made := 0; made < n; {
		if p.plain {
			now = now.Add(plainStep)
			p.tick(0)
			plain++
			made++
			continue
		}
		now = now.Add(guessStep)
		for i := range perTrip {
			p.tick(perTrip - 1 - i)
			made++
		}
	}
	return float64(plain) / float64(n), now.Sub(time.Time{}.Add(time.Hour))
}

func TestPaceGuessesOnlyWhereItPays(t *testing.T) {
	const n = 4000
	for _, c := range []struct {
		name                 string
		plainStep, guessStep time.Duration
		perTrip              int
		plainAtLeast         float64
		plainAtMost          float64
	}{
		// A draft right most of the time: one plain probe.
		{"clear win", time.Millisecond, 1200 * time.Microsecond, 5, 0, 0.01},
		// Few tokens a trip, but still faster than plain.
		{"narrow win", time.Millisecond, 1500 * time.Microsecond, 2, 0, 0.01},
		// Few tokens a trip and slower than plain (a tiny model whose rows
		// cost nearly a step each): mostly plain.
		{"loss", 100 * time.Microsecond, 300 * time.Microsecond, 2, 0.9, 1},
	} {
		share, took := simulatePace(n, c.plainStep, c.guessStep, c.perTrip)
		if share < c.plainAtLeast || share > c.plainAtMost {
			t.Errorf("%s: %.3f of the tokens plain, want %.2f..%.2f", c.name, share, c.plainAtLeast, c.plainAtMost)
		}
		best := min(c.plainStep*n, c.guessStep*n/time.Duration(c.perTrip))
		if float64(took) > 1.1*float64(best) {
			t.Errorf("%s: took %v, the better way alone %v", c.name, took, best)
		}
	}
}

package engine

import "time"

// Whether guessing pays is measured, not assumed. A checked step costs
// more than a plain one (more rows; on a cluster it also gives up the
// token shortcut, which saves a hop a token), so where guesses are often
// wrong, or the model is so small that every row costs nearly a step,
// speculation is slower than none. The pacer times the answer's tokens in
// windows: a first guessing window, a one-step plain probe (no guesses;
// on a cluster still without the token shortcut, which a window's first
// token cannot take, so the probe undercounts plain speed there and
// errs toward guessing), then runs of whichever was faster (plain runs
// take the shortcut), each compared with the other way's last rate when
// it ends; a run doubles while the same way wins, and a plain run is
// followed by a guessing probe, since what guesses yield depends on the
// text.
//
// Windows end at a token count and a minimum time, so that a model that
// makes thousands of tokens a second is not judged on a few microseconds.
const (
	guessProbe   = 16 // tokens of a guessing probe
	plainProbe   = 1  // tokens of a plain probe: few, since it costs the most where guessing wins
	probeTime    = 2 * time.Millisecond
	runTokens    = 256 // the first run window; it doubles while the same way wins
	maxRunTokens = 1 << 14
)

// pacer chooses, window by window, between guessing and plain steps.
type pacer struct {
	now   func() time.Time
	plain bool // the current window takes plain steps
	probe bool // the current window is a probe (else a run)
	want  int  // tokens the current window runs
	// The current window: its start (the token before its first), and
	// the tokens handed out since.
	start  time.Time
	tokens int
	warm   bool // the first window has started
	// The last rates measured, tokens a second (0 = none yet).
	guessRate, plainRate float64
	// run is the last run window's length, lastPlain its way.
	run       int
	lastPlain bool
}

func newPacer(now func() time.Time) *pacer {
	return &pacer{now: now, probe: true, want: guessProbe}
}

// tick counts a token handed out and closes the window when it is done;
// not while checked tokens wait to be handed out (waiting > 0), which
// the guessing window's step made.
func (p *pacer) tick(waiting int) {
	now := p.now()
	if !p.warm {
		// The first window starts after the first round trip, which also
		// ran the draft model over the prompt.
		if !p.start.IsZero() && waiting == 0 {
			p.warm = true
		}
		p.start = now
		return
	}
	p.tokens++
	took := now.Sub(p.start)
	if p.tokens < p.want || took < probeTime || waiting > 0 {
		return
	}
	rate := float64(p.tokens) / took.Seconds()
	if p.plain {
		p.plainRate = rate
	} else {
		p.guessRate = rate
	}
	switch {
	case p.plainRate == 0:
		p.open(true, true) // the plain way has not been timed yet
	case p.plain && !p.probe:
		p.open(false, true) // after a plain run, see what guesses yield now
	default:
		p.open(p.plainRate > p.guessRate, false)
	}
}

// open starts a window: a probe, or a run, which is longer while the
// same way keeps winning.
func (p *pacer) open(plain, probe bool) {
	p.plain, p.probe, p.want = plain, probe, guessProbe
	if plain {
		p.want = plainProbe
	}
	if !probe {
		if p.run > 0 && p.lastPlain == plain {
			p.run = min(2*p.run, maxRunTokens)
		} else {
			p.run = runTokens
		}
		p.lastPlain, p.want = plain, p.run
	}
	p.start, p.tokens = p.now(), 0
}

// left is how many more tokens the current window runs.
func (p *pacer) left() int { return max(1, p.want-p.tokens) }

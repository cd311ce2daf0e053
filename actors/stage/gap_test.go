package stage

import (
	"testing"

	"strata/messages"
)

// A stage that gets a step after one it never got (an activation lost
// between stages) says so (Gap), so the origin replays rather than ending
// the session; other errors are not gaps.
func TestStageMissedStepIsAGap(t *testing.T) {
	r := newStageRig(t, 0)
	r.hidden(t, &messages.Forward{Session: "g", Tokens: int32s(2, 1)})
	for _, tc := range []struct {
		name string
		f    *messages.Forward
		gap  bool
	}{
		{"a step skipped", &messages.Forward{Session: "g", Position: 5, Tokens: []int32{1}}, true},
		{"the first step lost", &messages.Forward{Session: "h", Position: 3, Tokens: []int32{1}}, true},
		{"a context too large", &messages.Forward{Session: "i", Tokens: []int32{1}, Context: 1 << 30}, false},
	} {
		fe, ok := r.step(t, tc.f).(*messages.ForwardError)
		if !ok || fe.Gap != tc.gap {
			t.Errorf("%s: got %v, want an error with gap %v", tc.name, fe, tc.gap)
		}
	}
	// The session goes on from where the stage is.
	r.hidden(t, &messages.Forward{Session: "g", Position: 2, Tokens: []int32{3}})
}

package main

import "time"

// joinGrace is how long after its start a node that has heard from no
// other member calls itself joining (it may be the only node, or its
// --join peers may be down: then "no such model" is the answer).
const joinGrace = 15 * time.Second

// joiningSince says whether a node started at start is still joining:
// within joinGrace and no other member in its view yet (members counts
// the view, itself included). A restarted node answers before the
// others' announcements reach it; until they do, it cannot tell an
// unknown model from one that others hold.
func joiningSince(start time.Time, members func() int) func() bool {
	return func() bool { return time.Since(start) < joinGrace && members() < 2 }
}

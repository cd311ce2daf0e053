package stage

import (
	"fmt"
	"strings"
	"testing"
)

// TestFreedSessionsRememberTheLatest: the last maxFreed freed sessions
// are remembered, older ones forgotten in the order freed, an ID of any
// length works, and remembering one more allocates nothing (the memory
// is taken once, at the first).
func TestFreedSessionsRememberTheLatest(t *testing.T) {
	var f freedSessions
	if f.has("a") {
		t.Fatal("an empty memory has a session")
	}
	id := func(i int) string { return fmt.Sprintf("%024x", i) }
	const over = 10
	for i := range maxFreed + over {
		f.add(id(i))
		f.add(id(i)) // again: no second place
	}
	for i := range maxFreed + over {
		if got, want := f.has(id(i)), i >= over; got != want {
			t.Fatalf("session %d: remembered %v, want %v", i, got, want)
		}
	}
	long := strings.Repeat("x", 10000)
	f.add(long)
	if !f.has(long) || f.has(long[1:]) || f.has(id(over)) {
		t.Fatal("a long ID was not remembered as itself, or the oldest was kept")
	}
	var more []string
	for i := range 200 {
		more = append(more, id(maxFreed+over+1+i))
	}
	n := 0
	if allocs := testing.AllocsPerRun(100, func() { f.add(more[n]); n++ }); allocs != 0 {
		t.Fatalf("%.0f allocations to remember a session, want none", allocs)
	}
}

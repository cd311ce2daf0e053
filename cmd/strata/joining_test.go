package main

import (
	"testing"
	"time"
)

// TestJoiningOnlyUntilHeardOrGrace: a node is joining (unknown models get
// 503, not 404) only while it has heard from no other member, and not
// after joinGrace.
func TestJoiningOnlyUntilHeardOrGrace(t *testing.T) {
	members := 1
	fresh := joiningSince(time.Now(), func() int { return members })
	if !fresh() {
		t.Error("a node alone just after start is not joining")
	}
	members = 2
	if fresh() {
		t.Error("a node that sees another member is still joining")
	}
	members = 1
	if joiningSince(time.Now().Add(-joinGrace), func() int { return members })() {
		t.Error("a node alone after the grace is still joining")
	}
}

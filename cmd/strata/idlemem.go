package main

import (
	"context"
	"runtime/debug"
	"time"
)

// idleMemoryAfter is how long a node runs no session before it gives
// the heap's free pages back to the operating system.
const idleMemoryAfter = 10 * time.Second

// idleGCPercent is the collector's target (GOGC) while a node is idle:
// the heap may grow 10 % over what is live before a collection, not the
// 100 % a busy node allows. An idle node's garbage (heartbeats, gossip,
// metrics scrapes) then never lifts its resident memory more than a few
// hundred kB above the live heap; with Go's default an idle node with a
// 15 MB live heap floated between 20 and 32 MB of heap in use, so its
// resident size depended on when it was looked at (the soak's idle
// samples moved by ±6 MB from one checkpoint to the next). A collection
// of an idle node's heap is a few ms of CPU, and idle nodes allocate
// little.
const idleGCPercent = 10

// idleTick is how often a node looks whether it is busy: a request that
// wakes an idle node runs under the idle target until the next look, and
// its allocations would collect ten times as often, so look often (the
// look counts sessions: microseconds).
const idleTick = 250 * time.Millisecond

// returnMemoryWhenIdle calls idle(true) once per idle period, when busy
// has said false for idleFor, and idle(false) at the first tick busy
// says true again. Go's scavenger returns freed heap slowly and keeps
// what the last peak of garbage needed, so a node that served a burst
// would otherwise keep that much resident for minutes, memory a Mac's
// GPU and the model's pages share (the soak saw idle nodes 40-70 %
// above their warm-up size with a flat live heap).
func returnMemoryWhenIdle(ctx context.Context, busy func() bool, idle func(bool), idleFor, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	idleSince, idled := time.Now(), false
	for {
		select {
		case <-ctx.Done():
			if idled {
				idle(false)
			}
			return
		case now := <-t.C:
			switch {
			case busy():
				idleSince = now
				if idled {
					idle(false)
					idled = false
				}
			case !idled && now.Sub(idleSince) >= idleFor:
				idle(true)
				idled = true
			}
		}
	}
}

// idleHeap is what a node does with its heap as it goes idle and busy:
// going idle, it collects, gives the free pages back and keeps the heap
// tight (idleGCPercent); going busy, the collector's target is the one it
// had.
func idleHeap() func(bool) {
	busyPercent, saved := 0, false // GOGC=off reads as -1: a flag, not a sentinel
	return func(idle bool) {
		if !idle {
			if saved {
				debug.SetGCPercent(busyPercent)
				saved = false
			}
			return
		}
		returnHeap()
		busyPercent, saved = debug.SetGCPercent(idleGCPercent), true
	}
}

// returnHeap collects twice and gives the free pages back: the first
// collection only moves sync.Pool contents (buffers of the streams and
// encoders that served the last burst) to the pools' victim caches, the
// second frees them. Measured in the soak: 0.1-2.4 MB less heap in use
// on a 20 MB heap than after one.
func returnHeap() {
	debug.FreeOSMemory()
	debug.FreeOSMemory()
}

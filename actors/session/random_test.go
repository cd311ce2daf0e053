package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// A shell that answers the core's actions at random — failures, stale
// answers, losses and cancels anywhere — never finds it leaking a ring
// (every ring it uses is freed exactly once by Done), sending to an old
// ring, or going on after Done.
func TestRandomShells(t *testing.T) {
	for seed := range uint64(3000) {
		if err := randomShell(rand.New(rand.NewPCG(seed, 1))); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func randomShell(rng *rand.Rand) (err error) {
	s, err := New(Config{Prompt: prompt(1 + rng.IntN(12)), MaxBatch: 4, Vocab: 50, MaxRecoveries: 3, PromptCache: rng.IntN(2) == 0})
	if err != nil {
		return err
	}
	freed := map[string]int{}
	used := map[string]bool{}
	current, rings, plans, drops := "", 0, 0, 0
	nodes := []string{"n0", "n1", "n2", "n3"}
	var pending Event // the answer the last action asked for
	var trace []string
	step := func(ev Event) []Action {
		acts := s.Step(ev)
		line := fmt.Sprintf("%T%+v →", ev, ev)
		for _, a := range acts {
			line += " [" + brief(a) + "]"
		}
		trace = append(trace, line)
		return acts
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, strings.Join(trace, "\n"))
		}
	}()
	queue := step(Start{})
	for steps := 0; ; steps++ {
		if steps > 10000 {
			return errors.New("no end after 10000 steps")
		}
		for _, a := range queue {
			switch a := a.(type) {
			case Plan:
				if plans++; plans > 3+3+2 {
					return fmt.Errorf("%d plans with MaxRecoveries 3", plans)
				}
				if rng.IntN(6) == 0 {
					pending = Planned{Err: refusal}
				} else {
					pending = Planned{Plan: ringPlan(nodes[rng.IntN(2)], nodes[2+rng.IntN(2)])}
				}
			case AwaitView:
				var back []string
				for n := range a.Lost {
					if rng.IntN(2) == 0 {
						back = append(back, n)
					}
				}
				pending = ViewBack{Nodes: back}
			case Load:
				rings++
				id := fmt.Sprintf("r%d", rings)
				switch rng.IntN(8) {
				case 0:
					pending = Loaded{Unreachable: []string{a.Plan.Stages[0].Node}, At: t0, Err: errors.New("silent")}
				case 1:
					pending = Loaded{Err: errors.New("refused")}
				default:
					ev := loaded(id, a.Plan)
					if a.Resume && rng.IntN(2) == 0 {
						ev.Resume, ev.Cached = "old", rng.IntN(len(s.Fed())+1)
					}
					pending = ev
				}
			case Ring:
				if used[a.ID] {
					return fmt.Errorf("ring %s used twice", a.ID)
				}
				used[a.ID], current = true, a.ID
			case Forward:
				if a.Session != current {
					return fmt.Errorf("forward to ring %s while %s is current", a.Session, current)
				}
			case Wait:
				id, ring := s.Ring()
				switch rng.IntN(7) {
				case 0:
					pending = StageLost{Node: ring[rng.IntN(len(ring))].Node, Cause: "x", At: t0}
				case 1:
					pending = Timeout{Position: a.Position}
				case 2:
					pending = Token{Session: "stale", Position: a.Position, ID: 1}
				case 3:
					pending = ForwardFailed{Session: id, Stage: "s", Err: "e"}
				default:
					pending = Token{Session: id, Position: a.Position, ID: rng.IntN(60)}
				}
			case Probe:
				var silent []string
				for _, st := range a.Stages {
					if rng.IntN(2) == 0 {
						silent = append(silent, st.Node)
					}
				}
				pending = Probed{Silent: silent, At: t0}
			case Free:
				if freed[a.Session]++; freed[a.Session] > 1 {
					return fmt.Errorf("ring %s freed twice", a.Session)
				}
			case Retain:
				if freed[a.Session]++; freed[a.Session] > 1 {
					return fmt.Errorf("ring %s freed twice", a.Session)
				}
				if len(a.Tokens) != len(s.Fed()) {
					return fmt.Errorf("retained %d tokens; the ring was fed %d", len(a.Tokens), len(s.Fed()))
				}
			case DropCache:
				if drops++; drops > 1 {
					return errors.New("the cache dropped twice")
				}
			case Emit:
				switch rng.IntN(10) {
				case 0:
					pending = Stop{}
				case 1:
					pending = Cancel{Err: context.Canceled}
				default:
					pending = Next{Token: a.Token}
				}
			case Done:
				for id := range used {
					if freed[id] != 1 {
						return fmt.Errorf("done (%v) with ring %s freed %d times", a.Err, id, freed[id])
					}
				}
				if more := s.Step(Next{Token: 1}); more != nil {
					return fmt.Errorf("actions after Done: %v", more)
				}
				return nil
			}
		}
		ev := pending
		if rng.IntN(40) == 0 {
			ev = Cancel{Err: context.Canceled}
		}
		queue = step(ev)
	}
}

package session_test

import (
	"fmt"
	"time"

	"strata/actors/plan"
	"strata/actors/session"
)

// A shell drives the core: it carries out each action and hands back what
// came of it as an event. Here the plan, the load and the last stage's
// tokens are made up; a real shell (strata/actors) asks the placement,
// the hosts and the ring.
func Example() {
	s, err := session.New(session.Config{Prompt: []int{1, 2, 3}, MaxBatch: 64, Vocab: 100, StepTimeout: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	ring := []session.Stage{{Node: "a", First: 0, End: 2}, {Node: "b", First: 2, End: 4}}
	next := 10 // the made-up last stage's next token
	acts := s.Step(session.Start{})
	for emitted := 0; len(acts) > 0; {
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case session.Plan:
			fmt.Println("plan")
			acts = append(acts, s.Step(session.Planned{Plan: plan.Plan{Stages: []plan.Stage{{Node: "a"}, {Node: "b"}}}})...)
		case session.Load:
			fmt.Println("load")
			acts = append(acts, s.Step(session.Loaded{ID: "r1", Ring: ring})...)
		case session.Forward:
			fmt.Printf("forward %v at %d\n", a.Tokens, a.Position)
		case session.Wait:
			acts = append(acts, s.Step(session.Token{Session: a.Session, Position: a.Position, ID: next})...)
			next++
		case session.Emit:
			fmt.Println("emit", a.Token)
			if emitted++; emitted < 3 {
				acts = append(acts, s.Step(session.Next{Token: a.Token})...)
			} else {
				acts = append(acts, s.Step(session.Stop{})...)
			}
		case session.Free:
			fmt.Println("free", a.Session)
		case session.Done:
			fmt.Println("done", a.Err)
		}
	}
	// Output:
	// plan
	// load
	// forward [1 2 3] at 0
	// emit 10
	// forward [10] at 3
	// emit 11
	// forward [11] at 4
	// emit 12
	// free r1
	// done <nil>
}

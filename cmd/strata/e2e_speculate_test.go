//go:build e2e

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"strata/api"
	"strata/internal/testdata"
)

// Speculative decoding on real node processes: the origin of a 3-stage
// pipeline runs stories260K as its own draft (strata node --speculate
// draft:PATH); the text equals one node's without speculation, with
// n-gram guesses too, and after a stage's node is killed mid-answer.
func TestE2ESpeculationOnPipeline(t *testing.T) {
	bin := buildBinary(t)
	stories := testdata.Path(t, "gguf/stories260K.gguf")
	c := newClusterEach(t, bin, map[string]string{"stories260K": stories}, 4, "800kB", func(i int) []string {
		if i == 3 {
			// The draft (1.5 MB: weights and a 512-position cache) comes off
			// what the node offers: with it, the others' 800 kB remain.
			// Every step guesses: stories260K is too small for its own
			// draft to pay, so the pacer would mostly take plain steps.
			return []string{"--speculate", "draft:" + stories, "--guess-every-step", "--memory", "2300kB"}
		}
		return nil
	}, "--context", "512")
	const n = 200
	prompt := "Once upon a time, there was a little girl named Lily."
	want := runLocal(t, bin, stories, prompt, n)
	origin := c.nodes[3]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, source := range []string{"ngram", "draft"} {
		var got strings.Builder
		final, err := api.StreamGenerate(ctx, "http://"+origin.api, "", api.GenerateRequest{Model: "stories260K", Prompt: prompt, MaxTokens: n, Speculate: source},
			func(text string) error { got.WriteString(text); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if got.String()+"\n" != want {
			t.Fatalf("%s:\n got %q\nwant %q", source, got.String()+"\n", want)
		}
		t.Logf("%s: %d of %d guesses right", source, final.Accepted, final.Drafted)
		if source == "draft" && final.Accepted < n/2 {
			t.Errorf("draft: %d of %d guesses right", final.Accepted, final.Drafted)
		}
	}
	if st := clusterStatusOf(t, origin.api); len(st.Sessions) != 0 {
		t.Errorf("sessions left: %+v", st.Sessions)
	}

	// The node's default source (its draft) with a stage killed mid-answer.
	var victim *proc
	var got strings.Builder
	tokens := 0
	final, err := api.StreamGenerate(ctx, "http://"+origin.api, "", api.GenerateRequest{Model: "stories260K", Prompt: prompt, MaxTokens: n},
		func(text string) error {
			got.WriteString(text)
			if tokens++; tokens == 40 {
				victim = c.stageNode(origin)
				c.kill(victim)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if got.String()+"\n" != want {
		t.Fatalf("after killing %s:\n got %q\nwant %q", victim.name, got.String()+"\n", want)
	}
	if final.Accepted == 0 {
		t.Errorf("no guess accepted (%d guessed)", final.Drafted)
	}
}

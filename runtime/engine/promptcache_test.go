package engine

import (
	"context"
	"fmt"
	"testing"

	"strata/internal/testdata"
)

// A conversation's next turn reuses the previous turn's KV cache: its
// prompt repeats everything the first turn saw, so all of that is
// cached, and the greedy answer equals an engine's without the cache.
func TestPromptCache(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	open := func(keep int) *Engine {
		e, err := Open(path, Options{Threads: 1, Context: 512, PromptCache: keep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	cached, plain := open(0), open(-1)
	gen := func(e *Engine, tokens []int, maxTokens int) Result {
		t.Helper()
		res, err := e.Generate(context.Background(), Request{Tokens: tokens, MaxTokens: maxTokens}, func(Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	turn1 := cached.Encode("Lily and Tom went to the park. They saw a big dog. The dog was sad because")
	first := gen(cached, turn1, 60)
	if first.CachedTokens != 0 {
		t.Errorf("first turn: %d cached", first.CachedTokens)
	}
	seen := append(append([]int(nil), turn1...), first.Tokens[:len(first.Tokens)-1]...)
	turn2 := append(append([]int(nil), seen...), cached.Tokenizer.Encode("\nThen Tom said", false, false)...)
	got, want := gen(cached, turn2, 60), gen(plain, turn2, 60)
	if got.CachedTokens != len(seen) || want.CachedTokens != 0 {
		t.Errorf("second turn: %d cached, want %d (and %d without a cache)", got.CachedTokens, len(seen), want.CachedTokens)
	}
	if fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
		t.Fatalf("cached answer differs\n got %v\nwant %v", got.Tokens, want.Tokens)
	}
	// The same prompt again: all but its last token; a short unrelated
	// prompt: nothing (and the one kept cache is replaced by its own).
	if again := gen(cached, turn2, 60); again.CachedTokens != len(turn2)-1 || fmt.Sprint(again.Tokens) != fmt.Sprint(want.Tokens) {
		t.Errorf("repeated prompt: %d cached, tokens %v", again.CachedTokens, again.Tokens)
	}
	if other := gen(cached, cached.Encode("Once upon a time"), 5); other.CachedTokens != 0 {
		t.Errorf("unrelated prompt: %d cached", other.CachedTokens)
	}
	if res := gen(cached, turn2, 60); res.CachedTokens != 0 {
		t.Errorf("a cache kept past its capacity: %d cached", res.CachedTokens)
	}
}

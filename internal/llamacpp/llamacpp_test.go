package llamacpp

import (
	"context"
	"testing"

	"strata/internal/testdata"
)

func TestTopOf(t *testing.T) {
	p := TopOf([]float32{1, 5, 3, 5.5, -2, 4}, 3)
	want := []Pair{{3, 5.5}, {1, 5}, {5, 4}}
	if p.Argmax != 3 || len(p.Top) != 3 {
		t.Fatalf("got %+v", p)
	}
	for i := range want {
		if p.Top[i] != want[i] {
			t.Fatalf("top[%d] = %v, want %v", i, p.Top[i], want[i])
		}
	}
}

func TestCompare(t *testing.T) {
	ref := &Logits{Positions: []Position{{Argmax: 1, Top: []Pair{{1, 10}, {2, 8}}}, {Argmax: 3, Top: []Pair{{3, 4}, {4, 3}}}}}
	got := &Logits{Positions: []Position{{Argmax: 1, Top: []Pair{{1, 10.01}, {2, 8}}}, {Argmax: 4, Top: []Pair{{4, 4.5}, {5, 4}}}}}
	d := Compare(got, ref)
	if len(d.ArgmaxMismatch) != 1 || d.ArgmaxMismatch[0] != 1 || d.Missing != 1 {
		t.Fatalf("diff %v", d)
	}
	if d.MaxRel < 0.37 || d.MaxRel > 0.38 || d.MaxRelPos != 1 { // |3-4.5|/4
		t.Fatalf("max rel %v at %d", d.MaxRel, d.MaxRelPos)
	}
}

// TestOracleRuns checks that the oracle is installed and answers: the
// first greedy token of stories260K after BOS is 403 (SOURCES.md).
func TestOracleRuns(t *testing.T) {
	path := testdata.Path(t, "gguf/stories260K.gguf")
	l, err := RunLogits(context.Background(), path, []int{1, 403, 407}, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{l.Positions[0].Argmax, l.Positions[1].Argmax, l.Positions[2].Argmax}; got[0] != 403 || got[1] != 407 || got[2] != 261 {
		t.Fatalf("argmax %v, want [403 407 261]", got)
	}
}

package model

import (
	"fmt"
	"math"
	"testing"

	"strata/runtime/tensor"
)

// CheckCompany exports checkCompany to the external tests.
var CheckCompany = checkCompany

// checkCompany runs five sequences on m: each alone (its prompt as one
// chunk, then one token per Forward), then with the same prompts and
// one-token steps of up to InvariantRows sequences at a time in one
// ForwardBatch; every step's logits must be the same bits, one row at a
// time (LogitsOf) and all rows of the batch at once (LogitsAt). It also runs
// a batch of more than InvariantRows rows, to see that the bound is
// honoured by ForwardBatch and not by luck (only logged: a model may be
// invariant beyond it).
func checkCompany(t *testing.T, m *Model) {
	t.Helper()
	pool := tensor.NewPool(2)
	defer pool.Close()
	const steps = 12
	var seqs [][]int
	for s, n := range []int{23, 9, 40, 1, 17} {
		var seq []int
		for i := range n + steps {
			seq = append(seq, 1+(s*131+i*17)%(m.Vocab-1))
		}
		seqs = append(seqs, seq)
	}
	prompt := func(s int) []int { return seqs[s][:len(seqs[s])-steps] }
	// want[s][k] are sequence s's logits after its prompt and k tokens.
	want := make([][][]float32, len(seqs))
	caches := make([]*Cache, len(seqs))
	prefill := func(st *State, s int) []float32 {
		caches[s] = m.NewCache(128)
		p := prompt(s)
		st.Embed(p)
		if err := st.Forward(caches[s], len(p)); err != nil {
			t.Fatal(err)
		}
		return mustLogits(t, st, len(p)-1)
	}
	for s := range seqs {
		st := m.NewState(pool, 64, 128)
		want[s] = append(want[s], append([]float32(nil), prefill(st, s)...))
		for k := range steps - 1 {
			st.Embed(seqs[s][len(prompt(s))+k:][:1])
			if err := st.Forward(caches[s], 1); err != nil {
				t.Fatal(err)
			}
			want[s] = append(want[s], append([]float32(nil), mustLogits(t, st, 0)...))
		}
	}
	limit := m.InvariantRows()
	for _, group := range []int{limit, len(seqs)} {
		st := m.NewState(pool, 64, 128)
		same := true
		for s := range seqs {
			if got := prefill(st, s); !bitsEqual(got, want[s][0]) {
				t.Fatalf("sequence %d: the prompt's logits differ from a moment ago", s)
			}
		}
		for k := range steps - 1 {
			for g0 := 0; g0 < len(seqs); g0 += group {
				var segs []Segment
				var toks []int
				for s := g0; s < min(g0+group, len(seqs)); s++ {
					segs = append(segs, Segment{Cache: caches[s], N: 1})
					toks = append(toks, seqs[s][len(prompt(s))+k])
				}
				st.Embed(toks)
				if err := st.ForwardBatch(segs); err != nil {
					t.Fatal(err)
				}
				for i := range segs {
					s := g0 + i
					got := mustLogits(t, st, i)
					if !bitsEqual(got, want[s][k+1]) {
						if group <= limit {
							t.Fatalf("%d at a time: sequence %d step %d: logits differ from alone", group, s, k)
						}
						same = false
					}
				}
				if group <= limit {
					// The batch's rows in any order from one read of
					// the output head: each row's logits as alone.
					rows := make([]int, len(segs))
					for i := range rows {
						rows[i] = len(segs) - 1 - i
					}
					all := make([]float32, len(rows)*m.Vocab)
					if err := st.LogitsAt(rows, all); err != nil {
						t.Fatal(err)
					}
					for j, r := range rows {
						if !bitsEqual(all[j*m.Vocab:(j+1)*m.Vocab], want[g0+r][k+1]) {
							t.Fatalf("%d at a time: sequence %d step %d: LogitsAt differs from alone", group, g0+r, k)
						}
					}
				}
			}
		}
		if group > limit {
			t.Logf("%d at a time (over the bound of %d): the same as alone: %v", group, limit, same)
		}
	}
}

func bitsEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// One-token steps of several sequences run together give each the logits
// it gets alone (stories260K as it is and quantized, f16 and f32 caches).
func TestBatchInvariance(t *testing.T) {
	for _, typ := range []tensor.Type{tensor.F32, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K} {
		for _, kv := range []KVType{KVF16, KVF32} {
			t.Run(fmt.Sprintf("%v/%v", typ, kv), func(t *testing.T) {
				f := openModel(t, "gguf/stories260K.gguf")
				m, err := Load(f, 0, 5)
				if err != nil {
					t.Fatal(err)
				}
				if typ != tensor.F32 {
					quantizeModel(t, m, typ)
				}
				if err := m.SetKVType(kv); err != nil {
					t.Fatal(err)
				}
				checkCompany(t, m)
			})
		}
	}
}

// ForwardBatch refuses segments it cannot run: a shared cache, an empty
// segment, more rows than the state holds, a full cache.
func TestForwardBatchRefuses(t *testing.T) {
	f := openModel(t, "gguf/stories260K.gguf")
	m, err := Load(f, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	st := m.NewState(nil, 4, 8)
	a, b := m.NewCache(8), m.NewCache(8)
	for _, c := range []struct {
		name string
		segs []Segment
	}{
		{"shared cache", []Segment{{a, 1}, {a, 1}}},
		{"empty segment", []Segment{{a, 0}}},
		{"no cache", []Segment{{nil, 1}}},
		{"too many rows", []Segment{{a, 3}, {b, 2}}},
		{"context full", []Segment{{a, 1}, {m.NewCache(0), 1}}},
		{"no segments", nil},
	} {
		if err := st.ForwardBatch(c.segs); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if a.Len != 0 || b.Len != 0 {
		t.Errorf("a refused batch moved the caches: %d, %d", a.Len, b.Len)
	}
}

package model

import (
	"fmt"

	"strata/runtime/tensor"
)

// TeacherForced runs ids through m, which must hold every layer, batch
// tokens per forward pass (1: one position at a time, as decoding does),
// and calls fn with each position's index and the logits predicting the
// token after it. The logits slice is reused: fn must copy what it keeps.
func TeacherForced(m *Model, pool *tensor.Pool, ids []int, batch int, fn func(i int, logits []float32)) error {
	return TeacherForcedOn(m, pool, nil, ids, batch, fn)
}

// TeacherForcedOn is TeacherForced with the matrix products acc holds
// computed there (State.Accelerate; nil: none).
func TeacherForcedOn(m *Model, pool *tensor.Pool, acc Accelerator, ids []int, batch int, fn func(i int, logits []float32)) error {
	if !m.IsFirst() || !m.IsLast() {
		return fmt.Errorf("model: teacher forcing needs the whole model, this shard holds layers [%d,%d) of %d", m.First, m.End, m.Layers)
	}
	if batch < 1 {
		return fmt.Errorf("model: batch of %d tokens", batch)
	}
	batch = min(batch, max(len(ids), 1))
	s := m.NewState(pool, batch, len(ids))
	s.Accelerate(acc)
	c := m.NewCache(len(ids))
	for lo := 0; lo < len(ids); lo += batch {
		hi := min(lo+batch, len(ids))
		if err := s.Embed(ids[lo:hi]); err != nil {
			return err
		}
		if err := s.Forward(c, hi-lo); err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			logits, err := s.LogitsOf(i - lo)
			if err != nil {
				return err
			}
			fn(i, logits)
		}
	}
	return s.AcceleratorErr()
}

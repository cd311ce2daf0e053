package tensor

// Prepare quantizes the current input into the form that weights of type
// t need, now, unless already done since the last Set. MatMulAct does
// this itself on first use; a caller that splits matrix products into
// parts and runs them from several goroutines at once (MatMulAct with a
// nil Pool on row ranges, say) calls Prepare first, so that the
// concurrent calls only read a.
func (a *Activations) Prepare(t Type) { a.prepare(t) }

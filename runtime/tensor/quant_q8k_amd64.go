//go:build !purego

package tensor

// quantizeQ8KAVX512 quantizes up to nb Q8_K blocks as quantizeQ8KGeneric
// and returns how many it did: it stops before a block holding an Inf or
// NaN or both +m and -m as its largest magnitude (quant_q8k_amd64.s).
//
//go:noescape
func quantizeQ8KAVX512(x *float32, q *int8, d *float32, bsums *int16, nb int) int

// quantizeQ8K is quantizeQ8KGeneric, with the AVX-512 kernel where the CPU
// has it: it runs serially before each K-quant matrix product, so the Go
// loop (about 5 ns an element) cost prefill as much as a fifth of its time.
func quantizeQ8K(x []float32, q []int8, d []float32, bsums []int16) {
	nb := len(d)
	if !useAVX512 || nb == 0 {
		quantizeQ8KGeneric(x, q, d, bsums)
		return
	}
	_, _, _ = x[nb*qkK-1], q[nb*qkK-1], bsums[nb*16-1]
	for b := 0; b < nb; b++ {
		b += quantizeQ8KAVX512(&x[b*qkK], &q[b*qkK], &d[b], &bsums[16*b], nb-b)
		if b < nb { // the block the kernel leaves to Go
			quantizeQ8KGeneric(x[b*qkK:(b+1)*qkK], q[b*qkK:(b+1)*qkK], d[b:b+1], bsums[16*b:16*b+16])
		}
	}
}

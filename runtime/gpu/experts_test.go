package gpu

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"strata/runtime/tensor"
)

// TestMatMulExpertForm: the experts' form of every matrix kernel
// (matmul_*_id: a vector per (token, expert) pair, the expert's rows
// picked by an id the device holds) gives, for each pair, the bits the
// plain kernel gives for the same rows and input vector: the product of
// the whole 3-D tensor over the same inputs, the expert's rows of it.
// Both the gate and up form (a token's input once per expert: per = 2)
// and the down form (an input per pair: per = 1); the tensor held whole
// and in two parts.
func TestMatMulExpertForm(t *testing.T) {
	d := openDevice(t)
	r := rand.New(rand.NewPCG(7, 8))
	const experts, used, tokens = 5, 2, 3
	ids := []uint32{4, 0, 1, 3, 2, 4} // token t's experts: ids[2t], ids[2t+1]
	for _, typ := range []tensor.Type{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K} {
		rows, cols := 33, 2*max(kernelOf[typ].block, 32)
		raw, err := tensor.Quantize(typ, randVec(r, experts*rows*cols))
		if err != nil {
			t.Fatal(err)
		}
		w, err := tensor.NewMatrix(typ, experts*rows, cols, raw)
		if err != nil {
			t.Fatal(err)
		}
		dm, err := d.Upload(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, per := range []int{used, 1} {
			inputs, slots := tokens*used/per, tokens*used
			var bufs scratch
			var in, idb, all, got *Buffer
			var q quantBufs
			values := inputs * cols
			if err := bufs.make(d, bufferSizes(4*values, 4*slots, 4*inputs*experts*rows, 4*slots*rows,
				values, 4*values/32, values, 4*values/256, 2*values/16), &in, &idb, &all, &got, &q.q32, &q.d32, &q.qK, &q.dK, &q.sK); err != nil {
				t.Fatal(err)
			}
			copy(in.Float32s(), randVec(r, values))
			copy(unsafe.Slice((*uint32)(unsafe.Pointer(&idb.Bytes()[0])), slots), ids)
			// Whole, and held in two parts (experts [0, 4) and [4, 5):
			// each part's dispatch writes the pairs of its experts).
			split := uint64(4 * len(raw) / experts)
			parts := []expertChunk{{&Matrix{Type: typ, Rows: 4 * rows, Cols: cols, buf: dm.buf.view(0, split)}, 0, 4},
				{&Matrix{Type: typ, Rows: rows, Cols: cols, buf: dm.buf.view(split, uint64(len(raw))-split)}, 4, 5}}
			for _, chunks := range [][]expertChunk{{{dm, 0, experts}}, parts} {
				clear(got.Float32s())
				rec := recorder{quants: &q, n: inputs}
				rec.product(all, dm, in)
				rec.productIDs(got, chunks, rows, in, inputs, idb, slots, per)
				if err := d.run(rec.ds...); err != nil {
					t.Fatal(err)
				}
				a, g := all.Float32s(), got.Float32s()
				for v := range slots {
					e, x := int(ids[v]), v/per
					for i := range rows {
						if want := a[x*experts*rows+e*rows+i]; g[v*rows+i] != want {
							t.Fatalf("%v, per %d, %d parts: pair %d (expert %d, input %d) row %d: %g, want %g", typ, per, len(chunks), v, e, x, i, g[v*rows+i], want)
						}
					}
				}
			}
			bufs.free()
		}
		dm.Free()
	}
}

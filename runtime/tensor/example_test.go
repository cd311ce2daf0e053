package tensor_test

import (
	"fmt"

	"strata/runtime/tensor"
)

// A matrix-vector product as one decode step runs it: weights in a GGUF
// type (here Q8_0, quantized from floats; a model's come from its file),
// the input set once on Activations (quantized to 8 bits on first use and
// shared by every product with the same input), and the product split
// over the pool's workers by rows.
func ExampleMatMulAct() {
	const rows, cols = 2, 64
	w := make([]float32, rows*cols)
	for c := range cols {
		w[c] = 1                       // row 0: ones
		w[cols+c] = float32(c%8) / 8.0 // row 1: 0, 1/8, ..., 7/8, 0, ...
	}
	data, err := tensor.Quantize(tensor.Q8_0, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := tensor.NewMatrix(tensor.Q8_0, rows, cols, data)
	if err != nil {
		fmt.Println(err)
		return
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = 0.5
	}
	pool := tensor.NewPool(2)
	defer pool.Close()
	in := tensor.NewActivations(1, cols)
	in.Set(x, 1)
	out := make([]float32, rows)
	tensor.MatMulAct(pool, out, m, in)
	fmt.Printf("%.2f %.2f\n", out[0], out[1]) // exactly 32 and 14
	// Output:
	// 32.00 14.00
}

// Package tensor holds the numeric core of strata: ggml tensor types, their
// block layouts (bit-compatible with ggml-common.h, so GGUF weights are used
// in place), quantization, and the plain-Go reference kernels the forward
// pass is built from.
//
// Weights are Matrix values over borrowed bytes (usually an mmap'd GGUF
// region), in any Supported type. Activations are []float32. The kernels
// allocate nothing: MatVec and MatMul decode 256 weights at a time into a
// stack buffer and split rows across a Pool of persistent workers; a nil
// *Pool runs serially.
//
// One decode step of a layer, with buffers allocated once:
//
//	pool := tensor.NewPool(0) // GOMAXPROCS workers
//	defer pool.Close()
//	wq, err := tensor.NewMatrix(tensor.Q4_K, dim, dim, data) // data from the GGUF file
//	if err != nil { ... }
//	for pos := 0; pos < steps; pos++ {
//		tensor.RMSNorm(xb, x, attnNorm, 1e-5)
//		tensor.MatVec(pool, q, wq, xb) // q[r] = dot(row r of wq, xb)
//		tensor.RoPE(q, nHeads, headDim, headDim, pos, 10000, 1, false)
//		...
//		tensor.MatVec(pool, gate, w1, xb)
//		tensor.MatVec(pool, up, w3, xb)
//		tensor.SwiGLU(gate, gate, up)
//		tensor.MatVec(pool, xb, w2, gate)
//		tensor.Add(x, xb)
//	}
//
// Errors are returned for bad data (ErrUnsupported, ErrSize, wrapped with
// details); the kernels panic on mismatched lengths, which are programming
// errors.
package tensor

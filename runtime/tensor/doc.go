// Package tensor holds the numeric core of strata: ggml tensor types, their
// block layouts (bit-compatible with ggml-common.h, so GGUF weights are used
// in place), quantization, the kernels the forward pass is built from, and
// a pool of persistent workers that runs them.
//
// Weights are Matrix values over borrowed bytes (usually an mmap'd GGUF
// region), in any Supported type. Activations are []float32.
//
// There are two sets of matrix products. MatVec, MatMul and DotRow are the
// reference: they decode 256 weights at a time into a stack buffer and dot
// them with the float32 activations. MatMulAct is the fast path the forward
// pass uses: an Activations value quantizes the input vectors once (8-bit
// blocks of 32 for Q8_0 and Q4_0 weights, ggml's Q8_K for K-quants) and the
// kernels compute integer dot products per block, scaled in float32; float
// weights (F32, F16, BF16) are dotted against the float32 values with FMA.
// Batches of 8 or more vectors against Q8_0/Q4_0 weights (and, where the
// CPU has AVX-512 VNNI, the K-quants and IQ4_XS) use kernels that repack
// 8 rows side by side and reuse each repacked block across 4 or 8
// vectors; their summation order is their own (batch.go). Everything
// allocates nothing per call.
//
// Kernels exist as generic Go (dot_generic.go, batch.go: always built, the
// reference), as amd64 assembly (AVX2 + FMA + F16C; AVX-512 VNNI and
// AVX-VNNI for the integer dots where the CPU has them) and as arm64 NEON (with
// SDOT for the integer dots; one-token dots of every type, four-token dots
// of most, the 8-row Q8_0/Q4_0 batch kernels, Axpy and the activation
// quantizer — SwiGLU and the multi-row kernels are still Go on arm64), chosen at run time from the CPU's features; the build tag purego,
// or another architecture, selects Go only. The integer
// kernels match their Go reference bit for bit, which the tests check for
// every available implementation over all lengths. So do Dot, Axpy and
// SwiGLU (their Go references follow the AVX2 order, FMAs and float32
// exp; arm64's Dot keeps that order), since they feed the activation
// quantizer: a last-bit difference there moves a value across a rounding
// step and the logits by a quantization step. The float weight kernels
// agree within float rounding.
//
// One decode step multiplies each weight matrix (NewMatrix over the
// file's bytes) by Activations set once per input and shared by the
// products that read it (MatMulAct, ExampleMatMulAct), with RMSNorm and
// RoPE between them (runtime/model puts a layer together).
//
// Errors are returned for bad data (ErrUnsupported, ErrSize, wrapped with
// details); the kernels panic on mismatched lengths, which are programming
// errors.
package tensor

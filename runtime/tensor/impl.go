package tensor

import (
	"fmt"
	"strings"
)

// impl is one selectable set of kernels: use(true) makes it the active set
// (tests run every available impl against the generic reference), and
// use(false) restores the default.
type impl struct {
	name string
	use  func(on bool)
}

// Kernels names the kernel set in use: "avx512" (amd64 with AVX-512 F,
// BW, VL and VNNI: VNNI kernels for the one-vector dots of every
// quantized type, the Q8_0 and Q4_0 multi-row dots, the four-vector dots
// (none for Q4_0) and the batches of Q8_0, Q4_0, the K-quants and IQ4_XS;
// AVX2 for the float types and the rest), "avxvnni" (amd64 with AVX-VNNI
// but not AVX-512: the same one-vector, multi-row and four-vector dots in
// their VEX form, and the 8-row batch kernels of Q8_0, Q4_0, the
// K-quants and IQ4_XS; AVX2 for the rest), "avx2" (AVX2+FMA+F16C
// assembly on amd64), "neon" (NEON with the dot-product extension on
// arm64: the one-vector dots, the four-vector dots but Q4_0/Q5_K, the
// 8-row Q8_0/Q4_0 batch kernels, Axpy and the activation quantizer;
// SwiGLU and the multi-row kernels are Go), "i8mm" ("neon" with the
// Q8_0/Q4_0 batch kernels on SMMLA, arm64 with the int8 matrix multiply
// extension: Apple M2 and later) or "generic" (pure Go: the purego build
// tag, a CPU without those features, or another architecture).
func Kernels() string {
	for _, im := range implementations[1:] {
		if kernelsActive(im.name) {
			return im.name
		}
	}
	return "generic"
}

// KernelSets names the kernel sets this CPU can run (SetKernels), the
// generic one first.
func KernelSets() []string {
	names := make([]string, len(implementations))
	for i, im := range implementations {
		names[i] = im.name
	}
	return names
}

// SetKernels makes the kernel set name (one of Kernels' names that this
// CPU can run) the one in use, as on a CPU that has only that set: the
// batch forms follow the set too (usesBatchForm), so "avx2" on a CPU with
// AVX-512 computes what an AVX2-only CPU computes. It is for comparing
// kernel sets on one machine (cmd/strata reads STRATA_KERNELS) and must
// not be called while kernels run.
func SetKernels(name string) error {
	var names []string
	for _, im := range implementations {
		if im.name == name {
			im.use(true)
			onSetKernels(name)
			return nil
		}
		names = append(names, im.name)
	}
	return fmt.Errorf("tensor: kernel set %q not available on this CPU (available: %s)", name, strings.Join(names, ", "))
}

// onSetKernels adjusts what depends on the CPU besides the kernels' own
// switches (batch_kv_amd64.go: the K-quant batch form) when SetKernels
// selects name.
var onSetKernels = func(name string) {}

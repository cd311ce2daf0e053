package tensor

// impl is one selectable set of kernels: use(true) makes it the active set
// (tests run every available impl against the generic reference), and
// use(false) restores the default.
type impl struct {
	name string
	use  func(on bool)
}

// Kernels names the kernel set in use: "avx512" (amd64 with AVX-512 F,
// BW, VL and VNNI: the VNNI kernels for Q4_K and the Q8_0, Q4_0 and Q4_K
// batches, AVX2 for the rest), "avx2" (AVX2+FMA+F16C assembly on amd64),
// "neon" (NEON with the dot-product extension on arm64: the
// one-vector dots, the four-vector dots but Q4_0/Q5_K, the 8-row Q8_0/Q4_0
// batch kernels, Axpy and the activation quantizer; SwiGLU, the
// multi-row kernels and every Q2_K, Q3_K and IQ4_XS dot are Go) or
// "generic" (pure Go: the purego build tag, a CPU without those features,
// or another architecture).
func Kernels() string {
	for _, im := range implementations[1:] {
		if kernelsActive(im.name) {
			return im.name
		}
	}
	return "generic"
}

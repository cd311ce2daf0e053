package tensor

// impl is one selectable set of kernels: use(true) makes it the active set
// (tests run every available impl against the generic reference), and
// use(false) restores the default.
type impl struct {
	name string
	use  func(on bool)
}

// Kernels names the kernel set in use: "avx2" (AVX2+FMA+F16C assembly) or
// "generic" (pure Go: the purego build tag, a CPU without AVX2, or an
// architecture without assembly yet, such as arm64).
func Kernels() string {
	for _, im := range implementations[1:] {
		if kernelsActive(im.name) {
			return im.name
		}
	}
	return "generic"
}

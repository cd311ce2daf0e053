package tensor

// impl is one selectable set of kernels: use(true) makes it the active set
// (tests run every available impl against the generic reference), and
// use(false) restores the default.
type impl struct {
	name string
	use  func(on bool)
}

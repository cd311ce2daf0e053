//go:build !purego

package tensor

// The AVX-VNNI forms of the K-quant and IQ4_XS batch kernels
// (batch_kv_amd64.s): the 8-row kernels of batch_k_amd64.go with the
// same arguments and tiles, for CPUs with AVX-VNNI but not AVX-512
// (useAVXVNNI), and AVX2 repacks into those tiles.

// batchQ4Kx8x4V is batchQ4Kx8x4 with AVX-VNNI.
//
//go:noescape
func batchQ4Kx8x4V(tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32)

// batchQ4Kx8x1V is batchQ4Kx8x1 with AVX-VNNI.
//
//go:noescape
func batchQ4Kx8x1V(tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32)

// batchQ6Kx8x4V is batchQ6Kx8x4 with AVX-VNNI.
//
//go:noescape
func batchQ6Kx8x4V(tile *byte, x *int8, xs int, d *float32, ds int, c *int32, cs int, nb int, acc *float32)

// batchQ6Kx8x1V is batchQ6Kx8x1 with AVX-VNNI.
//
//go:noescape
func batchQ6Kx8x1V(tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32)

// batchQ2Kx8x4V is batchQ2Kx8x4 with AVX-VNNI.
//
//go:noescape
func batchQ2Kx8x4V(tile *byte, x *int8, xs int, d *float32, ds int, b *int16, bs int, nb int, acc *float32)

// batchQ2Kx8x1V is batchQ2Kx8x1 with AVX-VNNI.
//
//go:noescape
func batchQ2Kx8x1V(tile *byte, x *int8, d *float32, b *int16, nb int, acc *float32)

func init() {
	// A CPU with only the set SetKernels names has the K-quant batch
	// kernels where that set is avx512 or avxvnni (batchKQuants).
	onSetKernels = func(name string) { batchKQuants = name == "avx512" || name == "avxvnni" }
}

// repackQ4_Kx8V is repackQ4_Kx8Go in AVX2.
//
//go:noescape
func repackQ4_Kx8V(dst *byte, w *byte, rs int, nb int)

// repackQ5_Kx8V is repackQ5_Kx8Go in AVX2.
//
//go:noescape
func repackQ5_Kx8V(dst *byte, w *byte, rs int, nb int)

// repackQ6_Kx8V is repackQ6_Kx8Go in AVX2.
//
//go:noescape
func repackQ6_Kx8V(dst *byte, w *byte, rs int, nb int)

// repackIQ4_XSx8V is repackIQ4_XSx8Go in AVX2.
//
//go:noescape
func repackIQ4_XSx8V(dst *byte, w *byte, rs int, nb int)

// repackQ3_Kx8V is repackQ3_Kx8Go in AVX2.
//
//go:noescape
func repackQ3_Kx8V(dst *byte, w *byte, rs int, nb int)

// repackQ2_Kx8V is repackQ2_Kx8Go in AVX2.
//
//go:noescape
func repackQ2_Kx8V(dst *byte, w *byte, rs int, nb int)

// The wrappers below pick the AVX-VNNI kernel or repack (v) or the
// AVX-512 one for matMulBatchK: direct calls, so that the tile and the
// accumulators on its stack stay there (through a func value they would
// escape).

func repackKx8(t Type, v bool, dst, w *byte, rs, nb int) {
	switch t {
	case Q6_K:
		if v {
			repackQ6_Kx8V(dst, w, rs, nb)
		} else {
			repackQ6_Kx8Asm(dst, w, rs, nb)
		}
	case IQ4_XS:
		if v {
			repackIQ4_XSx8V(dst, w, rs, nb)
		} else {
			repackIQ4_XSx8Asm(dst, w, rs, nb)
		}
	case Q3_K:
		if v {
			repackQ3_Kx8V(dst, w, rs, nb)
		} else {
			repackQ3_Kx8Asm(dst, w, rs, nb)
		}
	case Q2_K:
		if v {
			repackQ2_Kx8V(dst, w, rs, nb)
		} else {
			repackQ2_Kx8Asm(dst, w, rs, nb)
		}
	case Q5_K:
		if v {
			repackQ5_Kx8V(dst, w, rs, nb)
		} else {
			repackQ5_Kx8Asm(dst, w, rs, nb)
		}
	default:
		if v {
			repackQ4_Kx8V(dst, w, rs, nb)
		} else {
			repackQ4_Kx8Asm(dst, w, rs, nb)
		}
	}
}

func batchQ4Kx8x4K(v bool, tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32) {
	if v {
		batchQ4Kx8x4V(tile, x, xs, d, ds, b2, bs, nb, acc)
	} else {
		batchQ4Kx8x4(tile, x, xs, d, ds, b2, bs, nb, acc)
	}
}

func batchQ4Kx8x1K(v bool, tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32) {
	if v {
		batchQ4Kx8x1V(tile, x, d, b2, nb, acc)
	} else {
		batchQ4Kx8x1(tile, x, d, b2, nb, acc)
	}
}

func batchQ6Kx8x4K(v bool, tile *byte, x *int8, xs int, d *float32, ds int, c *int32, cs int, nb int, acc *float32, pf, pfEnd *byte) {
	if v {
		batchQ6Kx8x4V(tile, x, xs, d, ds, c, cs, nb, acc)
	} else {
		batchQ6Kx8x4(tile, x, xs, d, ds, c, cs, nb, acc, pf, pfEnd)
	}
}

func batchQ6Kx8x1K(v bool, tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32) {
	if v {
		batchQ6Kx8x1V(tile, x, d, c, nb, acc)
	} else {
		batchQ6Kx8x1(tile, x, d, c, nb, acc)
	}
}

func batchQ2Kx8x4K(v bool, tile *byte, x *int8, xs int, d *float32, ds int, b *int16, bs int, nb int, acc *float32) {
	if v {
		batchQ2Kx8x4V(tile, x, xs, d, ds, b, bs, nb, acc)
	} else {
		batchQ2Kx8x4(tile, x, xs, d, ds, b, bs, nb, acc)
	}
}

func batchQ2Kx8x1K(v bool, tile *byte, x *int8, d *float32, b *int16, nb int, acc *float32) {
	if v {
		batchQ2Kx8x1V(tile, x, d, b, nb, acc)
	} else {
		batchQ2Kx8x1(tile, x, d, b, nb, acc)
	}
}

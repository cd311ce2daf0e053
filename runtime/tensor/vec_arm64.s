//go:build !purego

#include "textflag.h"

// func dotVecNEON(a, b *float32, n int) float32
//
// dotVecGeneric over n > 0 elements, in the AVX2 kernel's order so that
// Dot is bit-identical everywhere: four 8-lane FMA accumulators (each two
// 4-lane registers: V16/V17, V18/V19, V20/V21, V22/V23) over each 32
// elements, folded lane-wise as (acc0+acc2)+(acc1+acc3); then 8 elements at
// a time into acc0; hsum8; then one FMADD per remaining element. Vector
// FADD, FADDP and scalar FMADD are encoded by hand (see dot_arm64.s).
TEXT ·dotVecNEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16
	LSR  $5, R2, R3
	CBZ  R3, vfold

vloop32:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	VFMLA  V0.S4, V4.S4, V16.S4
	VFMLA  V1.S4, V5.S4, V17.S4
	VFMLA  V2.S4, V6.S4, V18.S4
	VFMLA  V3.S4, V7.S4, V19.S4
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	VFMLA  V0.S4, V4.S4, V20.S4
	VFMLA  V1.S4, V5.S4, V21.S4
	VFMLA  V2.S4, V6.S4, V22.S4
	VFMLA  V3.S4, V7.S4, V23.S4
	SUBS   $1, R3
	BNE    vloop32

vfold:
	WORD  $0x4e34d610 // FADD V16.4S, V16.4S, V20.4S
	WORD  $0x4e35d631 // FADD V17.4S, V17.4S, V21.4S
	WORD  $0x4e36d652 // FADD V18.4S, V18.4S, V22.4S
	WORD  $0x4e37d673 // FADD V19.4S, V19.4S, V23.4S
	WORD  $0x4e32d610 // FADD V16.4S, V16.4S, V18.4S
	WORD  $0x4e33d631 // FADD V17.4S, V17.4S, V19.4S
	AND  $31, R2
	LSR  $3, R2, R3
	AND  $7, R2
	CBZ  R3, vhsum

vloop8:
	VLD1.P 32(R0), [V0.S4, V1.S4]
	VLD1.P 32(R1), [V4.S4, V5.S4]
	VFMLA  V0.S4, V4.S4, V16.S4
	VFMLA  V1.S4, V5.S4, V17.S4
	SUBS   $1, R3
	BNE    vloop8

vhsum:
	// hsum8: s_l = a_l + a_(l+4), then (s0+s2) + (s1+s3).
	WORD  $0x4e31d610 // FADD V16.4S, V16.4S, V17.4S
	VEXT $8, V16.B16, V16.B16, V17.B16
	WORD  $0x4e31d610 // FADD V16.4S, V16.4S, V17.4S
	WORD  $0x7e30da00 // FADDP S0, V16.2S
	CBZ  R2, vdone

vloop1:
	FMOVS.P 4(R0), F2
	FMOVS.P 4(R1), F6
	WORD  $0x1f060040 // FMADD S0, S2, S6, S0
	SUBS $1, R2
	BNE  vloop1

vdone:
	FMOVS F0, ret+24(FP)
	RET

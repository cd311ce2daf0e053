//go:build !purego

#include "textflag.h"

// The Go assembler has no SDOT, vector SCVTF, vector FADD, FADDP or
// half-precision load, so those are encoded by hand (A64 encodings,
// register numbers in the comments).

// func dotQ8_0NEON(w *byte, x *int8, d *float32, nb int) float32
TEXT ·dotQ8_0NEON(SB), NOSPLIT, $0-36
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD d+16(FP), R2
	MOVD nb+24(FP), R3
	VEOR V16.B16, V16.B16, V16.B16 // even blocks, lanes 0-3
	VEOR V17.B16, V17.B16, V17.B16 // even blocks, lanes 4-7
	VEOR V18.B16, V18.B16, V18.B16 // odd blocks, lanes 0-3
	VEOR V19.B16, V19.B16, V19.B16 // odd blocks, lanes 4-7

loop:
	// Even block: s = fp16 scale * d[b], broadcast in V4.
	WORD  $0x7d400004 // LDR   H4, [X0]
	WORD  $0x1ee24084 // FCVT  S4, H4
	FMOVS (R2), F5
	FMULS F5, F4, F4
	VDUP  V4.S[0], V4.S4
	ADD   $2, R0, R4
	VLD1  (R4), [V0.B16, V1.B16]
	VLD1.P 32(R1), [V2.B16, V3.B16]
	VEOR  V6.B16, V6.B16, V6.B16
	VEOR  V7.B16, V7.B16, V7.B16
	WORD  $0x4e829406 // SDOT  V6.4S, V0.16B, V2.16B
	WORD  $0x4e839427 // SDOT  V7.4S, V1.16B, V3.16B
	WORD  $0x4e21d8c6 // SCVTF V6.4S, V6.4S
	WORD  $0x4e21d8e7 // SCVTF V7.4S, V7.4S
	VFMLA V4.S4, V6.S4, V16.S4
	VFMLA V4.S4, V7.S4, V17.S4
	ADD   $34, R0
	ADD   $4, R2
	SUBS  $1, R3
	BEQ   done

	// Odd block, into V18, V19.
	WORD  $0x7d400004 // LDR   H4, [X0]
	WORD  $0x1ee24084 // FCVT  S4, H4
	FMOVS (R2), F5
	FMULS F5, F4, F4
	VDUP  V4.S[0], V4.S4
	ADD   $2, R0, R4
	VLD1  (R4), [V0.B16, V1.B16]
	VLD1.P 32(R1), [V2.B16, V3.B16]
	VEOR  V6.B16, V6.B16, V6.B16
	VEOR  V7.B16, V7.B16, V7.B16
	WORD  $0x4e829406 // SDOT  V6.4S, V0.16B, V2.16B
	WORD  $0x4e839427 // SDOT  V7.4S, V1.16B, V3.16B
	WORD  $0x4e21d8c6 // SCVTF V6.4S, V6.4S
	WORD  $0x4e21d8e7 // SCVTF V7.4S, V7.4S
	VFMLA V4.S4, V6.S4, V18.S4
	VFMLA V4.S4, V7.S4, V19.S4
	ADD   $34, R0
	ADD   $4, R2
	SUBS  $1, R3
	BNE   loop

done:
	WORD $0x4e32d610 // FADD  V16.4S, V16.4S, V18.4S  (even + odd)
	WORD $0x4e33d631 // FADD  V17.4S, V17.4S, V19.4S
	WORD $0x4e31d610 // FADD  V16.4S, V16.4S, V17.4S  (lanes l + l+4)
	VEXT $8, V16.B16, V16.B16, V17.B16
	WORD $0x4e31d610 // FADD  V16.4S, V16.4S, V17.4S  ((0+4)+(2+6), (1+5)+(3+7))
	WORD $0x7e30da00 // FADDP S0, V16.2S
	FMOVS F0, ret+32(FP)
	RET

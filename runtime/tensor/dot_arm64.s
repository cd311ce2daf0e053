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

// Q40BLK is one Q4_0 block of dotQ4_0NEON: from the block at R0 and the
// scale at R2 (both advanced), s = fp16 scale * d[b] in F6 (and broadcast
// in V8), then ACC += s * (the block's four lane sums); SDLO and SDHI are
// the SDOTs of the low nibbles (V1) and high nibbles (V0) against the
// block's half of the pair's activations (V2/V4 or V3/V5) into V7.
#define Q40BLK(SDLO, SDHI, ACC) \
	WORD  $0x7d400006           /* LDR   H6, [X0] */ \
	WORD  $0x1ee240c6           /* FCVT  S6, H6 */ \
	FMOVS (R2), F9              \
	FMULS F9, F6, F6            \
	ADD   $2, R0, R5            \
	VLD1  (R5), [V0.B16]        \
	VAND  V31.B16, V0.B16, V1.B16 \
	VUSHR $4, V0.B16, V0.B16    \
	VEOR  V7.B16, V7.B16, V7.B16 \
	WORD  SDLO                  \
	WORD  SDHI                  \
	WORD  $0x4e21d8e7           /* SCVTF V7.4S, V7.4S */ \
	VDUP  V6.S[0], V8.S4        \
	VFMLA V8.S4, V7.S4, ACC.S4  \
	ADD   $18, R0               \
	ADD   $4, R2

// Q40LO and Q40HI are Q40BLK for the first and the second block of a
// pair (V7 = V1·V2 + V0·V4, or V1·V3 + V0·V5).
#define Q40LO(ACC) Q40BLK($0x4e829427, $0x4e849407, ACC)
#define Q40HI(ACC) Q40BLK($0x4e839427, $0x4e859407, ACC)

// Q40TCORR adds s * s8[b] (s8 at R3, advanced) to the scalar correction
// F26, for a block past the whole groups of 8.
#define Q40TCORR \
	FMOVS (R3), F9              \
	WORD  $0x1f0968da           /* FMADD S26, S6, S9, S26 */ \
	ADD   $4, R3

// func dotQ4_0NEON(w *byte, x *int8, d, s8 *float32, nb int) float32
//
// Accumulators as dotQ4_0Generic's: acc[0] in V16 (lanes 0-3) and V17
// (lanes 4-7), acc[1] in V18, V19; the corrections of whole groups of 8
// blocks in V24, V25 (their scale products gathered in V20, V21), the
// rest in F26. Each pair of blocks reads its 64 arranged activation bytes
// into V2 (low-nibble quants of the first block), V3 (of the second), V4,
// V5 (high-nibble quants).
TEXT ·dotQ4_0NEON(SB), NOSPLIT, $0-44
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD d+16(FP), R2
	MOVD s8+24(FP), R3
	MOVD nb+32(FP), R4
	VMOVI $15, V31.B16
	VEOR  V30.B16, V30.B16, V30.B16
	VEOR  V16.B16, V16.B16, V16.B16
	VEOR  V17.B16, V17.B16, V17.B16
	VEOR  V18.B16, V18.B16, V18.B16
	VEOR  V19.B16, V19.B16, V19.B16
	VEOR  V24.B16, V24.B16, V24.B16
	VEOR  V25.B16, V25.B16, V25.B16
	VEOR  V26.B16, V26.B16, V26.B16
	LSR   $3, R4, R6
	AND   $7, R4
	CBZ   R6, q40tail

q40group:
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	Q40LO(V16)
	VMOV  V6.S[0], V20.S[0]
	Q40HI(V17)
	VMOV  V6.S[0], V20.S[1]
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	Q40LO(V18)
	VMOV  V6.S[0], V20.S[2]
	Q40HI(V19)
	VMOV  V6.S[0], V20.S[3]
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	Q40LO(V16)
	VMOV  V6.S[0], V21.S[0]
	Q40HI(V17)
	VMOV  V6.S[0], V21.S[1]
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	Q40LO(V18)
	VMOV  V6.S[0], V21.S[2]
	Q40HI(V19)
	VMOV  V6.S[0], V21.S[3]
	VLD1.P 32(R3), [V22.S4, V23.S4]
	VFMLA V22.S4, V20.S4, V24.S4
	VFMLA V23.S4, V21.S4, V25.S4
	SUBS  $1, R6
	BNE   q40group

q40tail:
	// Up to 7 blocks, two pairs (acc[0] then acc[1]) a round.
	CBZ   R4, q40done
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	Q40LO(V16)
	Q40TCORR
	SUBS  $1, R4
	BEQ   q40lone0
	Q40HI(V17)
	Q40TCORR
	SUBS  $1, R4
	BEQ   q40done
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	Q40LO(V18)
	Q40TCORR
	SUBS  $1, R4
	BEQ   q40lone1
	Q40HI(V19)
	Q40TCORR
	SUBS  $1, R4
	B     q40tail

q40lone0:
	// The lone last block's zero partner: 0*s added to lanes 4-7.
	VFMLA V8.S4, V30.S4, V17.S4
	B     q40done

q40lone1:
	VFMLA V8.S4, V30.S4, V19.S4

q40done:
	WORD $0x4e32d610 // FADD  V16.4S, V16.4S, V18.4S  (acc[0] + acc[1])
	WORD $0x4e33d631 // FADD  V17.4S, V17.4S, V19.4S
	WORD $0x4e31d610 // FADD  V16.4S, V16.4S, V17.4S  (hsum8)
	VEXT $8, V16.B16, V16.B16, V17.B16
	WORD $0x4e31d610 // FADD  V16.4S, V16.4S, V17.4S
	WORD $0x7e30da00 // FADDP S0, V16.2S
	WORD $0x4e39d718 // FADD  V24.4S, V24.4S, V25.4S  (hsum8 of the corrections)
	VEXT $8, V24.B16, V24.B16, V25.B16
	WORD $0x4e39d718 // FADD  V24.4S, V24.4S, V25.4S
	WORD $0x7e30db01 // FADDP S1, V24.2S
	FADDS F26, F1, F1
	FSUBS F1, F0, F0
	FMOVS F0, ret+40(FP)
	RET

// func dotQ4_KNEON(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
//
// Per super-block: the 8 scales as int32 in V12, V13, the 8 mins as int16
// in V14; sumi (lanes 0-3, 4-7) in V20, V21; acc in V16, V17; accm in
// F26; dd in F10 (broadcast in V8), dmin in F11.
TEXT ·dotQ4_KNEON(SB), NOSPLIT, $0-44
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD d+16(FP), R2
	MOVD bsums+24(FP), R3
	MOVD nb+32(FP), R4
	VMOVI $15, V31.B16
	VEOR  V16.B16, V16.B16, V16.B16
	VEOR  V17.B16, V17.B16, V17.B16
	VEOR  V26.B16, V26.B16, V26.B16

q4kloop:
	FMOVS (R2), F6
	WORD  $0x7d400004 // LDR H4, [X0]  (d)
	WORD  $0x1ee24084 // FCVT S4, H4
	WORD  $0x7d400405 // LDR H5, [X0, #2]  (dmin)
	WORD  $0x1ee240a5 // FCVT S5, H5
	FMULS F4, F6, F10
	FMULS F5, F6, F11
	VDUP  V10.S[0], V8.S4
	// Scales and mins, as ggml unpacks them with 32-bit masks.
	MOVWU 4(R0), R7
	MOVWU 8(R0), R8
	MOVWU 12(R0), R9
	LSRW  $4, R9, R10
	ANDW  $0x0f0f0f0f, R10
	LSRW  $6, R8, R11
	ANDW  $0x03030303, R11
	ORRW  R11<<4, R10, R10
	// R10: mins 4-7
	ANDW  $0x0f0f0f0f, R9, R11
	LSRW  $6, R7, R12
	ANDW  $0x03030303, R12
	ORRW  R12<<4, R11, R11
	// R11: scales 4-7
	ANDW  $0x3f3f3f3f, R8
	// R8: mins 0-3
	ANDW  $0x3f3f3f3f, R7
	// R7: scales 0-3
	VMOV  R7, V12.S[0]
	VMOV  R11, V12.S[1]
	VMOV  R8, V14.S[0]
	VMOV  R10, V14.S[1]
	WORD  $0x2f08a58c // UXTL V12.8H, V12.8B
	WORD  $0x6f10a58d // UXTL2 V13.4S, V12.8H
	WORD  $0x2f10a58c // UXTL V12.4S, V12.4H
	WORD  $0x2f08a5ce // UXTL V14.8H, V14.8B
	// accm += dmin * sum_j m[j] * (bsums[2j] + bsums[2j+1])
	VLD1.P 32(R3), [V22.H8, V23.H8]
	WORD  $0x4e77bed6 // ADDP V22.8H, V22.8H, V23.8H
	WORD  $0x0e6ec2d8 // SMULL V24.4S, V22.4H, V14.4H
	WORD  $0x4e6e82d8 // SMLAL2 V24.4S, V22.8H, V14.8H
	WORD  $0x4eb1bb18 // ADDV S24, V24.4S
	WORD  $0x5e21db18 // SCVTF S24, S24
	WORD  $0x1f0b6b1a // FMADD S26, S24, S11, S26
	ADD   $16, R0, R5
	VEOR  V20.B16, V20.B16, V20.B16
	VEOR  V21.B16, V21.B16, V21.B16
	// Sub-blocks 0 (low nibbles) and 1 (high nibbles).
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	VAND  V31.B16, V0.B16, V6.B16
	VAND  V31.B16, V1.B16, V7.B16
	VUSHR $4, V0.B16, V0.B16
	VUSHR $4, V1.B16, V1.B16
	VEOR  V9.B16, V9.B16, V9.B16
	VEOR  V27.B16, V27.B16, V27.B16
	VEOR  V28.B16, V28.B16, V28.B16
	VEOR  V29.B16, V29.B16, V29.B16
	WORD  $0x4e8294c9 // SDOT V9.4S, V6.16B, V2.16B
	WORD  $0x4e8394fb // SDOT V27.4S, V7.16B, V3.16B
	WORD  $0x4e84941c // SDOT V28.4S, V0.16B, V4.16B
	WORD  $0x4e85943d // SDOT V29.4S, V1.16B, V5.16B
	WORD  $0x6f8c0134 // MLA V20.4S, V9.4S, V12.S[0]
	WORD  $0x6f8c0375 // MLA V21.4S, V27.4S, V12.S[0]
	WORD  $0x6fac0394 // MLA V20.4S, V28.4S, V12.S[1]
	WORD  $0x6fac03b5 // MLA V21.4S, V29.4S, V12.S[1]
	// Sub-blocks 2 (low nibbles) and 3 (high nibbles).
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	VAND  V31.B16, V0.B16, V6.B16
	VAND  V31.B16, V1.B16, V7.B16
	VUSHR $4, V0.B16, V0.B16
	VUSHR $4, V1.B16, V1.B16
	VEOR  V9.B16, V9.B16, V9.B16
	VEOR  V27.B16, V27.B16, V27.B16
	VEOR  V28.B16, V28.B16, V28.B16
	VEOR  V29.B16, V29.B16, V29.B16
	WORD  $0x4e8294c9 // SDOT V9.4S, V6.16B, V2.16B
	WORD  $0x4e8394fb // SDOT V27.4S, V7.16B, V3.16B
	WORD  $0x4e84941c // SDOT V28.4S, V0.16B, V4.16B
	WORD  $0x4e85943d // SDOT V29.4S, V1.16B, V5.16B
	WORD  $0x6f8c0934 // MLA V20.4S, V9.4S, V12.S[2]
	WORD  $0x6f8c0b75 // MLA V21.4S, V27.4S, V12.S[2]
	WORD  $0x6fac0b94 // MLA V20.4S, V28.4S, V12.S[3]
	WORD  $0x6fac0bb5 // MLA V21.4S, V29.4S, V12.S[3]
	// Sub-blocks 4 (low nibbles) and 5 (high nibbles).
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	VAND  V31.B16, V0.B16, V6.B16
	VAND  V31.B16, V1.B16, V7.B16
	VUSHR $4, V0.B16, V0.B16
	VUSHR $4, V1.B16, V1.B16
	VEOR  V9.B16, V9.B16, V9.B16
	VEOR  V27.B16, V27.B16, V27.B16
	VEOR  V28.B16, V28.B16, V28.B16
	VEOR  V29.B16, V29.B16, V29.B16
	WORD  $0x4e8294c9 // SDOT V9.4S, V6.16B, V2.16B
	WORD  $0x4e8394fb // SDOT V27.4S, V7.16B, V3.16B
	WORD  $0x4e84941c // SDOT V28.4S, V0.16B, V4.16B
	WORD  $0x4e85943d // SDOT V29.4S, V1.16B, V5.16B
	WORD  $0x6f8d0134 // MLA V20.4S, V9.4S, V13.S[0]
	WORD  $0x6f8d0375 // MLA V21.4S, V27.4S, V13.S[0]
	WORD  $0x6fad0394 // MLA V20.4S, V28.4S, V13.S[1]
	WORD  $0x6fad03b5 // MLA V21.4S, V29.4S, V13.S[1]
	// Sub-blocks 6 (low nibbles) and 7 (high nibbles).
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R1), [V2.B16, V3.B16, V4.B16, V5.B16]
	VAND  V31.B16, V0.B16, V6.B16
	VAND  V31.B16, V1.B16, V7.B16
	VUSHR $4, V0.B16, V0.B16
	VUSHR $4, V1.B16, V1.B16
	VEOR  V9.B16, V9.B16, V9.B16
	VEOR  V27.B16, V27.B16, V27.B16
	VEOR  V28.B16, V28.B16, V28.B16
	VEOR  V29.B16, V29.B16, V29.B16
	WORD  $0x4e8294c9 // SDOT V9.4S, V6.16B, V2.16B
	WORD  $0x4e8394fb // SDOT V27.4S, V7.16B, V3.16B
	WORD  $0x4e84941c // SDOT V28.4S, V0.16B, V4.16B
	WORD  $0x4e85943d // SDOT V29.4S, V1.16B, V5.16B
	WORD  $0x6f8d0934 // MLA V20.4S, V9.4S, V13.S[2]
	WORD  $0x6f8d0b75 // MLA V21.4S, V27.4S, V13.S[2]
	WORD  $0x6fad0b94 // MLA V20.4S, V28.4S, V13.S[3]
	WORD  $0x6fad0bb5 // MLA V21.4S, V29.4S, V13.S[3]
	WORD  $0x4e21da94 // SCVTF V20.4S, V20.4S
	WORD  $0x4e21dab5 // SCVTF V21.4S, V21.4S
	VFMLA V8.S4, V20.S4, V16.S4
	VFMLA V8.S4, V21.S4, V17.S4
	ADD   $144, R0
	ADD   $4, R2
	SUBS  $1, R4
	BNE   q4kloop

	WORD  $0x4e31d610 // FADD V16.4S, V16.4S, V17.4S  (hsum8)
	VEXT  $8, V16.B16, V16.B16, V17.B16
	WORD  $0x4e31d610 // FADD V16.4S, V16.4S, V17.4S
	WORD  $0x7e30da00 // FADDP S0, V16.2S
	FSUBS F26, F0, F0
	FMOVS F0, ret+40(FP)
	RET


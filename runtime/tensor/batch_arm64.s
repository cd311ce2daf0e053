//go:build !purego

#include "textflag.h"

// Interleaved batch kernels (see batch_arm64.go). A tile block is the 8
// rows' 32 signed quants in two halves, rows 0-3 then rows 4-7 (128 bytes
// each): in a half, group g (elements 4g..4g+3) of its four rows is 16
// bytes at 16g, row r's four bytes at 4(r%4); then the 8 rows' scales as
// float32. SDOT by element multiplies a group of four rows (one
// register) by the same four activation bytes, so lane r of an int32
// accumulator is row r's exact integer block sum. The float work per block
// is then the reference's, per lane:
//
//	acc[r] = fma(float32(isum[r]), dw[r]*d[b], acc[r])
//
// (SCVTF rounds to nearest as Go's conversion does; FMUL, then FMLA fused).
// The Go assembler has no SDOT (by element), vector SCVTF or vector FMUL,
// so those are encoded by hand, the instruction in the comment.

// func batchX8NEON(tile *byte, x *int8, d *float32, nb int, acc *float32)
//
// Registers: acc in V0 (rows 0-3), V1 (rows 4-7); the block's activations
// in V2 (groups 0-3), V3 (groups 4-7); the integer sums in V4, V5 (even
// groups) and V6, V7 (odd groups); the block's weights in V16-V31 (group g
// of rows 0-3 in V16+g, of rows 4-7 in V24+g); scales in V8, V9, d[b]
// broadcast in V10.
TEXT ·batchX8NEON(SB), NOSPLIT, $0-40
	MOVD tile+0(FP), R0
	MOVD x+8(FP), R1
	MOVD d+16(FP), R2
	MOVD nb+24(FP), R3
	MOVD acc+32(FP), R4
	VLD1 (R4), [V0.S4, V1.S4]

x1loop:
	VLD1.P 32(R1), [V2.B16, V3.B16]
	VLD1.P 64(R0), [V16.B16, V17.B16, V18.B16, V19.B16]
	VLD1.P 64(R0), [V20.B16, V21.B16, V22.B16, V23.B16]
	VLD1.P 64(R0), [V24.B16, V25.B16, V26.B16, V27.B16]
	VLD1.P 64(R0), [V28.B16, V29.B16, V30.B16, V31.B16]
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	WORD $0x4f82e204 // SDOT V4.4S, V16.16B, V2.4B[0]
	WORD $0x4f82e305 // SDOT V5.4S, V24.16B, V2.4B[0]
	WORD $0x4fa2e226 // SDOT V6.4S, V17.16B, V2.4B[1]
	WORD $0x4fa2e327 // SDOT V7.4S, V25.16B, V2.4B[1]
	WORD $0x4f82ea44 // SDOT V4.4S, V18.16B, V2.4B[2]
	WORD $0x4f82eb45 // SDOT V5.4S, V26.16B, V2.4B[2]
	WORD $0x4fa2ea66 // SDOT V6.4S, V19.16B, V2.4B[3]
	WORD $0x4fa2eb67 // SDOT V7.4S, V27.16B, V2.4B[3]
	WORD $0x4f83e284 // SDOT V4.4S, V20.16B, V3.4B[0]
	WORD $0x4f83e385 // SDOT V5.4S, V28.16B, V3.4B[0]
	WORD $0x4fa3e2a6 // SDOT V6.4S, V21.16B, V3.4B[1]
	WORD $0x4fa3e3a7 // SDOT V7.4S, V29.16B, V3.4B[1]
	WORD $0x4f83eac4 // SDOT V4.4S, V22.16B, V3.4B[2]
	WORD $0x4f83ebc5 // SDOT V5.4S, V30.16B, V3.4B[2]
	WORD $0x4fa3eae6 // SDOT V6.4S, V23.16B, V3.4B[3]
	WORD $0x4fa3ebe7 // SDOT V7.4S, V31.16B, V3.4B[3]
	VADD V6.S4, V4.S4, V4.S4
	VADD V7.S4, V5.S4, V5.S4
	WORD $0x4e21d884 // SCVTF V4.4S, V4.4S
	WORD $0x4e21d8a5 // SCVTF V5.4S, V5.4S
	VLD1.P 32(R0), [V8.S4, V9.S4]
	WORD $0x4ddfc84a // LD1R {V10.4S}, [X2], #4
	WORD $0x6e2add08 // FMUL V8.4S, V8.4S, V10.4S
	WORD $0x6e2add29 // FMUL V9.4S, V9.4S, V10.4S
	VFMLA V8.S4, V4.S4, V0.S4
	VFMLA V9.S4, V5.S4, V1.S4
	SUBS $1, R3
	BNE  x1loop
	VST1 [V0.S4, V1.S4], (R4)
	RET

// func batchX8x4NEON(tile *byte, x *[4]*int8, d *[4]*float32, nb int, acc *[4]*float32)
//
// batchX8NEON for four vectors t = 0..3, each weight group loaded once:
// vector t's acc in V(2t), V(2t+1), its activations in V(8+2t) (groups
// 0-3), V(9+2t) (groups 4-7), its integer sums in V(16+2t), V(17+2t); the
// weights a quarter block (four groups of four rows) at a time in V24-V27,
// V28-V31, which then hold the
// scales (V24, V25), d[b] (V26) and their products (V27, V28).
TEXT ·batchX8x4NEON(SB), NOSPLIT, $0-40
	MOVD tile+0(FP), R0
	MOVD x+8(FP), R14
	MOVD d+16(FP), R15
	MOVD nb+24(FP), R9
	MOVD acc+32(FP), R19
	MOVD 0(R14), R1
	MOVD 8(R14), R2
	MOVD 16(R14), R3
	MOVD 24(R14), R4
	MOVD 0(R15), R5
	MOVD 8(R15), R6
	MOVD 16(R15), R7
	MOVD 24(R15), R8
	MOVD 0(R19), R10
	MOVD 8(R19), R11
	MOVD 16(R19), R12
	MOVD 24(R19), R13
	VLD1 (R10), [V0.S4, V1.S4]
	VLD1 (R11), [V2.S4, V3.S4]
	VLD1 (R12), [V4.S4, V5.S4]
	VLD1 (R13), [V6.S4, V7.S4]

x4loop:
	VLD1.P 32(R1), [V8.B16, V9.B16]
	VLD1.P 32(R2), [V10.B16, V11.B16]
	VLD1.P 32(R3), [V12.B16, V13.B16]
	VLD1.P 32(R4), [V14.B16, V15.B16]
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16
	VLD1.P 64(R0), [V24.B16, V25.B16, V26.B16, V27.B16]
	WORD $0x4f88e310 // SDOT V16.4S, V24.16B, V8.4B[0]
	WORD $0x4f8ae312 // SDOT V18.4S, V24.16B, V10.4B[0]
	WORD $0x4f8ce314 // SDOT V20.4S, V24.16B, V12.4B[0]
	WORD $0x4f8ee316 // SDOT V22.4S, V24.16B, V14.4B[0]
	WORD $0x4fa8e330 // SDOT V16.4S, V25.16B, V8.4B[1]
	WORD $0x4faae332 // SDOT V18.4S, V25.16B, V10.4B[1]
	WORD $0x4face334 // SDOT V20.4S, V25.16B, V12.4B[1]
	WORD $0x4faee336 // SDOT V22.4S, V25.16B, V14.4B[1]
	WORD $0x4f88eb50 // SDOT V16.4S, V26.16B, V8.4B[2]
	WORD $0x4f8aeb52 // SDOT V18.4S, V26.16B, V10.4B[2]
	WORD $0x4f8ceb54 // SDOT V20.4S, V26.16B, V12.4B[2]
	WORD $0x4f8eeb56 // SDOT V22.4S, V26.16B, V14.4B[2]
	WORD $0x4fa8eb70 // SDOT V16.4S, V27.16B, V8.4B[3]
	WORD $0x4faaeb72 // SDOT V18.4S, V27.16B, V10.4B[3]
	WORD $0x4faceb74 // SDOT V20.4S, V27.16B, V12.4B[3]
	WORD $0x4faeeb76 // SDOT V22.4S, V27.16B, V14.4B[3]
	VLD1.P 64(R0), [V28.B16, V29.B16, V30.B16, V31.B16]
	WORD $0x4f89e390 // SDOT V16.4S, V28.16B, V9.4B[0]
	WORD $0x4f8be392 // SDOT V18.4S, V28.16B, V11.4B[0]
	WORD $0x4f8de394 // SDOT V20.4S, V28.16B, V13.4B[0]
	WORD $0x4f8fe396 // SDOT V22.4S, V28.16B, V15.4B[0]
	WORD $0x4fa9e3b0 // SDOT V16.4S, V29.16B, V9.4B[1]
	WORD $0x4fabe3b2 // SDOT V18.4S, V29.16B, V11.4B[1]
	WORD $0x4fade3b4 // SDOT V20.4S, V29.16B, V13.4B[1]
	WORD $0x4fafe3b6 // SDOT V22.4S, V29.16B, V15.4B[1]
	WORD $0x4f89ebd0 // SDOT V16.4S, V30.16B, V9.4B[2]
	WORD $0x4f8bebd2 // SDOT V18.4S, V30.16B, V11.4B[2]
	WORD $0x4f8debd4 // SDOT V20.4S, V30.16B, V13.4B[2]
	WORD $0x4f8febd6 // SDOT V22.4S, V30.16B, V15.4B[2]
	WORD $0x4fa9ebf0 // SDOT V16.4S, V31.16B, V9.4B[3]
	WORD $0x4fabebf2 // SDOT V18.4S, V31.16B, V11.4B[3]
	WORD $0x4fadebf4 // SDOT V20.4S, V31.16B, V13.4B[3]
	WORD $0x4fafebf6 // SDOT V22.4S, V31.16B, V15.4B[3]
	VLD1.P 64(R0), [V24.B16, V25.B16, V26.B16, V27.B16]
	WORD $0x4f88e311 // SDOT V17.4S, V24.16B, V8.4B[0]
	WORD $0x4f8ae313 // SDOT V19.4S, V24.16B, V10.4B[0]
	WORD $0x4f8ce315 // SDOT V21.4S, V24.16B, V12.4B[0]
	WORD $0x4f8ee317 // SDOT V23.4S, V24.16B, V14.4B[0]
	WORD $0x4fa8e331 // SDOT V17.4S, V25.16B, V8.4B[1]
	WORD $0x4faae333 // SDOT V19.4S, V25.16B, V10.4B[1]
	WORD $0x4face335 // SDOT V21.4S, V25.16B, V12.4B[1]
	WORD $0x4faee337 // SDOT V23.4S, V25.16B, V14.4B[1]
	WORD $0x4f88eb51 // SDOT V17.4S, V26.16B, V8.4B[2]
	WORD $0x4f8aeb53 // SDOT V19.4S, V26.16B, V10.4B[2]
	WORD $0x4f8ceb55 // SDOT V21.4S, V26.16B, V12.4B[2]
	WORD $0x4f8eeb57 // SDOT V23.4S, V26.16B, V14.4B[2]
	WORD $0x4fa8eb71 // SDOT V17.4S, V27.16B, V8.4B[3]
	WORD $0x4faaeb73 // SDOT V19.4S, V27.16B, V10.4B[3]
	WORD $0x4faceb75 // SDOT V21.4S, V27.16B, V12.4B[3]
	WORD $0x4faeeb77 // SDOT V23.4S, V27.16B, V14.4B[3]
	VLD1.P 64(R0), [V28.B16, V29.B16, V30.B16, V31.B16]
	WORD $0x4f89e391 // SDOT V17.4S, V28.16B, V9.4B[0]
	WORD $0x4f8be393 // SDOT V19.4S, V28.16B, V11.4B[0]
	WORD $0x4f8de395 // SDOT V21.4S, V28.16B, V13.4B[0]
	WORD $0x4f8fe397 // SDOT V23.4S, V28.16B, V15.4B[0]
	WORD $0x4fa9e3b1 // SDOT V17.4S, V29.16B, V9.4B[1]
	WORD $0x4fabe3b3 // SDOT V19.4S, V29.16B, V11.4B[1]
	WORD $0x4fade3b5 // SDOT V21.4S, V29.16B, V13.4B[1]
	WORD $0x4fafe3b7 // SDOT V23.4S, V29.16B, V15.4B[1]
	WORD $0x4f89ebd1 // SDOT V17.4S, V30.16B, V9.4B[2]
	WORD $0x4f8bebd3 // SDOT V19.4S, V30.16B, V11.4B[2]
	WORD $0x4f8debd5 // SDOT V21.4S, V30.16B, V13.4B[2]
	WORD $0x4f8febd7 // SDOT V23.4S, V30.16B, V15.4B[2]
	WORD $0x4fa9ebf1 // SDOT V17.4S, V31.16B, V9.4B[3]
	WORD $0x4fabebf3 // SDOT V19.4S, V31.16B, V11.4B[3]
	WORD $0x4fadebf5 // SDOT V21.4S, V31.16B, V13.4B[3]
	WORD $0x4fafebf7 // SDOT V23.4S, V31.16B, V15.4B[3]
	WORD $0x4e21da10 // SCVTF V16.4S, V16.4S
	WORD $0x4e21da31 // SCVTF V17.4S, V17.4S
	WORD $0x4e21da52 // SCVTF V18.4S, V18.4S
	WORD $0x4e21da73 // SCVTF V19.4S, V19.4S
	WORD $0x4e21da94 // SCVTF V20.4S, V20.4S
	WORD $0x4e21dab5 // SCVTF V21.4S, V21.4S
	WORD $0x4e21dad6 // SCVTF V22.4S, V22.4S
	WORD $0x4e21daf7 // SCVTF V23.4S, V23.4S
	VLD1.P 32(R0), [V24.S4, V25.S4]
	WORD $0x4ddfc8ba // LD1R {V26.4S}, [X5], #4
	WORD $0x6e3adf1b // FMUL V27.4S, V24.4S, V26.4S
	WORD $0x6e3adf3c // FMUL V28.4S, V25.4S, V26.4S
	VFMLA V27.S4, V16.S4, V0.S4
	VFMLA V28.S4, V17.S4, V1.S4
	WORD $0x4ddfc8da // LD1R {V26.4S}, [X6], #4
	WORD $0x6e3adf1b // FMUL V27.4S, V24.4S, V26.4S
	WORD $0x6e3adf3c // FMUL V28.4S, V25.4S, V26.4S
	VFMLA V27.S4, V18.S4, V2.S4
	VFMLA V28.S4, V19.S4, V3.S4
	WORD $0x4ddfc8fa // LD1R {V26.4S}, [X7], #4
	WORD $0x6e3adf1b // FMUL V27.4S, V24.4S, V26.4S
	WORD $0x6e3adf3c // FMUL V28.4S, V25.4S, V26.4S
	VFMLA V27.S4, V20.S4, V4.S4
	VFMLA V28.S4, V21.S4, V5.S4
	WORD $0x4ddfc91a // LD1R {V26.4S}, [X8], #4
	WORD $0x6e3adf1b // FMUL V27.4S, V24.4S, V26.4S
	WORD $0x6e3adf3c // FMUL V28.4S, V25.4S, V26.4S
	VFMLA V27.S4, V22.S4, V6.S4
	VFMLA V28.S4, V23.S4, V7.S4
	SUBS $1, R9
	BNE  x4loop
	VST1 [V0.S4, V1.S4], (R10)
	VST1 [V2.S4, V3.S4], (R11)
	VST1 [V4.S4, V5.S4], (R12)
	VST1 [V6.S4, V7.S4], (R13)
	RET

// ROWQ8(R, A, B): row pointer R's block quants, words 0-3 into A, 4-7 into B.
#define ROWQ8(R, A, B) \
	ADD    $2, R, R11      \
	VLD1.P 16(R11), [A.S4] \
	VLD1   (R11), [B.S4]

// ROWQ4(R, A, B): row pointer R's block nibbles minus 8 as signed bytes,
// elements 0-15 (low nibbles) into A, 16-31 (high nibbles) into B; V30
// holds 0x0f and V31 8 in every byte.
#define ROWQ4(R, A, B) \
	ADD   $2, R, R11              \
	VLD1  (R11), [V20.B16]        \
	VAND  V30.B16, V20.B16, A.B16 \
	VUSHR $4, V20.B16, B.B16      \
	VSUB  V31.B16, A.B16, A.B16   \
	VSUB  V31.B16, B.B16, B.B16

// SCALE(R, i): the fp16 scale at row pointer R into lane i of V16.
#define SCALE(R, i) \
	MOVHU (R), R12 \
	VMOV  R12, V16.H[i]

// func repackQ8_0x8NEON(dst *byte, w *byte, rs int, nb int)
//
// repackX8's tile of nb > 0 Q8_0 blocks of the 8 rows at w, w+rs, ...,
// w+7*rs: each half's quants loaded as words (row r's words 0-3 in
// V(r%4), 4-7 in V(4+r%4); rows 4-7 in V8-V15 likewise) and stored by
// ST4, which interleaves one word of each of four rows per group; the
// scales widened by FCVTL.
TEXT ·repackQ8_0x8NEON(SB), NOSPLIT, $0-32
	MOVD  dst+0(FP), R0
	MOVD  w+8(FP), R1
	MOVD  rs+16(FP), R2
	MOVD  nb+24(FP), R3
	ADD   R2, R1, R4
	ADD   R2, R4, R5
	ADD   R2, R5, R6
	ADD   R2, R6, R7
	ADD   R2, R7, R8
	ADD   R2, R8, R9
	ADD   R2, R9, R10
	VMOVI $15, V30.B16
	VMOVI $8, V31.B16

rQ8loop:
	ROWQ8(R1, V0, V4)
	SCALE(R1, 0)
	ROWQ8(R4, V1, V5)
	SCALE(R4, 1)
	ROWQ8(R5, V2, V6)
	SCALE(R5, 2)
	ROWQ8(R6, V3, V7)
	SCALE(R6, 3)
	ROWQ8(R7, V8, V12)
	SCALE(R7, 4)
	ROWQ8(R8, V9, V13)
	SCALE(R8, 5)
	ROWQ8(R9, V10, V14)
	SCALE(R9, 6)
	ROWQ8(R10, V11, V15)
	SCALE(R10, 7)
	VST4.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	VST4.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	VST4.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R0)
	VST4.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R0)
	WORD $0x0e217a11 // FCVTL V17.4S, V16.4H
	WORD $0x4e217a12 // FCVTL2 V18.4S, V16.8H
	VST1.P [V17.S4, V18.S4], 32(R0)
	ADD $34, R1
	ADD $34, R4
	ADD $34, R5
	ADD $34, R6
	ADD $34, R7
	ADD $34, R8
	ADD $34, R9
	ADD $34, R10
	SUBS $1, R3
	BNE  rQ8loop
	RET

// func repackQ4_0x8NEON(dst *byte, w *byte, rs int, nb int)
//
// repackX8's tile of nb > 0 Q4_0 blocks of the 8 rows at w, w+rs, ...,
// w+7*rs: each half's quants loaded as words (row r's words 0-3 in
// V(r%4), 4-7 in V(4+r%4); rows 4-7 in V8-V15 likewise) and stored by
// ST4, which interleaves one word of each of four rows per group; the
// scales widened by FCVTL.
TEXT ·repackQ4_0x8NEON(SB), NOSPLIT, $0-32
	MOVD  dst+0(FP), R0
	MOVD  w+8(FP), R1
	MOVD  rs+16(FP), R2
	MOVD  nb+24(FP), R3
	ADD   R2, R1, R4
	ADD   R2, R4, R5
	ADD   R2, R5, R6
	ADD   R2, R6, R7
	ADD   R2, R7, R8
	ADD   R2, R8, R9
	ADD   R2, R9, R10
	VMOVI $15, V30.B16
	VMOVI $8, V31.B16

rQ4loop:
	ROWQ4(R1, V0, V4)
	SCALE(R1, 0)
	ROWQ4(R4, V1, V5)
	SCALE(R4, 1)
	ROWQ4(R5, V2, V6)
	SCALE(R5, 2)
	ROWQ4(R6, V3, V7)
	SCALE(R6, 3)
	ROWQ4(R7, V8, V12)
	SCALE(R7, 4)
	ROWQ4(R8, V9, V13)
	SCALE(R8, 5)
	ROWQ4(R9, V10, V14)
	SCALE(R9, 6)
	ROWQ4(R10, V11, V15)
	SCALE(R10, 7)
	VST4.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	VST4.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	VST4.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R0)
	VST4.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R0)
	WORD $0x0e217a11 // FCVTL V17.4S, V16.4H
	WORD $0x4e217a12 // FCVTL2 V18.4S, V16.8H
	VST1.P [V17.S4, V18.S4], 32(R0)
	ADD $18, R1
	ADD $18, R4
	ADD $18, R5
	ADD $18, R6
	ADD $18, R7
	ADD $18, R8
	ADD $18, R9
	ADD $18, R10
	SUBS $1, R3
	BNE  rQ4loop
	RET


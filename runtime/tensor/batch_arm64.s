//go:build !purego

#include "textflag.h"

// Interleaved batch kernels (see batch_arm64.go). A tile block is the 8
// rows' 32 signed quants, group-major: group g (elements 4g..4g+3) is 32
// bytes, rows 0-3 then rows 4-7, row r's four bytes at 4r; then the 8 rows'
// scales as float32. SDOT by element multiplies a group of four rows (one
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
// in V16+2g, V17+2g); scales in V8, V9, d[b] broadcast in V10.
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
	WORD $0x4f82e225 // SDOT V5.4S, V17.16B, V2.4B[0]
	WORD $0x4fa2e246 // SDOT V6.4S, V18.16B, V2.4B[1]
	WORD $0x4fa2e267 // SDOT V7.4S, V19.16B, V2.4B[1]
	WORD $0x4f82ea84 // SDOT V4.4S, V20.16B, V2.4B[2]
	WORD $0x4f82eaa5 // SDOT V5.4S, V21.16B, V2.4B[2]
	WORD $0x4fa2eac6 // SDOT V6.4S, V22.16B, V2.4B[3]
	WORD $0x4fa2eae7 // SDOT V7.4S, V23.16B, V2.4B[3]
	WORD $0x4f83e304 // SDOT V4.4S, V24.16B, V3.4B[0]
	WORD $0x4f83e325 // SDOT V5.4S, V25.16B, V3.4B[0]
	WORD $0x4fa3e346 // SDOT V6.4S, V26.16B, V3.4B[1]
	WORD $0x4fa3e367 // SDOT V7.4S, V27.16B, V3.4B[1]
	WORD $0x4f83eb84 // SDOT V4.4S, V28.16B, V3.4B[2]
	WORD $0x4f83eba5 // SDOT V5.4S, V29.16B, V3.4B[2]
	WORD $0x4fa3ebc6 // SDOT V6.4S, V30.16B, V3.4B[3]
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
// weights two groups at a time in V24-V27, V28-V31, which then hold the
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
	WORD $0x4f88e331 // SDOT V17.4S, V25.16B, V8.4B[0]
	WORD $0x4f8ae312 // SDOT V18.4S, V24.16B, V10.4B[0]
	WORD $0x4f8ae333 // SDOT V19.4S, V25.16B, V10.4B[0]
	WORD $0x4f8ce314 // SDOT V20.4S, V24.16B, V12.4B[0]
	WORD $0x4f8ce335 // SDOT V21.4S, V25.16B, V12.4B[0]
	WORD $0x4f8ee316 // SDOT V22.4S, V24.16B, V14.4B[0]
	WORD $0x4f8ee337 // SDOT V23.4S, V25.16B, V14.4B[0]
	WORD $0x4fa8e350 // SDOT V16.4S, V26.16B, V8.4B[1]
	WORD $0x4fa8e371 // SDOT V17.4S, V27.16B, V8.4B[1]
	WORD $0x4faae352 // SDOT V18.4S, V26.16B, V10.4B[1]
	WORD $0x4faae373 // SDOT V19.4S, V27.16B, V10.4B[1]
	WORD $0x4face354 // SDOT V20.4S, V26.16B, V12.4B[1]
	WORD $0x4face375 // SDOT V21.4S, V27.16B, V12.4B[1]
	WORD $0x4faee356 // SDOT V22.4S, V26.16B, V14.4B[1]
	WORD $0x4faee377 // SDOT V23.4S, V27.16B, V14.4B[1]
	VLD1.P 64(R0), [V28.B16, V29.B16, V30.B16, V31.B16]
	WORD $0x4f88eb90 // SDOT V16.4S, V28.16B, V8.4B[2]
	WORD $0x4f88ebb1 // SDOT V17.4S, V29.16B, V8.4B[2]
	WORD $0x4f8aeb92 // SDOT V18.4S, V28.16B, V10.4B[2]
	WORD $0x4f8aebb3 // SDOT V19.4S, V29.16B, V10.4B[2]
	WORD $0x4f8ceb94 // SDOT V20.4S, V28.16B, V12.4B[2]
	WORD $0x4f8cebb5 // SDOT V21.4S, V29.16B, V12.4B[2]
	WORD $0x4f8eeb96 // SDOT V22.4S, V28.16B, V14.4B[2]
	WORD $0x4f8eebb7 // SDOT V23.4S, V29.16B, V14.4B[2]
	WORD $0x4fa8ebd0 // SDOT V16.4S, V30.16B, V8.4B[3]
	WORD $0x4fa8ebf1 // SDOT V17.4S, V31.16B, V8.4B[3]
	WORD $0x4faaebd2 // SDOT V18.4S, V30.16B, V10.4B[3]
	WORD $0x4faaebf3 // SDOT V19.4S, V31.16B, V10.4B[3]
	WORD $0x4facebd4 // SDOT V20.4S, V30.16B, V12.4B[3]
	WORD $0x4facebf5 // SDOT V21.4S, V31.16B, V12.4B[3]
	WORD $0x4faeebd6 // SDOT V22.4S, V30.16B, V14.4B[3]
	WORD $0x4faeebf7 // SDOT V23.4S, V31.16B, V14.4B[3]
	VLD1.P 64(R0), [V24.B16, V25.B16, V26.B16, V27.B16]
	WORD $0x4f89e310 // SDOT V16.4S, V24.16B, V9.4B[0]
	WORD $0x4f89e331 // SDOT V17.4S, V25.16B, V9.4B[0]
	WORD $0x4f8be312 // SDOT V18.4S, V24.16B, V11.4B[0]
	WORD $0x4f8be333 // SDOT V19.4S, V25.16B, V11.4B[0]
	WORD $0x4f8de314 // SDOT V20.4S, V24.16B, V13.4B[0]
	WORD $0x4f8de335 // SDOT V21.4S, V25.16B, V13.4B[0]
	WORD $0x4f8fe316 // SDOT V22.4S, V24.16B, V15.4B[0]
	WORD $0x4f8fe337 // SDOT V23.4S, V25.16B, V15.4B[0]
	WORD $0x4fa9e350 // SDOT V16.4S, V26.16B, V9.4B[1]
	WORD $0x4fa9e371 // SDOT V17.4S, V27.16B, V9.4B[1]
	WORD $0x4fabe352 // SDOT V18.4S, V26.16B, V11.4B[1]
	WORD $0x4fabe373 // SDOT V19.4S, V27.16B, V11.4B[1]
	WORD $0x4fade354 // SDOT V20.4S, V26.16B, V13.4B[1]
	WORD $0x4fade375 // SDOT V21.4S, V27.16B, V13.4B[1]
	WORD $0x4fafe356 // SDOT V22.4S, V26.16B, V15.4B[1]
	WORD $0x4fafe377 // SDOT V23.4S, V27.16B, V15.4B[1]
	VLD1.P 64(R0), [V28.B16, V29.B16, V30.B16, V31.B16]
	WORD $0x4f89eb90 // SDOT V16.4S, V28.16B, V9.4B[2]
	WORD $0x4f89ebb1 // SDOT V17.4S, V29.16B, V9.4B[2]
	WORD $0x4f8beb92 // SDOT V18.4S, V28.16B, V11.4B[2]
	WORD $0x4f8bebb3 // SDOT V19.4S, V29.16B, V11.4B[2]
	WORD $0x4f8deb94 // SDOT V20.4S, V28.16B, V13.4B[2]
	WORD $0x4f8debb5 // SDOT V21.4S, V29.16B, V13.4B[2]
	WORD $0x4f8feb96 // SDOT V22.4S, V28.16B, V15.4B[2]
	WORD $0x4f8febb7 // SDOT V23.4S, V29.16B, V15.4B[2]
	WORD $0x4fa9ebd0 // SDOT V16.4S, V30.16B, V9.4B[3]
	WORD $0x4fa9ebf1 // SDOT V17.4S, V31.16B, V9.4B[3]
	WORD $0x4fabebd2 // SDOT V18.4S, V30.16B, V11.4B[3]
	WORD $0x4fabebf3 // SDOT V19.4S, V31.16B, V11.4B[3]
	WORD $0x4fadebd4 // SDOT V20.4S, V30.16B, V13.4B[3]
	WORD $0x4fadebf5 // SDOT V21.4S, V31.16B, V13.4B[3]
	WORD $0x4fafebd6 // SDOT V22.4S, V30.16B, V15.4B[3]
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

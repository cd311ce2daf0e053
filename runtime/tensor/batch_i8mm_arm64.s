//go:build !purego

#include "textflag.h"

// The i8mm batch kernels (see batch_i8mm_arm64.go). A tile block holds the
// 8 rows' 32 signed quants as four row pairs (64 bytes each): in pair p,
// chunk c (elements 8c..8c+7) of rows 2p and 2p+1 is 16 bytes at 16c, row
// 2p first; then each pair's scales as float32, doubled: dw[2p], dw[2p],
// dw[2p+1], dw[2p+1]. SMMLA multiplies such a 2x8 chunk of weights by the
// same chunk of two vectors (their 8 bytes side by side) into a 2x2 block
// of int32 sums, lane 2i+j = row 2p+i, vector 2q+j; four chunks make the
// exact integer block sums. The float work per block and lane is then the
// reference's:
//
//	acc[r][t] = fma(float32(isum[r][t]), dw[r]*d[t][b], acc[r][t])
//
// (SCVTF rounds to nearest as Go's conversion does; FMUL, then FMLA fused).
// The Go assembler has no SMMLA, ZIP1/ZIP2 of doublewords, LD1 to a lane,
// DUP of a doubleword, vector SCVTF or vector FMUL, so those are encoded by
// hand, the instruction in the comment.

// func batchMM8x4I8MM(tile *byte, x *[4]*int8, d *[4]*float32, nb int, acc *float32)
//
// Registers: acc (row pair p, vector pair q) in V(2p+q), its integer sums
// in V(8+2p+q); the block's activations, vectors 0 and 1 by chunk in
// V16-V19, vectors 2 and 3 in V20-V23 (zipped from the loads in V24-V31);
// the weights two row pairs at a time in V24-V27, V28-V31, which then hold
// the doubled row scales (V24-V27) and the vector scales d[0], d[1], d[0],
// d[1] (V28) and d[2], d[3], d[2], d[3] (V29).
TEXT ·batchMM8x4I8MM(SB), NOSPLIT, $0-40
	MOVD tile+0(FP), R0
	MOVD x+8(FP), R14
	MOVD d+16(FP), R15
	MOVD nb+24(FP), R9
	MOVD acc+32(FP), R10
	MOVD 0(R14), R1
	MOVD 8(R14), R2
	MOVD 16(R14), R3
	MOVD 24(R14), R4
	MOVD 0(R15), R5
	MOVD 8(R15), R6
	MOVD 16(R15), R7
	MOVD 24(R15), R8
	VLD1 (R10), [V0.S4, V1.S4, V2.S4, V3.S4]
	ADD  $64, R10, R11
	VLD1 (R11), [V4.S4, V5.S4, V6.S4, V7.S4]

mmloop:
	VLD1.P 32(R1), [V24.B16, V25.B16]
	VLD1.P 32(R2), [V26.B16, V27.B16]
	VLD1.P 32(R3), [V28.B16, V29.B16]
	VLD1.P 32(R4), [V30.B16, V31.B16]
	WORD $0x4eda3b10 // ZIP1 V16.2D, V24.2D, V26.2D  (vectors 0, 1: elements 0-7)
	WORD $0x4eda7b11 // ZIP2 V17.2D, V24.2D, V26.2D
	WORD $0x4edb3b32 // ZIP1 V18.2D, V25.2D, V27.2D
	WORD $0x4edb7b33 // ZIP2 V19.2D, V25.2D, V27.2D
	WORD $0x4ede3b94 // ZIP1 V20.2D, V28.2D, V30.2D  (vectors 2, 3: elements 0-7)
	WORD $0x4ede7b95 // ZIP2 V21.2D, V28.2D, V30.2D
	WORD $0x4edf3bb6 // ZIP1 V22.2D, V29.2D, V31.2D
	WORD $0x4edf7bb7 // ZIP2 V23.2D, V29.2D, V31.2D
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
	VLD1.P 64(R0), [V24.B16, V25.B16, V26.B16, V27.B16]
	VLD1.P 64(R0), [V28.B16, V29.B16, V30.B16, V31.B16]
	WORD $0x4e90a708 // SMMLA V8.4S, V24.16B, V16.16B
	WORD $0x4e94a709 // SMMLA V9.4S, V24.16B, V20.16B
	WORD $0x4e90a78a // SMMLA V10.4S, V28.16B, V16.16B
	WORD $0x4e94a78b // SMMLA V11.4S, V28.16B, V20.16B
	WORD $0x4e91a728 // SMMLA V8.4S, V25.16B, V17.16B
	WORD $0x4e95a729 // SMMLA V9.4S, V25.16B, V21.16B
	WORD $0x4e91a7aa // SMMLA V10.4S, V29.16B, V17.16B
	WORD $0x4e95a7ab // SMMLA V11.4S, V29.16B, V21.16B
	WORD $0x4e92a748 // SMMLA V8.4S, V26.16B, V18.16B
	WORD $0x4e96a749 // SMMLA V9.4S, V26.16B, V22.16B
	WORD $0x4e92a7ca // SMMLA V10.4S, V30.16B, V18.16B
	WORD $0x4e96a7cb // SMMLA V11.4S, V30.16B, V22.16B
	WORD $0x4e93a768 // SMMLA V8.4S, V27.16B, V19.16B
	WORD $0x4e97a769 // SMMLA V9.4S, V27.16B, V23.16B
	WORD $0x4e93a7ea // SMMLA V10.4S, V31.16B, V19.16B
	WORD $0x4e97a7eb // SMMLA V11.4S, V31.16B, V23.16B
	VLD1.P 64(R0), [V24.B16, V25.B16, V26.B16, V27.B16]
	VLD1.P 64(R0), [V28.B16, V29.B16, V30.B16, V31.B16]
	WORD $0x4e90a70c // SMMLA V12.4S, V24.16B, V16.16B
	WORD $0x4e94a70d // SMMLA V13.4S, V24.16B, V20.16B
	WORD $0x4e90a78e // SMMLA V14.4S, V28.16B, V16.16B
	WORD $0x4e94a78f // SMMLA V15.4S, V28.16B, V20.16B
	WORD $0x4e91a72c // SMMLA V12.4S, V25.16B, V17.16B
	WORD $0x4e95a72d // SMMLA V13.4S, V25.16B, V21.16B
	WORD $0x4e91a7ae // SMMLA V14.4S, V29.16B, V17.16B
	WORD $0x4e95a7af // SMMLA V15.4S, V29.16B, V21.16B
	WORD $0x4e92a74c // SMMLA V12.4S, V26.16B, V18.16B
	WORD $0x4e96a74d // SMMLA V13.4S, V26.16B, V22.16B
	WORD $0x4e92a7ce // SMMLA V14.4S, V30.16B, V18.16B
	WORD $0x4e96a7cf // SMMLA V15.4S, V30.16B, V22.16B
	WORD $0x4e93a76c // SMMLA V12.4S, V27.16B, V19.16B
	WORD $0x4e97a76d // SMMLA V13.4S, V27.16B, V23.16B
	WORD $0x4e93a7ee // SMMLA V14.4S, V31.16B, V19.16B
	WORD $0x4e97a7ef // SMMLA V15.4S, V31.16B, V23.16B
	WORD $0x4e21d908 // SCVTF V8.4S, V8.4S
	WORD $0x4e21d929 // SCVTF V9.4S, V9.4S
	WORD $0x4e21d94a // SCVTF V10.4S, V10.4S
	WORD $0x4e21d96b // SCVTF V11.4S, V11.4S
	WORD $0x4e21d98c // SCVTF V12.4S, V12.4S
	WORD $0x4e21d9ad // SCVTF V13.4S, V13.4S
	WORD $0x4e21d9ce // SCVTF V14.4S, V14.4S
	WORD $0x4e21d9ef // SCVTF V15.4S, V15.4S
	VLD1.P 64(R0), [V24.S4, V25.S4, V26.S4, V27.S4]
	WORD $0x0ddf80bc // LD1 {V28.S}[0], [X5], #4
	WORD $0x0ddf90dc // LD1 {V28.S}[1], [X6], #4
	WORD $0x4e08079c // DUP V28.2D, V28.D[0]
	WORD $0x0ddf80fd // LD1 {V29.S}[0], [X7], #4
	WORD $0x0ddf911d // LD1 {V29.S}[1], [X8], #4
	WORD $0x4e0807bd // DUP V29.2D, V29.D[0]
	WORD $0x6e3cdf10 // FMUL V16.4S, V24.4S, V28.4S
	WORD $0x6e3ddf11 // FMUL V17.4S, V24.4S, V29.4S
	WORD $0x6e3cdf32 // FMUL V18.4S, V25.4S, V28.4S
	WORD $0x6e3ddf33 // FMUL V19.4S, V25.4S, V29.4S
	WORD $0x6e3cdf54 // FMUL V20.4S, V26.4S, V28.4S
	WORD $0x6e3ddf55 // FMUL V21.4S, V26.4S, V29.4S
	WORD $0x6e3cdf76 // FMUL V22.4S, V27.4S, V28.4S
	WORD $0x6e3ddf77 // FMUL V23.4S, V27.4S, V29.4S
	VFMLA V16.S4, V8.S4, V0.S4
	VFMLA V17.S4, V9.S4, V1.S4
	VFMLA V18.S4, V10.S4, V2.S4
	VFMLA V19.S4, V11.S4, V3.S4
	VFMLA V20.S4, V12.S4, V4.S4
	VFMLA V21.S4, V13.S4, V5.S4
	VFMLA V22.S4, V14.S4, V6.S4
	VFMLA V23.S4, V15.S4, V7.S4
	SUBS $1, R9
	BNE  mmloop
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R10)
	VST1 [V4.S4, V5.S4, V6.S4, V7.S4], (R11)
	RET

// MMROWQ8(R, A, B): row pointer R's block quants, elements 0-15 into A,
// 16-31 into B.
#define MMROWQ8(R, A, B) \
	ADD    $2, R, R11      \
	VLD1   (R11), [A.B16, B.B16]

// MMROWQ4(R, A, B): row pointer R's block nibbles minus 8 as signed bytes,
// elements 0-15 (low nibbles) into A, 16-31 (high nibbles) into B; V30
// holds 0x0f and V31 8 in every byte.
#define MMROWQ4(R, A, B) \
	ADD   $2, R, R11              \
	VLD1  (R11), [V20.B16]        \
	VAND  V30.B16, V20.B16, A.B16 \
	VUSHR $4, V20.B16, B.B16      \
	VSUB  V31.B16, A.B16, A.B16   \
	VSUB  V31.B16, B.B16, B.B16

// MMSCALE(R, i): the fp16 scale at row pointer R into lane i of V16.
#define MMSCALE(R, i) \
	MOVHU (R), R12 \
	VMOV  R12, V16.H[i]

// func repackQ8_0x8MM(dst *byte, w *byte, rs int, nb int)
//
// repackMM8's tile of nb > 0 Q8_0 blocks of the 8 rows at w, w+rs, ...,
// w+7*rs: row r's quants in V(2r), V(2r+1) (elements 0-15, 16-31), each
// pair's chunks zipped by doublewords into V24-V27 and stored; the scales
// widened by FCVTL and doubled by ZIP1/ZIP2 with themselves.
TEXT ·repackQ8_0x8MM(SB), NOSPLIT, $0-32
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

mmrQ8loop:
	MMROWQ8(R1, V0, V1)
	MMSCALE(R1, 0)
	MMROWQ8(R4, V2, V3)
	MMSCALE(R4, 1)
	MMROWQ8(R5, V4, V5)
	MMSCALE(R5, 2)
	MMROWQ8(R6, V6, V7)
	MMSCALE(R6, 3)
	MMROWQ8(R7, V8, V9)
	MMSCALE(R7, 4)
	MMROWQ8(R8, V10, V11)
	MMSCALE(R8, 5)
	MMROWQ8(R9, V12, V13)
	MMSCALE(R9, 6)
	MMROWQ8(R10, V14, V15)
	MMSCALE(R10, 7)
	WORD $0x4ec23818 // ZIP1 V24.2D, V0.2D, V2.2D
	WORD $0x4ec27819 // ZIP2 V25.2D, V0.2D, V2.2D
	WORD $0x4ec3383a // ZIP1 V26.2D, V1.2D, V3.2D
	WORD $0x4ec3783b // ZIP2 V27.2D, V1.2D, V3.2D
	VST1.P [V24.B16, V25.B16, V26.B16, V27.B16], 64(R0)
	WORD $0x4ec63898 // ZIP1 V24.2D, V4.2D, V6.2D
	WORD $0x4ec67899 // ZIP2 V25.2D, V4.2D, V6.2D
	WORD $0x4ec738ba // ZIP1 V26.2D, V5.2D, V7.2D
	WORD $0x4ec778bb // ZIP2 V27.2D, V5.2D, V7.2D
	VST1.P [V24.B16, V25.B16, V26.B16, V27.B16], 64(R0)
	WORD $0x4eca3918 // ZIP1 V24.2D, V8.2D, V10.2D
	WORD $0x4eca7919 // ZIP2 V25.2D, V8.2D, V10.2D
	WORD $0x4ecb393a // ZIP1 V26.2D, V9.2D, V11.2D
	WORD $0x4ecb793b // ZIP2 V27.2D, V9.2D, V11.2D
	VST1.P [V24.B16, V25.B16, V26.B16, V27.B16], 64(R0)
	WORD $0x4ece3998 // ZIP1 V24.2D, V12.2D, V14.2D
	WORD $0x4ece7999 // ZIP2 V25.2D, V12.2D, V14.2D
	WORD $0x4ecf39ba // ZIP1 V26.2D, V13.2D, V15.2D
	WORD $0x4ecf79bb // ZIP2 V27.2D, V13.2D, V15.2D
	VST1.P [V24.B16, V25.B16, V26.B16, V27.B16], 64(R0)
	WORD $0x0e217a11 // FCVTL V17.4S, V16.4H
	WORD $0x4e217a12 // FCVTL2 V18.4S, V16.8H
	WORD $0x4e913a38 // ZIP1 V24.4S, V17.4S, V17.4S
	WORD $0x4e917a39 // ZIP2 V25.4S, V17.4S, V17.4S
	WORD $0x4e923a5a // ZIP1 V26.4S, V18.4S, V18.4S
	WORD $0x4e927a5b // ZIP2 V27.4S, V18.4S, V18.4S
	VST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R0)
	ADD $34, R1
	ADD $34, R4
	ADD $34, R5
	ADD $34, R6
	ADD $34, R7
	ADD $34, R8
	ADD $34, R9
	ADD $34, R10
	SUBS $1, R3
	BNE  mmrQ8loop
	RET

// func repackQ4_0x8MM(dst *byte, w *byte, rs int, nb int)
//
// repackMM8's tile of nb > 0 Q4_0 blocks of the 8 rows at w, w+rs, ...,
// w+7*rs: row r's quants in V(2r), V(2r+1) (elements 0-15, 16-31), each
// pair's chunks zipped by doublewords into V24-V27 and stored; the scales
// widened by FCVTL and doubled by ZIP1/ZIP2 with themselves.
TEXT ·repackQ4_0x8MM(SB), NOSPLIT, $0-32
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

mmrQ4loop:
	MMROWQ4(R1, V0, V1)
	MMSCALE(R1, 0)
	MMROWQ4(R4, V2, V3)
	MMSCALE(R4, 1)
	MMROWQ4(R5, V4, V5)
	MMSCALE(R5, 2)
	MMROWQ4(R6, V6, V7)
	MMSCALE(R6, 3)
	MMROWQ4(R7, V8, V9)
	MMSCALE(R7, 4)
	MMROWQ4(R8, V10, V11)
	MMSCALE(R8, 5)
	MMROWQ4(R9, V12, V13)
	MMSCALE(R9, 6)
	MMROWQ4(R10, V14, V15)
	MMSCALE(R10, 7)
	WORD $0x4ec23818 // ZIP1 V24.2D, V0.2D, V2.2D
	WORD $0x4ec27819 // ZIP2 V25.2D, V0.2D, V2.2D
	WORD $0x4ec3383a // ZIP1 V26.2D, V1.2D, V3.2D
	WORD $0x4ec3783b // ZIP2 V27.2D, V1.2D, V3.2D
	VST1.P [V24.B16, V25.B16, V26.B16, V27.B16], 64(R0)
	WORD $0x4ec63898 // ZIP1 V24.2D, V4.2D, V6.2D
	WORD $0x4ec67899 // ZIP2 V25.2D, V4.2D, V6.2D
	WORD $0x4ec738ba // ZIP1 V26.2D, V5.2D, V7.2D
	WORD $0x4ec778bb // ZIP2 V27.2D, V5.2D, V7.2D
	VST1.P [V24.B16, V25.B16, V26.B16, V27.B16], 64(R0)
	WORD $0x4eca3918 // ZIP1 V24.2D, V8.2D, V10.2D
	WORD $0x4eca7919 // ZIP2 V25.2D, V8.2D, V10.2D
	WORD $0x4ecb393a // ZIP1 V26.2D, V9.2D, V11.2D
	WORD $0x4ecb793b // ZIP2 V27.2D, V9.2D, V11.2D
	VST1.P [V24.B16, V25.B16, V26.B16, V27.B16], 64(R0)
	WORD $0x4ece3998 // ZIP1 V24.2D, V12.2D, V14.2D
	WORD $0x4ece7999 // ZIP2 V25.2D, V12.2D, V14.2D
	WORD $0x4ecf39ba // ZIP1 V26.2D, V13.2D, V15.2D
	WORD $0x4ecf79bb // ZIP2 V27.2D, V13.2D, V15.2D
	VST1.P [V24.B16, V25.B16, V26.B16, V27.B16], 64(R0)
	WORD $0x0e217a11 // FCVTL V17.4S, V16.4H
	WORD $0x4e217a12 // FCVTL2 V18.4S, V16.8H
	WORD $0x4e913a38 // ZIP1 V24.4S, V17.4S, V17.4S
	WORD $0x4e917a39 // ZIP2 V25.4S, V17.4S, V17.4S
	WORD $0x4e923a5a // ZIP1 V26.4S, V18.4S, V18.4S
	WORD $0x4e927a5b // ZIP2 V27.4S, V18.4S, V18.4S
	VST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R0)
	ADD $18, R1
	ADD $18, R4
	ADD $18, R5
	ADD $18, R6
	ADD $18, R7
	ADD $18, R8
	ADD $18, R9
	ADD $18, R10
	SUBS $1, R3
	BNE  mmrQ4loop
	RET

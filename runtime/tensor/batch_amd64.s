//go:build !purego

#include "textflag.h"

// Interleaved batch kernels (see batch_amd64.go): eight rows in the eight
// lanes of a register, so each block's float work is shared by 8 rows and
// no horizontal sums are needed.

// TRANSPOSE8 transposes the 8x8 matrix of dwords in Y0..Y7 (row r in Yr)
// into groups: group g (dword g of every row) ends in, for g = 0..7,
// Y0, Y2, Y12, Y14, Y1, Y3, Y13, Y15. Y4..Y11 are free afterwards.
#define TRANSPOSE8 \
	VPUNPCKLDQ  Y1, Y0, Y8          \
	VPUNPCKHDQ  Y1, Y0, Y9          \
	VPUNPCKLDQ  Y3, Y2, Y10         \
	VPUNPCKHDQ  Y3, Y2, Y11         \
	VPUNPCKLDQ  Y5, Y4, Y0          \
	VPUNPCKHDQ  Y5, Y4, Y1          \
	VPUNPCKLDQ  Y7, Y6, Y2          \
	VPUNPCKHDQ  Y7, Y6, Y3          \
	VPUNPCKLQDQ Y10, Y8, Y4         \
	VPUNPCKHQDQ Y10, Y8, Y5         \
	VPUNPCKLQDQ Y11, Y9, Y6         \
	VPUNPCKHQDQ Y11, Y9, Y7         \
	VPUNPCKLQDQ Y2, Y0, Y8          \
	VPUNPCKHQDQ Y2, Y0, Y9          \
	VPUNPCKLQDQ Y3, Y1, Y10         \
	VPUNPCKHQDQ Y3, Y1, Y11         \
	VPERM2I128  $0x20, Y8, Y4, Y0   \
	VPERM2I128  $0x31, Y8, Y4, Y1   \
	VPERM2I128  $0x20, Y9, Y5, Y2   \
	VPERM2I128  $0x31, Y9, Y5, Y3   \
	VPERM2I128  $0x20, Y10, Y6, Y12 \
	VPERM2I128  $0x31, Y10, Y6, Y13 \
	VPERM2I128  $0x20, Y11, Y7, Y14 \
	VPERM2I128  $0x31, Y11, Y7, Y15

// SCALES8(out): the fp16 scales at offset 0 of the 8 rows' blocks
// (SI + r*R8, rows 4..7 from R10) as 8 float32 at out(DI).
#define SCALES8(out) \
	MOVWLZX   (SI), AX                 \
	VMOVD     AX, X14                  \
	VPINSRW   $1, (SI)(R8*1), X14, X14 \
	VPINSRW   $2, (SI)(R8*2), X14, X14 \
	VPINSRW   $3, (SI)(R9*1), X14, X14 \
	VPINSRW   $4, (R10), X14, X14      \
	VPINSRW   $5, (R10)(R8*1), X14, X14 \
	VPINSRW   $6, (R10)(R8*2), X14, X14 \
	VPINSRW   $7, (R10)(R9*1), X14, X14 \
	VCVTPH2PS X14, Y14                 \
	VMOVUPS   Y14, out(DI)

// ROW8(addr, X, Y): Y = the 32 Q8_0 quants at addr (two 16-byte loads).
#define ROW8(lo, hi, X, Y) \
	VMOVDQU     lo, X \
	VINSERTI128 $1, hi, Y, Y

// ROW4(addr, X, Y): Y = the 16 Q4_0 quant bytes at addr in the low half
// and the same shifted right by 4 in the high half (masked later).
#define ROW4(addr, X, Y) \
	VMOVDQU     addr, X         \
	VPSRLW      $4, X, X8       \
	VINSERTI128 $1, X8, Y, Y

// func repackQ8_0x8(dst *byte, w *byte, rs int, nb int)
TEXT ·repackQ8_0x8(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

rq8loop:
	SCALES8(512)
	ROW8(2(SI), 18(SI), X0, Y0)
	ROW8(2(SI)(R8*1), 18(SI)(R8*1), X1, Y1)
	ROW8(2(SI)(R8*2), 18(SI)(R8*2), X2, Y2)
	ROW8(2(SI)(R9*1), 18(SI)(R9*1), X3, Y3)
	ROW8(2(R10), 18(R10), X4, Y4)
	ROW8(2(R10)(R8*1), 18(R10)(R8*1), X5, Y5)
	ROW8(2(R10)(R8*2), 18(R10)(R8*2), X6, Y6)
	ROW8(2(R10)(R9*1), 18(R10)(R9*1), X7, Y7)
	TRANSPOSE8
	VMOVDQU Y0, 256(DI)
	VMOVDQU Y2, 288(DI)
	VMOVDQU Y12, 320(DI)
	VMOVDQU Y14, 352(DI)
	VMOVDQU Y1, 384(DI)
	VMOVDQU Y3, 416(DI)
	VMOVDQU Y13, 448(DI)
	VMOVDQU Y15, 480(DI)
	VPSIGNB Y0, Y0, Y4
	VPSIGNB Y2, Y2, Y5
	VPSIGNB Y12, Y12, Y6
	VPSIGNB Y14, Y14, Y7
	VPSIGNB Y1, Y1, Y8
	VPSIGNB Y3, Y3, Y9
	VPSIGNB Y13, Y13, Y10
	VPSIGNB Y15, Y15, Y11
	VMOVDQU Y4, 0(DI)
	VMOVDQU Y5, 32(DI)
	VMOVDQU Y6, 64(DI)
	VMOVDQU Y7, 96(DI)
	VMOVDQU Y8, 128(DI)
	VMOVDQU Y9, 160(DI)
	VMOVDQU Y10, 192(DI)
	VMOVDQU Y11, 224(DI)
	ADDQ $34, SI
	ADDQ $34, R10
	ADDQ $544, DI
	DECQ CX
	JNZ  rq8loop
	VZEROUPPER
	RET

// func repackQ4_0x8(dst *byte, w *byte, rs int, nb int)
TEXT ·repackQ4_0x8(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

rq4loop:
	SCALES8(256)
	ROW4(2(SI), X0, Y0)
	ROW4(2(SI)(R8*1), X1, Y1)
	ROW4(2(SI)(R8*2), X2, Y2)
	ROW4(2(SI)(R9*1), X3, Y3)
	ROW4(2(R10), X4, Y4)
	ROW4(2(R10)(R8*1), X5, Y5)
	ROW4(2(R10)(R8*2), X6, Y6)
	ROW4(2(R10)(R9*1), X7, Y7)
	TRANSPOSE8
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X4
	VPBROADCASTD X4, Y4
	VPAND        Y4, Y0, Y0
	VPAND        Y4, Y2, Y2
	VPAND        Y4, Y12, Y12
	VPAND        Y4, Y14, Y14
	VPAND        Y4, Y1, Y1
	VPAND        Y4, Y3, Y3
	VPAND        Y4, Y13, Y13
	VPAND        Y4, Y15, Y15
	VMOVDQU      Y0, 0(DI)
	VMOVDQU      Y2, 32(DI)
	VMOVDQU      Y12, 64(DI)
	VMOVDQU      Y14, 96(DI)
	VMOVDQU      Y1, 128(DI)
	VMOVDQU      Y3, 160(DI)
	VMOVDQU      Y13, 192(DI)
	VMOVDQU      Y15, 224(DI)
	ADDQ $18, SI
	ADDQ $18, R10
	ADDQ $288, DI
	DECQ CX
	JNZ  rq4loop
	VZEROUPPER
	RET

// G8(g, T, U, ACC): ACC += per row, the int32 dot of group g (Q8_0 tile).
#define G8(g, T, U, ACC) \
	VPBROADCASTD (4*g)(DI), T      \
	VPSIGNB      (256+32*g)(SI), T, T \
	VMOVDQU      (32*g)(SI), U     \
	VPMADDUBSW   T, U, U           \
	VPMADDWD     Y15, U, U         \
	VPADDD       U, ACC, ACC

// func batchQ8_0x8(tile *byte, x *int8, d *float32, nb int, acc *float32)
TEXT ·batchQ8_0x8(SB), NOSPLIT, $0-40
	MOVQ     tile+0(FP), SI
	MOVQ     x+8(FP), DI
	MOVQ     d+16(FP), DX
	MOVQ     nb+24(FP), CX
	MOVQ     acc+32(FP), BX
	VMOVUPS  (BX), Y0
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15

bq8loop:
	VPXOR Y1, Y1, Y1
	VPXOR Y4, Y4, Y4
	G8(0, Y2, Y3, Y1)
	G8(1, Y5, Y6, Y4)
	G8(2, Y2, Y3, Y1)
	G8(3, Y5, Y6, Y4)
	G8(4, Y2, Y3, Y1)
	G8(5, Y5, Y6, Y4)
	G8(6, Y2, Y3, Y1)
	G8(7, Y5, Y6, Y4)
	VPADDD       Y4, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	VBROADCASTSS (DX), Y2
	VMULPS       512(SI), Y2, Y2
	VFMADD231PS  Y1, Y2, Y0
	ADDQ $544, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  bq8loop
	VMOVUPS Y0, (BX)
	VZEROUPPER
	RET

// G4(g, T, U, ACC): ACC += per row, the int16 pair sums of group g (Q4_0
// tile, unsigned nibbles times signed quants).
#define G4(g, T, U, ACC) \
	VPBROADCASTD (4*g)(DI), T \
	VMOVDQU      (32*g)(SI), U \
	VPMADDUBSW   T, U, U       \
	VPADDW       U, ACC, ACC

// func batchQ4_0x8(tile *byte, x *int8, d *float32, s8 *int32, nb int, acc *float32)
TEXT ·batchQ4_0x8(SB), NOSPLIT, $0-48
	MOVQ     tile+0(FP), SI
	MOVQ     x+8(FP), DI
	MOVQ     d+16(FP), DX
	MOVQ     s8+24(FP), R11
	MOVQ     nb+32(FP), CX
	MOVQ     acc+40(FP), BX
	VMOVUPS  (BX), Y0
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15

bq4loop:
	VPXOR Y1, Y1, Y1
	VPXOR Y4, Y4, Y4
	G4(0, Y2, Y3, Y1)
	G4(1, Y5, Y6, Y4)
	G4(2, Y2, Y3, Y1)
	G4(3, Y5, Y6, Y4)
	G4(4, Y2, Y3, Y1)
	G4(5, Y5, Y6, Y4)
	G4(6, Y2, Y3, Y1)
	G4(7, Y5, Y6, Y4)
	VPADDW       Y4, Y1, Y1
	VPMADDWD     Y15, Y1, Y1
	VPBROADCASTD (R11), Y2
	VPSUBD       Y2, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	VBROADCASTSS (DX), Y2
	VMULPS       256(SI), Y2, Y2
	VFMADD231PS  Y1, Y2, Y0
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, R11
	DECQ CX
	JNZ  bq4loop
	VMOVUPS Y0, (BX)
	VZEROUPPER
	RET

// The two-vector batch kernels: the same arithmetic per vector as
// batchQ8_0x8 / batchQ4_0x8, with each weight group loaded once for both.

// G8X2(g, U, W, T0, T1, A0, A1): group g of the Q8_0 tile against vectors
// at DI and R8.
#define G8X2(g, U, W, T0, T1, A0, A1) \
	VMOVDQU      (32*g)(SI), U       \
	VMOVDQU      (256+32*g)(SI), W   \
	VPBROADCASTD (4*g)(DI), T0       \
	VPBROADCASTD (4*g)(R8), T1       \
	VPSIGNB      W, T0, T0           \
	VPSIGNB      W, T1, T1           \
	VPMADDUBSW   T0, U, T0           \
	VPMADDUBSW   T1, U, T1           \
	VPMADDWD     Y15, T0, T0         \
	VPMADDWD     Y15, T1, T1         \
	VPADDD       T0, A0, A0          \
	VPADDD       T1, A1, A1

// func batchQ8_0x8x2(tile *byte, x0, x1 *int8, d0, d1 *float32, nb int, acc0, acc1 *float32)
TEXT ·batchQ8_0x8x2(SB), NOSPLIT, $0-64
	MOVQ     tile+0(FP), SI
	MOVQ     x0+8(FP), DI
	MOVQ     x1+16(FP), R8
	MOVQ     d0+24(FP), DX
	MOVQ     d1+32(FP), R9
	MOVQ     nb+40(FP), CX
	MOVQ     acc0+48(FP), BX
	MOVQ     acc1+56(FP), R10
	VMOVUPS  (BX), Y0
	VMOVUPS  (R10), Y7
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15

bq8x2loop:
	VPXOR Y1, Y1, Y1
	VPXOR Y4, Y4, Y4
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	G8X2(0, Y2, Y3, Y5, Y6, Y1, Y4)
	G8X2(1, Y10, Y11, Y12, Y13, Y8, Y9)
	G8X2(2, Y2, Y3, Y5, Y6, Y1, Y4)
	G8X2(3, Y10, Y11, Y12, Y13, Y8, Y9)
	G8X2(4, Y2, Y3, Y5, Y6, Y1, Y4)
	G8X2(5, Y10, Y11, Y12, Y13, Y8, Y9)
	G8X2(6, Y2, Y3, Y5, Y6, Y1, Y4)
	G8X2(7, Y10, Y11, Y12, Y13, Y8, Y9)
	VPADDD       Y8, Y1, Y1
	VPADDD       Y9, Y4, Y4
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y4, Y4
	VBROADCASTSS (DX), Y2
	VBROADCASTSS (R9), Y3
	VMULPS       512(SI), Y2, Y2
	VMULPS       512(SI), Y3, Y3
	VFMADD231PS  Y1, Y2, Y0
	VFMADD231PS  Y4, Y3, Y7
	ADDQ $544, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $4, DX
	ADDQ $4, R9
	DECQ CX
	JNZ  bq8x2loop
	VMOVUPS Y0, (BX)
	VMOVUPS Y7, (R10)
	VZEROUPPER
	RET

// G4X2(g, W, T0, T1, A0, A1): group g of the Q4_0 tile against vectors at
// DI and R8.
#define G4X2(g, W, T0, T1, A0, A1) \
	VMOVDQU      (32*g)(SI), W \
	VPBROADCASTD (4*g)(DI), T0 \
	VPBROADCASTD (4*g)(R8), T1 \
	VPMADDUBSW   T0, W, T0     \
	VPMADDUBSW   T1, W, T1     \
	VPADDW       T0, A0, A0    \
	VPADDW       T1, A1, A1

// func batchQ4_0x8x2(tile *byte, x0, x1 *int8, d0, d1 *float32, s0, s1 *int32, nb int, acc0, acc1 *float32)
TEXT ·batchQ4_0x8x2(SB), NOSPLIT, $0-80
	MOVQ     tile+0(FP), SI
	MOVQ     x0+8(FP), DI
	MOVQ     x1+16(FP), R8
	MOVQ     d0+24(FP), DX
	MOVQ     d1+32(FP), R9
	MOVQ     s0+40(FP), R11
	MOVQ     s1+48(FP), R12
	MOVQ     nb+56(FP), CX
	MOVQ     acc0+64(FP), BX
	MOVQ     acc1+72(FP), R10
	VMOVUPS  (BX), Y0
	VMOVUPS  (R10), Y7
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15

bq4x2loop:
	VPXOR Y1, Y1, Y1
	VPXOR Y4, Y4, Y4
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	G4X2(0, Y2, Y5, Y6, Y1, Y4)
	G4X2(1, Y10, Y12, Y13, Y8, Y9)
	G4X2(2, Y2, Y5, Y6, Y1, Y4)
	G4X2(3, Y10, Y12, Y13, Y8, Y9)
	G4X2(4, Y2, Y5, Y6, Y1, Y4)
	G4X2(5, Y10, Y12, Y13, Y8, Y9)
	G4X2(6, Y2, Y5, Y6, Y1, Y4)
	G4X2(7, Y10, Y12, Y13, Y8, Y9)
	VPADDW       Y8, Y1, Y1
	VPADDW       Y9, Y4, Y4
	VPMADDWD     Y15, Y1, Y1
	VPMADDWD     Y15, Y4, Y4
	VPBROADCASTD (R11), Y2
	VPBROADCASTD (R12), Y3
	VPSUBD       Y2, Y1, Y1
	VPSUBD       Y3, Y4, Y4
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y4, Y4
	VBROADCASTSS (DX), Y2
	VBROADCASTSS (R9), Y3
	VMULPS       256(SI), Y2, Y2
	VMULPS       256(SI), Y3, Y3
	VFMADD231PS  Y1, Y2, Y0
	VFMADD231PS  Y4, Y3, Y7
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $4, DX
	ADDQ $4, R9
	ADDQ $4, R11
	ADDQ $4, R12
	DECQ CX
	JNZ  bq4x2loop
	VMOVUPS Y0, (BX)
	VMOVUPS Y7, (R10)
	VZEROUPPER
	RET

// The four-vector batch kernels: vectors at DI, R8, R9, R10 (quants),
// their scales at DX, R11, R12, R13 (and Q4_0 sums at AX, BX, R14, R15
// — see the TEXT), accumulators at the pointers in acc (four *float32 in
// a row). Same arithmetic per vector as batchQ8_0x8 / batchQ4_0x8.

#define G8X4(g) \
	VMOVDQU      (32*g)(SI), Y2      \
	VMOVDQU      (256+32*g)(SI), Y3  \
	VPBROADCASTD (4*g)(DI), Y5       \
	VPBROADCASTD (4*g)(R8), Y6       \
	VPBROADCASTD (4*g)(R9), Y10      \
	VPBROADCASTD (4*g)(R10), Y11     \
	VPSIGNB      Y3, Y5, Y5          \
	VPSIGNB      Y3, Y6, Y6          \
	VPSIGNB      Y3, Y10, Y10        \
	VPSIGNB      Y3, Y11, Y11        \
	VPMADDUBSW   Y5, Y2, Y5          \
	VPMADDUBSW   Y6, Y2, Y6          \
	VPMADDUBSW   Y10, Y2, Y10        \
	VPMADDUBSW   Y11, Y2, Y11        \
	VPMADDWD     Y15, Y5, Y5         \
	VPMADDWD     Y15, Y6, Y6         \
	VPMADDWD     Y15, Y10, Y10       \
	VPMADDWD     Y15, Y11, Y11       \
	VPADDD       Y5, Y1, Y1          \
	VPADDD       Y6, Y4, Y4          \
	VPADDD       Y10, Y8, Y8         \
	VPADDD       Y11, Y9, Y9

// X4SCALE(I, D, F, TS): F += (dw8 at SI+TS) * D[0] * float(I).
#define X4SCALE(I, D, F, TS) \
	VCVTDQ2PS    I, I          \
	VBROADCASTSS (D), Y2       \
	VMULPS       TS(SI), Y2, Y2 \
	VFMADD231PS  I, Y2, F

// func batchQ8_0x8x4(tile *byte, x *[4]*int8, d *[4]*float32, nb int, acc *[4]*float32)
TEXT ·batchQ8_0x8x4(SB), NOSPLIT, $0-40
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), AX
	MOVQ 0(AX), DI
	MOVQ 8(AX), R8
	MOVQ 16(AX), R9
	MOVQ 24(AX), R10
	MOVQ d+16(FP), AX
	MOVQ 0(AX), DX
	MOVQ 8(AX), R11
	MOVQ 16(AX), R12
	MOVQ 24(AX), R13
	MOVQ nb+24(FP), CX
	MOVQ acc+32(FP), AX
	MOVQ 0(AX), BX
	VMOVUPS (BX), Y0
	MOVQ 8(AX), BX
	VMOVUPS (BX), Y7
	MOVQ 16(AX), BX
	VMOVUPS (BX), Y13
	MOVQ 24(AX), BX
	VMOVUPS (BX), Y14
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15

bq8x4loop:
	VPXOR Y1, Y1, Y1
	VPXOR Y4, Y4, Y4
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	G8X4(0)
	G8X4(1)
	G8X4(2)
	G8X4(3)
	G8X4(4)
	G8X4(5)
	G8X4(6)
	G8X4(7)
	X4SCALE(Y1, DX, Y0, 512)
	X4SCALE(Y4, R11, Y7, 512)
	X4SCALE(Y8, R12, Y13, 512)
	X4SCALE(Y9, R13, Y14, 512)
	ADDQ $544, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $4, DX
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	DECQ CX
	JNZ  bq8x4loop
	MOVQ acc+32(FP), AX
	MOVQ 0(AX), BX
	VMOVUPS Y0, (BX)
	MOVQ 8(AX), BX
	VMOVUPS Y7, (BX)
	MOVQ 16(AX), BX
	VMOVUPS Y13, (BX)
	MOVQ 24(AX), BX
	VMOVUPS Y14, (BX)
	VZEROUPPER
	RET

#define G4X4(g) \
	VMOVDQU      (32*g)(SI), Y2 \
	VPBROADCASTD (4*g)(DI), Y5  \
	VPBROADCASTD (4*g)(R8), Y6  \
	VPBROADCASTD (4*g)(R9), Y10 \
	VPBROADCASTD (4*g)(R10), Y11 \
	VPMADDUBSW   Y5, Y2, Y5     \
	VPMADDUBSW   Y6, Y2, Y6     \
	VPMADDUBSW   Y10, Y2, Y10   \
	VPMADDUBSW   Y11, Y2, Y11   \
	VPADDW       Y5, Y1, Y1     \
	VPADDW       Y6, Y4, Y4     \
	VPADDW       Y10, Y8, Y8    \
	VPADDW       Y11, Y9, Y9

// X4SUB(I): I = int32 pair sums of I minus the broadcast int32 at
// (BX)(AX*1).
#define X4SUB(I) \
	VPMADDWD     Y15, I, I          \
	VPBROADCASTD (BX)(AX*1), Y3     \
	VPSUBD       Y3, I, I

// func batchQ4_0x8x4(tile *byte, x *[4]*int8, d *[4]*float32, s *[4]*int32, nb int, acc *[4]*float32)
TEXT ·batchQ4_0x8x4(SB), NOSPLIT, $32-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), AX
	MOVQ 0(AX), DI
	MOVQ 8(AX), R8
	MOVQ 16(AX), R9
	MOVQ 24(AX), R10
	MOVQ d+16(FP), AX
	MOVQ 0(AX), DX
	MOVQ 8(AX), R11
	MOVQ 16(AX), R12
	MOVQ 24(AX), R13
	// The sums' pointers live on the stack (out of registers).
	MOVQ s+24(FP), AX
	MOVQ 0(AX), BX
	MOVQ BX, 0(SP)
	MOVQ 8(AX), BX
	MOVQ BX, 8(SP)
	MOVQ 16(AX), BX
	MOVQ BX, 16(SP)
	MOVQ 24(AX), BX
	MOVQ BX, 24(SP)
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX
	MOVQ 0(AX), BX
	VMOVUPS (BX), Y0
	MOVQ 8(AX), BX
	VMOVUPS (BX), Y7
	MOVQ 16(AX), BX
	VMOVUPS (BX), Y13
	MOVQ 24(AX), BX
	VMOVUPS (BX), Y14
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15
	XORQ     AX, AX // byte offset into the sums

bq4x4loop:
	VPXOR Y1, Y1, Y1
	VPXOR Y4, Y4, Y4
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	G4X4(0)
	G4X4(1)
	G4X4(2)
	G4X4(3)
	G4X4(4)
	G4X4(5)
	G4X4(6)
	G4X4(7)
	MOVQ 0(SP), BX
	X4SUB(Y1)
	MOVQ 8(SP), BX
	X4SUB(Y4)
	MOVQ 16(SP), BX
	X4SUB(Y8)
	MOVQ 24(SP), BX
	X4SUB(Y9)
	X4SCALE(Y1, DX, Y0, 256)
	X4SCALE(Y4, R11, Y7, 256)
	X4SCALE(Y8, R12, Y13, 256)
	X4SCALE(Y9, R13, Y14, 256)
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $4, DX
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	ADDQ $4, AX
	DECQ CX
	JNZ  bq4x4loop
	MOVQ acc+40(FP), AX
	MOVQ 0(AX), BX
	VMOVUPS Y0, (BX)
	MOVQ 8(AX), BX
	VMOVUPS Y7, (BX)
	MOVQ 16(AX), BX
	VMOVUPS Y13, (BX)
	MOVQ 24(AX), BX
	VMOVUPS Y14, (BX)
	VZEROUPPER
	RET

// The AVX-512 batch kernels (F, VL, VNNI; useAVX512): the tiles hold
// unsigned bytes (Q4_0 its nibbles, as above; Q8_0 its quants plus 128,
// repackQ8_0x8U) and the per-row integer dot of one group is one VPDPBUSD
// with the vector's four quants broadcast from memory (AVX2 needs two to
// four instructions). The offset is taken off exactly: each block's sums
// start at c[b] = -(offset * sum of the block's activation quants). The
// float steps are those of batchQ8_0x8.

// func repackQ8_0x8U(dst *byte, w *byte, rs int, nb int)
//
// repackQ8_0x8U is repackQ8_0x8 with the quants stored once, plus 128, as
// unsigned bytes: blocks of q40TileBlock bytes (256 quants, 8 scales).
TEXT ·repackQ8_0x8U(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

rq8uloop:
	SCALES8(256)
	ROW8(2(SI), 18(SI), X0, Y0)
	ROW8(2(SI)(R8*1), 18(SI)(R8*1), X1, Y1)
	ROW8(2(SI)(R8*2), 18(SI)(R8*2), X2, Y2)
	ROW8(2(SI)(R9*1), 18(SI)(R9*1), X3, Y3)
	ROW8(2(R10), 18(R10), X4, Y4)
	ROW8(2(R10)(R8*1), 18(R10)(R8*1), X5, Y5)
	ROW8(2(R10)(R8*2), 18(R10)(R8*2), X6, Y6)
	ROW8(2(R10)(R9*1), 18(R10)(R9*1), X7, Y7)
	TRANSPOSE8
	MOVL         $0x80808080, AX
	VMOVD        AX, X4
	VPBROADCASTD X4, Y4
	VPXOR        Y4, Y0, Y0
	VPXOR        Y4, Y2, Y2
	VPXOR        Y4, Y12, Y12
	VPXOR        Y4, Y14, Y14
	VPXOR        Y4, Y1, Y1
	VPXOR        Y4, Y3, Y3
	VPXOR        Y4, Y13, Y13
	VPXOR        Y4, Y15, Y15
	VMOVDQU      Y0, 0(DI)
	VMOVDQU      Y2, 32(DI)
	VMOVDQU      Y12, 64(DI)
	VMOVDQU      Y14, 96(DI)
	VMOVDQU      Y1, 128(DI)
	VMOVDQU      Y3, 160(DI)
	VMOVDQU      Y13, 192(DI)
	VMOVDQU      Y15, 224(DI)
	ADDQ $34, SI
	ADDQ $34, R10
	ADDQ $288, DI
	DECQ CX
	JNZ  rq8uloop
	VZEROUPPER
	RET

// GU8(g): group g of the tile against the eight vectors (x + t*xs), into
// the int32 sums Y0-Y7.
#define GU8(g) \
	VMOVDQU       (32*g)(SI), Y8 \
	VPDPBUSD.BCST (4*g)(DI), Y8, Y0 \
	VPDPBUSD.BCST (4*g)(DI)(R8*1), Y8, Y1 \
	VPDPBUSD.BCST (4*g)(DI)(R8*2), Y8, Y2 \
	VPDPBUSD.BCST (4*g)(DI)(R9*1), Y8, Y3 \
	VPDPBUSD.BCST (4*g)(R10), Y8, Y4 \
	VPDPBUSD.BCST (4*g)(R10)(R8*1), Y8, Y5 \
	VPDPBUSD.BCST (4*g)(R10)(R8*2), Y8, Y6 \
	VPDPBUSD.BCST (4*g)(R10)(R9*1), Y8, Y7

// FU8(t): vector t's block sums into its accumulator: Y(16+t) =
// fma(float(sum), tile scales * d[t], Y(16+t)).
#define FU8(t, I, F) \
	VCVTDQ2PS   I, I            \
	VMULPS.BCST (4*t)(DX), Y9, Y10 \
	VFMADD231PS Y10, I, F

// func batchU8x8x8(tile *byte, x *int8, xs int, d *float32, c *int32, nb int, acc *float32)
//
// batchU8x8x8 adds to acc[t][r] (eight vectors t, eight rows r) the
// row-sequential dot of tile row r with vector t (quants x + t*xs) over
// nb blocks of an unsigned tile: d[8b+t] is vector t's scale of block b
// and c[8b+t] its correction.
TEXT ·batchU8x8x8(SB), NOSPLIT, $0-56
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xs+16(FP), R8
	LEAQ (R8)(R8*2), R9
	LEAQ (DI)(R8*4), R10
	MOVQ d+24(FP), DX
	MOVQ c+32(FP), BX
	MOVQ nb+40(FP), CX
	MOVQ acc+48(FP), AX
	VMOVUPS 0(AX), Y16
	VMOVUPS 32(AX), Y17
	VMOVUPS 64(AX), Y18
	VMOVUPS 96(AX), Y19
	VMOVUPS 128(AX), Y20
	VMOVUPS 160(AX), Y21
	VMOVUPS 192(AX), Y22
	VMOVUPS 224(AX), Y23

bu8x8loop:
	VPBROADCASTD 0(BX), Y0
	VPBROADCASTD 4(BX), Y1
	VPBROADCASTD 8(BX), Y2
	VPBROADCASTD 12(BX), Y3
	VPBROADCASTD 16(BX), Y4
	VPBROADCASTD 20(BX), Y5
	VPBROADCASTD 24(BX), Y6
	VPBROADCASTD 28(BX), Y7
	GU8(0)
	GU8(1)
	GU8(2)
	GU8(3)
	GU8(4)
	GU8(5)
	GU8(6)
	GU8(7)
	VMOVUPS 256(SI), Y9
	FU8(0, Y0, Y16)
	FU8(1, Y1, Y17)
	FU8(2, Y2, Y18)
	FU8(3, Y3, Y19)
	FU8(4, Y4, Y20)
	FU8(5, Y5, Y21)
	FU8(6, Y6, Y22)
	FU8(7, Y7, Y23)
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $32, R10
	ADDQ $32, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  bu8x8loop
	VMOVUPS Y16, 0(AX)
	VMOVUPS Y17, 32(AX)
	VMOVUPS Y18, 64(AX)
	VMOVUPS Y19, 96(AX)
	VMOVUPS Y20, 128(AX)
	VMOVUPS Y21, 160(AX)
	VMOVUPS Y22, 192(AX)
	VMOVUPS Y23, 224(AX)
	VZEROUPPER
	RET

// func batchU8x8x1(tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32)
//
// batchU8x8x1 is batchU8x8x8 for one vector: d[b], c[b] its scale and
// correction of block b. Two chains of sums (even and odd groups).
TEXT ·batchU8x8x1(SB), NOSPLIT, $0-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ c+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX
	VMOVUPS (AX), Y16

bu8x1loop:
	VPBROADCASTD (BX), Y0
	VPXOR         Y1, Y1, Y1
	VMOVDQU       0(SI), Y8
	VPDPBUSD.BCST 0(DI), Y8, Y0
	VMOVDQU       32(SI), Y8
	VPDPBUSD.BCST 4(DI), Y8, Y1
	VMOVDQU       64(SI), Y8
	VPDPBUSD.BCST 8(DI), Y8, Y0
	VMOVDQU       96(SI), Y8
	VPDPBUSD.BCST 12(DI), Y8, Y1
	VMOVDQU       128(SI), Y8
	VPDPBUSD.BCST 16(DI), Y8, Y0
	VMOVDQU       160(SI), Y8
	VPDPBUSD.BCST 20(DI), Y8, Y1
	VMOVDQU       192(SI), Y8
	VPDPBUSD.BCST 24(DI), Y8, Y0
	VMOVDQU       224(SI), Y8
	VPDPBUSD.BCST 28(DI), Y8, Y1
	VPADDD        Y1, Y0, Y0
	VMOVUPS       256(SI), Y9
	FU8(0, Y0, Y16)
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, BX
	DECQ CX
	JNZ  bu8x1loop
	VMOVUPS Y16, (AX)
	VZEROUPPER
	RET

// K4ROWSC(addr, S, M): the scales and mins of the Q4_K block at addr
// (12 bytes at addr+4; see K4YSCALES in dot_avx512_amd64.s): S = the 8
// scales as int32, M = the 8 mins as int16 (so pairs of mins in dwords).
// X24 = 0x3f bytes, X25 = 0x0f, X26 = 0x03, X27 = the shifts [0, 4, 0, 0].
#define K4ROWSC(addr, S, M) \
	VMOVDQU    addr, X8         \
	VPANDD     X24, X8, X9      \
	VPSHUFD    $0xaa, X8, X10   \
	VPSRLVD    X27, X10, X10    \
	VPANDD     X25, X10, X10    \
	VPSRLD     $6, X8, X8       \
	VPANDD     X26, X8, X8      \
	VPSLLD     $4, X8, X8       \
	VPORD      X8, X10, X10     \
	VPUNPCKLDQ X10, X9, X9      \
	VPMOVZXBD  X9, S            \
	VPSHUFD    $0xee, X9, X9    \
	VPMOVZXBW  X9, M

// K4NIB(p, G, g): group vector G (group g of the pair p of sub-blocks) as
// the low nibbles (sub-block 2p) and high nibbles (2p+1) into the tile at
// DI. Y16 = 0x0f bytes; clobbers Y4, Y5.
#define K4NIB(p, G, g) \
	VPANDD  Y16, G, Y4                 \
	VMOVDQU Y4, (256*(2*p)+32*g)(DI)   \
	VPSRLW  $4, G, Y5                  \
	VPANDD  Y16, Y5, Y5                \
	VMOVDQU Y5, (256*(2*p+1)+32*g)(DI)

// K4PAIR8(p): the pair p of sub-blocks of the 8 rows into the tile.
#define K4PAIR8(p) \
	VMOVDQU (16+32*p)(SI), Y0        \
	VMOVDQU (16+32*p)(SI)(R8*1), Y1  \
	VMOVDQU (16+32*p)(SI)(R8*2), Y2  \
	VMOVDQU (16+32*p)(SI)(R9*1), Y3  \
	VMOVDQU (16+32*p)(R10), Y4       \
	VMOVDQU (16+32*p)(R10)(R8*1), Y5 \
	VMOVDQU (16+32*p)(R10)(R8*2), Y6 \
	VMOVDQU (16+32*p)(R10)(R9*1), Y7 \
	TRANSPOSE8                       \
	K4NIB(p, Y0, 0)                  \
	K4NIB(p, Y2, 1)                  \
	K4NIB(p, Y12, 2)                 \
	K4NIB(p, Y14, 3)                 \
	K4NIB(p, Y1, 4)                  \
	K4NIB(p, Y3, 5)                  \
	K4NIB(p, Y13, 6)                 \
	K4NIB(p, Y15, 7)

// GATHER16(off, X): the fp16 at offset off of the 8 rows' blocks as 8
// float32 in Y (X its low half).
#define GATHER16(off, X, Y) \
	MOVWLZX   off(SI), AX                   \
	VMOVD     AX, X                         \
	VPINSRW   $1, off(SI)(R8*1), X, X       \
	VPINSRW   $2, off(SI)(R8*2), X, X       \
	VPINSRW   $3, off(SI)(R9*1), X, X       \
	VPINSRW   $4, off(R10), X, X            \
	VPINSRW   $5, off(R10)(R8*1), X, X      \
	VPINSRW   $6, off(R10)(R8*2), X, X      \
	VPINSRW   $7, off(R10)(R9*1), X, X      \
	VCVTPH2PS X, Y

// RQ4KBODY: one super-block of the 8 rows at SI (rows 4-7 at R10) into
// the tile at DI.
#define RQ4KBODY \
	K4PAIR8(0) \
	K4PAIR8(1) \
	K4PAIR8(2) \
	K4PAIR8(3) \
	K4ROWSC(4(SI), Y0, X17) \
	K4ROWSC(4(SI)(R8*1), Y1, X18) \
	K4ROWSC(4(SI)(R8*2), Y2, X19) \
	K4ROWSC(4(SI)(R9*1), Y3, X20) \
	K4ROWSC(4(R10), Y4, X21) \
	K4ROWSC(4(R10)(R8*1), Y5, X22) \
	K4ROWSC(4(R10)(R8*2), Y6, X23) \
	K4ROWSC(4(R10)(R9*1), Y7, X28) \
	TRANSPOSE8 \
	VMOVDQU Y0, 2048(DI) \
	VMOVDQU Y2, 2080(DI) \
	VMOVDQU Y12, 2112(DI) \
	VMOVDQU Y14, 2144(DI) \
	VMOVDQU Y1, 2176(DI) \
	VMOVDQU Y3, 2208(DI) \
	VMOVDQU Y13, 2240(DI) \
	VMOVDQU Y15, 2272(DI) \
	VMOVDQA64 Y17, Y0 \
	VMOVDQA64 Y18, Y1 \
	VMOVDQA64 Y19, Y2 \
	VMOVDQA64 Y20, Y3 \
	VMOVDQA64 Y21, Y4 \
	VMOVDQA64 Y22, Y5 \
	VMOVDQA64 Y23, Y6 \
	VMOVDQA64 Y28, Y7 \
	TRANSPOSE8 \
	VMOVDQU Y0, 2304(DI) \
	VMOVDQU Y2, 2336(DI) \
	VMOVDQU Y12, 2368(DI) \
	VMOVDQU Y14, 2400(DI) \
	GATHER16(0, X0, Y0) \
	VMOVUPS Y0, 2432(DI) \
	GATHER16(2, X1, Y1) \
	VMOVUPS Y1, 2464(DI)

// func repackQ4_Kx8Asm(dst *byte, w *byte, rs int, nb int)
//
// repackQ4_Kx8Asm is repackQ4_Kx8Go (batch_k_amd64.go) in assembly:
// the nibbles of each pair of sub-blocks transposed once as bytes (the
// 8x8 dword transpose) and split into the two sub-blocks after.
TEXT ·repackQ4_Kx8Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y16
	VPBROADCASTD AX, X25
	MOVL         $0x3f3f3f3f, AX
	VPBROADCASTD AX, X24
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, X26
	MOVQ         $0x0000000400000000, AX
	VMOVQ        AX, X27

rq4kloop:
	RQ4KBODY
	ADDQ $144, SI
	ADDQ $144, R10
	ADDQ $2496, DI
	DECQ CX
	JNZ  rq4kloop
	VZEROUPPER
	RET

// K4LANES(B, B4, B8, B12, Z, X): Z = the 16 bytes at B, B4, B8 and B12
// (rows j, 4+j, 8+j and 12+j: row j at an offset from SI plus 0, R8,
// 2*R8 or R9, the others at the same offset from R10, R11 and R12), one
// in each of its four lanes (X: Z's low lane). The upper lanes come by masked broadcast loads (K1,
// K2, K3: dwords 4-7, 8-11, 12-15), which take no shuffle.
#define K4LANES(B, B4, B8, B12, Z, X) \
	VMOVDQU         B, X       \
	VBROADCASTI32X4 B4, K1, Z  \
	VBROADCASTI32X4 B8, K2, Z  \
	VBROADCASTI32X4 B12, K3, Z

// T4LANES(A, B, C, D, O0, O1, O2, O3): the 4x4 dword transpose of A-D in
// each 128-bit lane: Og holds dword g of A, B, C, D in every lane.
// Clobbers Z17-Z20.
#define T4LANES(A, B, C, D, O0, O1, O2, O3) \
	VPUNPCKLDQ  B, A, Z17    \
	VPUNPCKHDQ  B, A, Z18    \
	VPUNPCKLDQ  D, C, Z19    \
	VPUNPCKHDQ  D, C, Z20    \
	VPUNPCKLQDQ Z19, Z17, O0 \
	VPUNPCKHQDQ Z19, Z17, O1 \
	VPUNPCKLQDQ Z20, Z18, O2 \
	VPUNPCKHQDQ Z20, Z18, O3

// K4NIB16(p, G, g, M): K4NIBM for group vector G of 16 rows (rows 8-15 in
// its upper half, where the second 8-row piece goes: 32 bytes further).
// Z16 = 0x0f bytes; clobbers Z21, Z22.
#define K4NIB16(p, G, g, M) \
	VPANDD    Z16, G, Z21                       \
	VMOVDQU64 Z21, (M*(256*(2*p)+32*g))(DI)     \
	VPSRLW    $4, G, Z22                        \
	VPANDD    Z16, Z22, Z22                     \
	VMOVDQU64 Z22, (M*(256*(2*p+1)+32*g))(DI)

// K4PAIR16M(p, M): K4PAIR8M for 16 rows (SI, R10, R11, R12: rows 0, 4, 8,
// 12): each lane of a register holds four dwords of a row, so the
// transpose stays within lanes and a register of results is a group of
// all 16 rows.
#define K4PAIR16M(p, M) \
	K4LANES((16+32*p)(SI), (16+32*p)(R10), (16+32*p)(R11), (16+32*p)(R12), Z0, X0) \
	K4LANES((16+32*p)(SI)(R8*1), (16+32*p)(R10)(R8*1), (16+32*p)(R11)(R8*1), (16+32*p)(R12)(R8*1), Z1, X1) \
	K4LANES((16+32*p)(SI)(R8*2), (16+32*p)(R10)(R8*2), (16+32*p)(R11)(R8*2), (16+32*p)(R12)(R8*2), Z2, X2) \
	K4LANES((16+32*p)(SI)(R9*1), (16+32*p)(R10)(R9*1), (16+32*p)(R11)(R9*1), (16+32*p)(R12)(R9*1), Z3, X3) \
	K4LANES((32+32*p)(SI), (32+32*p)(R10), (32+32*p)(R11), (32+32*p)(R12), Z4, X4) \
	K4LANES((32+32*p)(SI)(R8*1), (32+32*p)(R10)(R8*1), (32+32*p)(R11)(R8*1), (32+32*p)(R12)(R8*1), Z5, X5) \
	K4LANES((32+32*p)(SI)(R8*2), (32+32*p)(R10)(R8*2), (32+32*p)(R11)(R8*2), (32+32*p)(R12)(R8*2), Z6, X6) \
	K4LANES((32+32*p)(SI)(R9*1), (32+32*p)(R10)(R9*1), (32+32*p)(R11)(R9*1), (32+32*p)(R12)(R9*1), Z7, X7) \
	T4LANES(Z0, Z1, Z2, Z3, Z8, Z9, Z10, Z11)   \
	T4LANES(Z4, Z5, Z6, Z7, Z12, Z13, Z14, Z15) \
	K4NIB16(p, Z8, 0, M)  \
	K4NIB16(p, Z9, 1, M)  \
	K4NIB16(p, Z10, 2, M) \
	K4NIB16(p, Z11, 3, M) \
	K4NIB16(p, Z12, 4, M) \
	K4NIB16(p, Z13, 5, M) \
	K4NIB16(p, Z14, 6, M) \
	K4NIB16(p, Z15, 7, M)

// K4SCB0(S, j, M), K4SCB(S, j, sh, M), K4SCB3(S, j, M): scale j of the 16
// rows (byte 0, sh/8 or 3 of each dword of S) as int32 into the tile.
// Z28 = 0xff dwords; clobbers Z13.
#define K4SCB0(S, j, M) \
	VPANDD    Z28, S, Z13 \
	VMOVDQU64 Z13, (M*(2048+32*j))(DI)
#define K4SCB(S, j, sh, M) \
	VPSRLD    $sh, S, Z13  \
	VPANDD    Z28, Z13, Z13 \
	VMOVDQU64 Z13, (M*(2048+32*j))(DI)
#define K4SCB3(S, j, M) \
	VPSRLD    $24, S, Z13 \
	VMOVDQU64 Z13, (M*(2048+32*j))(DI)

// K4MINP(S, k, M): the min pair k of the 16 rows (bytes 0 and 1 of each
// dword of S) as two int16 in a dword into the tile. Z28 = 0xff dwords,
// Z29 = 0xff00 dwords; clobbers Z13, Z14.
#define K4MINP(S, k, M) \
	VPANDD    Z28, S, Z13  \
	VPANDD    Z29, S, Z14  \
	VPSLLD    $8, Z14, Z14 \
	VPORD     Z14, Z13, Z13 \
	VMOVDQU64 Z13, (M*(2304+32*k))(DI)

// K4TOP2(A, LO, D): D = LO | (the top two bits of each byte of A) << 4:
// scales or mins 4-7 from their low nibbles (LO) and the bytes of scales
// or mins 0-3 (A). Z26 = 0x03 bytes.
#define K4TOP2(A, LO, D) \
	VPSRLD $6, A, D   \
	VPANDD Z26, D, D  \
	VPSLLD $4, D, D   \
	VPORD  LO, D, D

// RQ4KSC16(M): the scales, mins, d and dmin of 16 rows at once (K4ROWSC
// and GATHER16 take one row at a time). The 16-byte headers (d, dmin,
// the 12 bytes of scales and mins) of rows 4L+i go to lane L of Z(i);
// the in-lane transpose then gives, a row a dword and in row order, d and
// dmin (Z4) and scale bytes 0-3, 4-7, 8-11 (Z5, Z6, Z7), which K4ROWSC's
// arithmetic turns into the 8 scales (Z8, Z10) and 8 mins (Z9, Z11) of
// every row, four bytes a dword. Z24 = 0x3f bytes, Z25 = 0x0f, Z26 = 0x03.
#define RQ4KSC16(M) \
	K4LANES((SI), (R10), (R11), (R12), Z0, X0) \
	K4LANES((SI)(R8*1), (R10)(R8*1), (R11)(R8*1), (R12)(R8*1), Z1, X1) \
	K4LANES((SI)(R8*2), (R10)(R8*2), (R11)(R8*2), (R12)(R8*2), Z2, X2) \
	K4LANES((SI)(R9*1), (R10)(R9*1), (R11)(R9*1), (R12)(R9*1), Z3, X3) \
	T4LANES(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7) \
	VPANDD    Z24, Z5, Z8   \
	VPANDD    Z24, Z6, Z9   \
	VPANDD    Z25, Z7, Z12  \
	K4TOP2(Z5, Z12, Z10)    \
	VPSRLD    $4, Z7, Z12   \
	VPANDD    Z25, Z12, Z12 \
	K4TOP2(Z6, Z12, Z11)    \
	K4SCB0(Z8, 0, M)        \
	K4SCB(Z8, 1, 8, M)      \
	K4SCB(Z8, 2, 16, M)     \
	K4SCB3(Z8, 3, M)        \
	K4SCB0(Z10, 4, M)       \
	K4SCB(Z10, 5, 8, M)     \
	K4SCB(Z10, 6, 16, M)    \
	K4SCB3(Z10, 7, M)       \
	K4MINP(Z9, 0, M)        \
	VPSRLD    $16, Z9, Z9   \
	K4MINP(Z9, 1, M)        \
	K4MINP(Z11, 2, M)       \
	VPSRLD    $16, Z11, Z11 \
	K4MINP(Z11, 3, M)       \
	VPMOVDW   Z4, Y13       \
	VCVTPH2PS Y13, Z13      \
	VMOVUPS   Z13, (M*2432)(DI) \
	VPSRLD    $16, Z4, Z14  \
	VPMOVDW   Z14, Y14      \
	VCVTPH2PS Y14, Z14      \
	VMOVUPS   Z14, (M*2464)(DI)

// RQ4K16SETUP: a 16-row Q4_K repack's arguments and constants: DI the
// tile, SI, R10, R11, R12 rows 0, 4, 8, 12 (R8 the row stride, R9 three
// of them), CX the super-blocks; Z16 = Z25 = 0x0f bytes, Z24 = 0x3f,
// Z26 = 0x03, Z28 = 0xff dwords, Z29 = 0xff00 dwords, K1-K3 the lane
// masks of K4LANES.
#define RQ4K16SETUP \
	MOVQ dst+0(FP), DI                   \
	MOVQ w+8(FP), SI                     \
	MOVQ rs+16(FP), R8                   \
	MOVQ nb+24(FP), CX                   \
	LEAQ (R8)(R8*2), R9                  \
	LEAQ (SI)(R8*4), R10                 \
	LEAQ (R10)(R8*4), R11                \
	LEAQ (R11)(R8*4), R12                \
	MOVL         $0x0f0f0f0f, AX         \
	VPBROADCASTD AX, Z16                 \
	VPBROADCASTD AX, Z25                 \
	MOVL         $0x3f3f3f3f, AX         \
	VPBROADCASTD AX, Z24                 \
	MOVL         $0x03030303, AX         \
	VPBROADCASTD AX, Z26                 \
	MOVL         $0xff, AX               \
	VPBROADCASTD AX, Z28                 \
	MOVL         $0xff00, AX             \
	VPBROADCASTD AX, Z29                 \
	MOVW         $0x00f0, AX             \
	KMOVW        AX, K1                  \
	MOVW         $0x0f00, AX             \
	KMOVW        AX, K2                  \
	MOVW         $0xf000, AX             \
	KMOVW        AX, K3

// RQ4K16LOOP(M, step, label): nb super-blocks of 16 rows: the quants
// (K4PAIR16M) and the scales (RQ4KSC16) of all 16 at once.
#define RQ4K16LOOP(M, step, label) \
	RQ4K16SETUP                          \
label:                                   \
	K4PAIR16M(0, M)                      \
	K4PAIR16M(1, M)                      \
	K4PAIR16M(2, M)                      \
	K4PAIR16M(3, M)                      \
	RQ4KSC16(M)                          \
	ADDQ  $step, DI                      \
	ADDQ  $144, SI                       \
	ADDQ  $144, R10                      \
	ADDQ  $144, R11                      \
	ADDQ  $144, R12                      \
	DECQ  CX                             \
	JNZ   label                          \
	VZEROUPPER                           \
	RET

// func repackQ4_Kx16iAsm(dst *byte, w *byte, rs int, nb int)
//
// repackQ4_Kx16iAsm is repackQ4_Kx16iGo in assembly: the 16-row
// interleaved tile (batch_k_amd64.s).
TEXT ·repackQ4_Kx16iAsm(SB), NOSPLIT, $0-32
	RQ4K16LOOP(2, 4992, rq4k16iloop)

// K4ROWS2(A, B, Y, Z): the 32 bytes at A (lanes 0 and 1 of Z) and at B
// (lanes 2 and 3).
#define K4ROWS2(A, B, Y, Z) \
	VMOVDQU      A, Y       \
	VINSERTI64X4 $1, B, Z, Z

// K4PAIR16P(p): the quants of pair p of the 16 rows (SI, R10, R11, R12:
// rows 0, 4, 8, 12), both nibbles in a byte, transposed into the packed
// 32-row tile: a register of the 8 dwords of row r and of row r+4, for
// rows 0-3 and 8-11 (16 loads of 32 bytes); T4LANES then gives, for
// rows 0-7 and for rows 8-15, lanes holding four rows' dword g (lanes 0
// and 2) and dword 4+g (1 and 3), and one VSHUFI32X4 each joins the
// lanes of group g of all 16 rows. Half the loads of K4PAIR16M's four
// 16-byte pieces a register (three of them masked broadcasts) for twice
// the shuffles: 32 rows of two super-blocks from L1 took 99-105 ns
// against 110-115 that way (2026-12-07, AMD EPYC Zen 5).
#define K4PAIR16P(p) \
	K4ROWS2((16+32*p)(SI), (16+32*p)(R10), Y0, Z0)                 \
	K4ROWS2((16+32*p)(SI)(R8*1), (16+32*p)(R10)(R8*1), Y1, Z1)     \
	K4ROWS2((16+32*p)(SI)(R8*2), (16+32*p)(R10)(R8*2), Y2, Z2)     \
	K4ROWS2((16+32*p)(SI)(R9*1), (16+32*p)(R10)(R9*1), Y3, Z3)     \
	K4ROWS2((16+32*p)(R11), (16+32*p)(R12), Y4, Z4)                \
	K4ROWS2((16+32*p)(R11)(R8*1), (16+32*p)(R12)(R8*1), Y5, Z5)    \
	K4ROWS2((16+32*p)(R11)(R8*2), (16+32*p)(R12)(R8*2), Y6, Z6)    \
	K4ROWS2((16+32*p)(R11)(R9*1), (16+32*p)(R12)(R9*1), Y7, Z7)    \
	T4LANES(Z0, Z1, Z2, Z3, Z8, Z9, Z10, Z11)   \
	T4LANES(Z4, Z5, Z6, Z7, Z12, Z13, Z14, Z15) \
	VSHUFI32X4 $0x88, Z12, Z8, Z0   \
	VSHUFI32X4 $0x88, Z13, Z9, Z1   \
	VSHUFI32X4 $0x88, Z14, Z10, Z2  \
	VSHUFI32X4 $0x88, Z15, Z11, Z3  \
	VSHUFI32X4 $0xdd, Z12, Z8, Z4   \
	VSHUFI32X4 $0xdd, Z13, Z9, Z5   \
	VSHUFI32X4 $0xdd, Z14, Z10, Z6  \
	VSHUFI32X4 $0xdd, Z15, Z11, Z7  \
	VMOVDQU64 Z0, (1024*p)(DI)       \
	VMOVDQU64 Z1, (1024*p+128)(DI)   \
	VMOVDQU64 Z2, (1024*p+128*2)(DI) \
	VMOVDQU64 Z3, (1024*p+128*3)(DI) \
	VMOVDQU64 Z4, (1024*p+128*4)(DI) \
	VMOVDQU64 Z5, (1024*p+128*5)(DI) \
	VMOVDQU64 Z6, (1024*p+128*6)(DI) \
	VMOVDQU64 Z7, (1024*p+128*7)(DI)

// func repackQ4_Kx16pAsm(dst *byte, w *byte, rs int, nb int)
//
// repackQ4_Kx16pAsm is repackQ4_Kx16pGo in assembly: half of a packed
// 32-row tile, dst + 64h taking rows 16h..16h+15. The quants keep both
// nibbles in a byte (half the stores of an unpacked tile, and no
// arithmetic: the kernel masks them); the scales, mins, d and dmin are
// RQ4KSC16's for a 32-row tile, 4096 bytes earlier (the quants' half).
TEXT ·repackQ4_Kx16pAsm(SB), NOSPLIT, $0-32
	RQ4K16SETUP

rq4k16ploop:
	K4PAIR16P(0)
	K4PAIR16P(1)
	K4PAIR16P(2)
	K4PAIR16P(3)
	SUBQ $4096, DI // RQ4KSC16(4) writes at 8192 and on: here at 4096
	RQ4KSC16(4)
	ADDQ $(4096+5888), DI
	ADDQ $144, SI
	ADDQ $144, R10
	ADDQ $144, R11
	ADDQ $144, R12
	DECQ CX
	JNZ  rq4k16ploop
	VZEROUPPER
	RET

// The AVX-VNNI batch kernels (useAVXVNNI: the VEX-encoded 32-byte
// VPDPBUSD of CPUs without AVX-512, such as Intel's client cores): the
// AVX-512 batch kernels with the quants broadcast into registers
// (no broadcast from memory inside the instruction) and 16 registers, so
// four vectors at a time. Go's assembler writes VPDPBUSD only in its
// EVEX form, so the VEX one is spelled out in bytes.

// VPDPBUSDV(src2, src1, dst): dst += lanes(unsigned bytes of Y(src1) ·
// signed bytes of Y(src2)) (register numbers 0-15; VEX.256.66.0F38.W0 50).
#define VPDPBUSDV(src2, src1, dst) \
	BYTE $0xC4; BYTE $((((~(dst>>3))&1)<<7) | 0x40 | (((~(src2>>3))&1)<<5) | 0x02); BYTE $((((~src1)&15)<<3) | 0x05); BYTE $0x50; BYTE $(0xC0 | ((dst&7)<<3) | (src2&7))

// GV4(g): group g of the tile against the four vectors (x + t*xs) into
// the int32 sums Y0-Y3.
#define GV4(g) \
	VMOVDQU      (32*g)(SI), Y8          \
	VPBROADCASTD (4*g)(DI), Y9           \
	VPBROADCASTD (4*g)(DI)(R8*1), Y10    \
	VPBROADCASTD (4*g)(DI)(R8*2), Y11    \
	VPBROADCASTD (4*g)(DI)(R9*1), Y12    \
	VPDPBUSDV(9, 8, 0)                   \
	VPDPBUSDV(10, 8, 1)                  \
	VPDPBUSDV(11, 8, 2)                  \
	VPDPBUSDV(12, 8, 3)

// FV(t, I, F): F = fma(float(I), tile scales (Y13) * d[t], F).
#define FV(t, I, F) \
	VCVTDQ2PS    I, I          \
	VBROADCASTSS (4*t)(DX), Y14 \
	VMULPS       Y13, Y14, Y14 \
	VFMADD231PS  Y14, I, F

// func batchU8x8x4V(tile *byte, x *int8, xs int, d *float32, c *int32, nb int, acc *float32)
//
// batchU8x8x4V is batchU8x8x8 for four vectors: d[8b+t] and c[8b+t] are
// vector t's scale and correction of block b (four of a group of eight).
TEXT ·batchU8x8x4V(SB), NOSPLIT, $0-56
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xs+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ d+24(FP), DX
	MOVQ c+32(FP), BX
	MOVQ nb+40(FP), CX
	MOVQ acc+48(FP), AX
	VMOVUPS 0(AX), Y4
	VMOVUPS 32(AX), Y5
	VMOVUPS 64(AX), Y6
	VMOVUPS 96(AX), Y7

bv4loop:
	VPBROADCASTD 0(BX), Y0
	VPBROADCASTD 4(BX), Y1
	VPBROADCASTD 8(BX), Y2
	VPBROADCASTD 12(BX), Y3
	GV4(0)
	GV4(1)
	GV4(2)
	GV4(3)
	GV4(4)
	GV4(5)
	GV4(6)
	GV4(7)
	VMOVUPS 256(SI), Y13
	FV(0, Y0, Y4)
	FV(1, Y1, Y5)
	FV(2, Y2, Y6)
	FV(3, Y3, Y7)
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $32, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  bv4loop
	VMOVUPS Y4, 0(AX)
	VMOVUPS Y5, 32(AX)
	VMOVUPS Y6, 64(AX)
	VMOVUPS Y7, 96(AX)
	VZEROUPPER
	RET

// GV1(g, A): group g of the tile against one vector into A (0 or 1).
#define GV1(g, A) \
	VMOVDQU      (32*g)(SI), Y8 \
	VPBROADCASTD (4*g)(DI), Y9  \
	VPDPBUSDV(9, 8, A)

// func batchU8x8x1V(tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32)
//
// batchU8x8x1V is batchU8x8x1 with AVX-VNNI.
TEXT ·batchU8x8x1V(SB), NOSPLIT, $0-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ c+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX
	VMOVUPS (AX), Y4

bv1loop:
	VPBROADCASTD (BX), Y0
	VPXOR        Y1, Y1, Y1
	GV1(0, 0)
	GV1(1, 1)
	GV1(2, 0)
	GV1(3, 1)
	GV1(4, 0)
	GV1(5, 1)
	GV1(6, 0)
	GV1(7, 1)
	VPADDD  Y1, Y0, Y0
	VMOVUPS 256(SI), Y13
	FV(0, Y0, Y4)
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, BX
	DECQ CX
	JNZ  bv1loop
	VMOVUPS Y4, (AX)
	VZEROUPPER
	RET

// The Q6_K tile (batch_k_amd64.s): per super-block of the 8 rows, at
// 256c+32g group g (elements 4g..4g+3) of the chunk c of 32 elements, the
// 6-bit quants as bytes, row r in bytes 4r..4r+3 (so sub-block i's four
// groups at 128i); at 2048+32i the rows' scales of sub-block i as int32;
// at 2560 their d as float32.

// Q6ROW(B, loff, qoff, LOSH, lon, HISH, hin, Y): Y = one chunk of 32
// quants of the row at B: the nibbles at loff (shifted right by lon,
// masked) with the two high bits at qoff (shifted by hin into bits 4-5).
// Y16 = 0x0f bytes, Y17 = 0x30 bytes; clobbers Y8.
#define Q6ROW(B, loff, qoff, LOSH, lon, HISH, hin, Y) \
	VMOVDQU    loff B, Y            \
	VPSRLW     $lon, Y, Y           \
	VPANDD     Y16, Y, Y            \
	VMOVDQU    qoff B, Y8           \
	HISH       $hin, Y8, Y8         \
	VPTERNLOGD $0xf8, Y17, Y8, Y

// Q6CHUNK(c, ...): chunk c of the 8 rows, transposed into the tile at DI.
#define Q6CHUNK(c, loff, qoff, lon, HISH, hin) \
	Q6ROW((SI), loff, qoff, VPSRLW, lon, HISH, hin, Y0) \
	Q6ROW((SI)(R8*1), loff, qoff, VPSRLW, lon, HISH, hin, Y1) \
	Q6ROW((SI)(R8*2), loff, qoff, VPSRLW, lon, HISH, hin, Y2) \
	Q6ROW((SI)(R9*1), loff, qoff, VPSRLW, lon, HISH, hin, Y3) \
	Q6ROW((R10), loff, qoff, VPSRLW, lon, HISH, hin, Y4) \
	Q6ROW((R10)(R8*1), loff, qoff, VPSRLW, lon, HISH, hin, Y5) \
	Q6ROW((R10)(R8*2), loff, qoff, VPSRLW, lon, HISH, hin, Y6) \
	Q6ROW((R10)(R9*1), loff, qoff, VPSRLW, lon, HISH, hin, Y7) \
	TRANSPOSE8 \
	VMOVDQU Y0, (256*c+0)(DI) \
	VMOVDQU Y2, (256*c+32)(DI) \
	VMOVDQU Y12, (256*c+64)(DI) \
	VMOVDQU Y14, (256*c+96)(DI) \
	VMOVDQU Y1, (256*c+128)(DI) \
	VMOVDQU Y3, (256*c+160)(DI) \
	VMOVDQU Y13, (256*c+192)(DI) \
	VMOVDQU Y15, (256*c+224)(DI)

// Q6SC(off, base): the rows' scales off..off+7 (int8 at 192+off) as int32
// into the tile at 2048+32*off.
#define Q6SC(off) \
	VPMOVSXBD (192+off)(SI), Y0 \
	VPMOVSXBD (192+off)(SI)(R8*1), Y1 \
	VPMOVSXBD (192+off)(SI)(R8*2), Y2 \
	VPMOVSXBD (192+off)(SI)(R9*1), Y3 \
	VPMOVSXBD (192+off)(R10), Y4 \
	VPMOVSXBD (192+off)(R10)(R8*1), Y5 \
	VPMOVSXBD (192+off)(R10)(R8*2), Y6 \
	VPMOVSXBD (192+off)(R10)(R9*1), Y7 \
	TRANSPOSE8 \
	VMOVDQU Y0, (2048+32*off+0)(DI) \
	VMOVDQU Y2, (2048+32*off+32)(DI) \
	VMOVDQU Y12, (2048+32*off+64)(DI) \
	VMOVDQU Y14, (2048+32*off+96)(DI) \
	VMOVDQU Y1, (2048+32*off+128)(DI) \
	VMOVDQU Y3, (2048+32*off+160)(DI) \
	VMOVDQU Y13, (2048+32*off+192)(DI) \
	VMOVDQU Y15, (2048+32*off+224)(DI)

// func repackQ6_Kx8Asm(dst *byte, w *byte, rs int, nb int)
//
// repackQ6_Kx8Asm is repackQ6_Kx8Go (batch_k_amd64.go) in assembly.
TEXT ·repackQ6_Kx8Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y16
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Y17

rq6kloop:
	Q6CHUNK(0, 0, 128, 0, VPSLLW, 4)
	Q6CHUNK(1, 32, 128, 0, VPSLLW, 2)
	Q6CHUNK(2, 0, 128, 4, VPSLLW, 0)
	Q6CHUNK(3, 32, 128, 4, VPSRLW, 2)
	Q6CHUNK(4, 64, 160, 0, VPSLLW, 4)
	Q6CHUNK(5, 96, 160, 0, VPSLLW, 2)
	Q6CHUNK(6, 64, 160, 4, VPSLLW, 0)
	Q6CHUNK(7, 96, 160, 4, VPSRLW, 2)
	Q6SC(0)
	Q6SC(8)
	GATHER16(208, X0, Y0)
	VMOVUPS Y0, 2560(DI)
	ADDQ $210, SI
	ADDQ $210, R10
	ADDQ $2592, DI
	DECQ CX
	JNZ  rq6kloop
	VZEROUPPER
	RET

// The Q5_K tile is the Q4_K tile with 5-bit quants: the fifth bits (qh,
// 32 bytes at 16) transposed like the quants, once per super-block, into
// the frame, then moved to bit 4 of each quant (Y18 = 0x10 bytes).

// K5NIB(p, G, g, SH0, N0, SH1, N1): K4NIB with the fifth bits of
// sub-blocks 2p (shift SH0 by N0) and 2p+1 (SH1 by N1). Clobbers Y4-Y6.
#define K5NIB(p, G, g, SH0, N0, SH1, N1) \
	VMOVDQU    (32*g)(SP), Y6             \
	SH0        $N0, Y6, Y6                \
	VPANDD     Y16, G, Y4                 \
	VPTERNLOGD $0xf8, Y18, Y6, Y4         \
	VMOVDQU    Y4, (256*(2*p)+32*g)(DI)   \
	VMOVDQU    (32*g)(SP), Y6             \
	SH1        $N1, Y6, Y6                \
	VPSRLW     $4, G, Y5                  \
	VPANDD     Y16, Y5, Y5                \
	VPTERNLOGD $0xf8, Y18, Y6, Y5         \
	VMOVDQU    Y5, (256*(2*p+1)+32*g)(DI)

// K5PAIR8(p, ...): K4PAIR8 for the Q5_K quants (at 48).
#define K5PAIR8(p, SH0, N0, SH1, N1) \
	VMOVDQU (48+32*p)(SI), Y0 \
	VMOVDQU (48+32*p)(SI)(R8*1), Y1 \
	VMOVDQU (48+32*p)(SI)(R8*2), Y2 \
	VMOVDQU (48+32*p)(SI)(R9*1), Y3 \
	VMOVDQU (48+32*p)(R10), Y4 \
	VMOVDQU (48+32*p)(R10)(R8*1), Y5 \
	VMOVDQU (48+32*p)(R10)(R8*2), Y6 \
	VMOVDQU (48+32*p)(R10)(R9*1), Y7 \
	TRANSPOSE8 \
	K5NIB(p, Y0, 0, SH0, N0, SH1, N1) \
	K5NIB(p, Y2, 1, SH0, N0, SH1, N1) \
	K5NIB(p, Y12, 2, SH0, N0, SH1, N1) \
	K5NIB(p, Y14, 3, SH0, N0, SH1, N1) \
	K5NIB(p, Y1, 4, SH0, N0, SH1, N1) \
	K5NIB(p, Y3, 5, SH0, N0, SH1, N1) \
	K5NIB(p, Y13, 6, SH0, N0, SH1, N1) \
	K5NIB(p, Y15, 7, SH0, N0, SH1, N1)

// func repackQ5_Kx8Asm(dst *byte, w *byte, rs int, nb int)
//
// repackQ5_Kx8Asm is repackQ5_Kx8Go (batch_k_amd64.go) in assembly.
// Frame: the fifth bits of the 8 rows, transposed (8 groups of 32 bytes).
TEXT ·repackQ5_Kx8Asm(SB), NOSPLIT, $256-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y16
	VPBROADCASTD AX, X25
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Y18
	MOVL         $0x3f3f3f3f, AX
	VPBROADCASTD AX, X24
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, X26
	MOVQ         $0x0000000400000000, AX
	VMOVQ        AX, X27

rq5kloop:
	VMOVDQU 16(SI), Y0
	VMOVDQU 16(SI)(R8*1), Y1
	VMOVDQU 16(SI)(R8*2), Y2
	VMOVDQU 16(SI)(R9*1), Y3
	VMOVDQU 16(R10), Y4
	VMOVDQU 16(R10)(R8*1), Y5
	VMOVDQU 16(R10)(R8*2), Y6
	VMOVDQU 16(R10)(R9*1), Y7
	TRANSPOSE8
	VMOVDQU Y0, 0(SP)
	VMOVDQU Y2, 32(SP)
	VMOVDQU Y12, 64(SP)
	VMOVDQU Y14, 96(SP)
	VMOVDQU Y1, 128(SP)
	VMOVDQU Y3, 160(SP)
	VMOVDQU Y13, 192(SP)
	VMOVDQU Y15, 224(SP)
	K5PAIR8(0, VPSLLW, 4, VPSLLW, 3)
	K5PAIR8(1, VPSLLW, 2, VPSLLW, 1)
	K5PAIR8(2, VPSLLW, 0, VPSRLW, 1)
	K5PAIR8(3, VPSRLW, 2, VPSRLW, 3)
	K4ROWSC(4(SI), Y0, X17)
	K4ROWSC(4(SI)(R8*1), Y1, X18)
	K4ROWSC(4(SI)(R8*2), Y2, X19)
	K4ROWSC(4(SI)(R9*1), Y3, X20)
	K4ROWSC(4(R10), Y4, X21)
	K4ROWSC(4(R10)(R8*1), Y5, X22)
	K4ROWSC(4(R10)(R8*2), Y6, X23)
	K4ROWSC(4(R10)(R9*1), Y7, X28)
	TRANSPOSE8
	VMOVDQU Y0, 2048(DI)
	VMOVDQU Y2, 2080(DI)
	VMOVDQU Y12, 2112(DI)
	VMOVDQU Y14, 2144(DI)
	VMOVDQU Y1, 2176(DI)
	VMOVDQU Y3, 2208(DI)
	VMOVDQU Y13, 2240(DI)
	VMOVDQU Y15, 2272(DI)
	VMOVDQA64 Y17, Y0
	VMOVDQA64 Y18, Y1
	VMOVDQA64 Y19, Y2
	VMOVDQA64 Y20, Y3
	VMOVDQA64 Y21, Y4
	VMOVDQA64 Y22, Y5
	VMOVDQA64 Y23, Y6
	VMOVDQA64 Y28, Y7
	TRANSPOSE8
	VMOVDQU Y0, 2304(DI)
	VMOVDQU Y2, 2336(DI)
	VMOVDQU Y12, 2368(DI)
	VMOVDQU Y14, 2400(DI)
	GATHER16(0, X0, Y0)
	VMOVUPS Y0, 2432(DI)
	GATHER16(2, X1, Y1)
	VMOVUPS Y1, 2464(DI)
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Y18
	ADDQ $176, SI
	ADDQ $176, R10
	ADDQ $2496, DI
	DECQ CX
	JNZ  rq5kloop
	VZEROUPPER
	RET

// The IQ4_XS tile is a Q6_K tile (the Q6_K batch kernels take it): the
// levels plus 128 as unsigned bytes, each sub-block's scale (minus 32)
// for both its halves of 16, d; the offset of 128 is taken off by the
// corrections (-128 * each 16-sum).

DATA iq4U8<>+0(SB)/1, $1
DATA iq4U8<>+1(SB)/1, $24
DATA iq4U8<>+2(SB)/1, $45
DATA iq4U8<>+3(SB)/1, $63
DATA iq4U8<>+4(SB)/1, $79
DATA iq4U8<>+5(SB)/1, $93
DATA iq4U8<>+6(SB)/1, $106
DATA iq4U8<>+7(SB)/1, $118
DATA iq4U8<>+8(SB)/1, $129
DATA iq4U8<>+9(SB)/1, $141
DATA iq4U8<>+10(SB)/1, $153
DATA iq4U8<>+11(SB)/1, $166
DATA iq4U8<>+12(SB)/1, $181
DATA iq4U8<>+13(SB)/1, $197
DATA iq4U8<>+14(SB)/1, $217
DATA iq4U8<>+15(SB)/1, $241
DATA iq4U8<>+16(SB)/1, $1
DATA iq4U8<>+17(SB)/1, $24
DATA iq4U8<>+18(SB)/1, $45
DATA iq4U8<>+19(SB)/1, $63
DATA iq4U8<>+20(SB)/1, $79
DATA iq4U8<>+21(SB)/1, $93
DATA iq4U8<>+22(SB)/1, $106
DATA iq4U8<>+23(SB)/1, $118
DATA iq4U8<>+24(SB)/1, $129
DATA iq4U8<>+25(SB)/1, $141
DATA iq4U8<>+26(SB)/1, $153
DATA iq4U8<>+27(SB)/1, $166
DATA iq4U8<>+28(SB)/1, $181
DATA iq4U8<>+29(SB)/1, $197
DATA iq4U8<>+30(SB)/1, $217
DATA iq4U8<>+31(SB)/1, $241
GLOBL iq4U8<>(SB), RODATA|NOPTR, $32

DATA iq4ShL<>+0(SB)/4, $0
DATA iq4ShL<>+4(SB)/4, $4
DATA iq4ShL<>+8(SB)/4, $8
DATA iq4ShL<>+12(SB)/4, $12
DATA iq4ShL<>+16(SB)/4, $16
DATA iq4ShL<>+20(SB)/4, $20
DATA iq4ShL<>+24(SB)/4, $24
DATA iq4ShL<>+28(SB)/4, $28
GLOBL iq4ShL<>(SB), RODATA|NOPTR, $32

DATA iq4ShH<>+0(SB)/4, $0
DATA iq4ShH<>+4(SB)/4, $2
DATA iq4ShH<>+8(SB)/4, $4
DATA iq4ShH<>+12(SB)/4, $6
DATA iq4ShH<>+16(SB)/4, $8
DATA iq4ShH<>+20(SB)/4, $10
DATA iq4ShH<>+24(SB)/4, $12
DATA iq4ShH<>+28(SB)/4, $14
GLOBL iq4ShH<>(SB), RODATA|NOPTR, $32

// IQ4ROW(B, j, Y): the 32 indices of sub-block j of the row at B in
// element order (low nibbles, then high; not yet masked). Clobbers X8.
#define IQ4ROW(B, j, Y) \
	VMOVDQU     (8+16*j) B, X8    \
	VINSERTI128 $1, X8, Y8, Y      \
	VPSRLW      $4, Y, Y           \
	VINSERTI128 $0, X8, Y, Y

// IQ4LUT(G, off): the group vector G as levels plus 128 into the tile at
// DI+off (Y16 = 0x0f bytes, Y17 = the level table). Clobbers Y4.
#define IQ4LUT(G, off) \
	VPANDD  Y16, G, Y4     \
	VPSHUFB Y4, Y17, Y4    \
	VMOVDQU Y4, off(DI)

// IQ4CHUNK(j): sub-block j of the 8 rows into the tile.
#define IQ4CHUNK(j) \
	IQ4ROW((SI), j, Y0) \
	IQ4ROW((SI)(R8*1), j, Y1) \
	IQ4ROW((SI)(R8*2), j, Y2) \
	IQ4ROW((SI)(R9*1), j, Y3) \
	IQ4ROW((R10), j, Y4) \
	IQ4ROW((R10)(R8*1), j, Y5) \
	IQ4ROW((R10)(R8*2), j, Y6) \
	IQ4ROW((R10)(R9*1), j, Y7) \
	TRANSPOSE8 \
	IQ4LUT(Y0, (256*j+0)) \
	IQ4LUT(Y2, (256*j+32)) \
	IQ4LUT(Y12, (256*j+64)) \
	IQ4LUT(Y14, (256*j+96)) \
	IQ4LUT(Y1, (256*j+128)) \
	IQ4LUT(Y3, (256*j+160)) \
	IQ4LUT(Y13, (256*j+192)) \
	IQ4LUT(Y15, (256*j+224))

// IQ4SC(B, Y): the 8 scales of the row at B minus 32, as int32 (Y18, Y19
// the shifts of the low and high bits, Y20 = 15, Y21 = 3, Y22 = 32).
// Clobbers Y8.
#define IQ4SC(B, Y) \
	VPBROADCASTD 4 B, Y        \
	VPSRLVD      Y18, Y, Y     \
	VPANDD       Y20, Y, Y     \
	VPBROADCASTW 2 B, Y8       \
	VPSRLVD      Y19, Y8, Y8   \
	VPANDD       Y21, Y8, Y8   \
	VPSLLD       $4, Y8, Y8    \
	VPORD        Y8, Y, Y      \
	VPSUBD       Y22, Y, Y

// func repackIQ4_XSx8Asm(dst *byte, w *byte, rs int, nb int)
//
// repackIQ4_XSx8Asm is repackIQ4_XSx8Go (batch_k_amd64.go) in assembly.
TEXT ·repackIQ4_XSx8Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y16
	VMOVDQU64    iq4U8<>(SB), Y17
	VMOVDQU64    iq4ShL<>(SB), Y18
	VMOVDQU64    iq4ShH<>(SB), Y19
	MOVL         $15, AX
	VPBROADCASTD AX, Y20
	MOVL         $3, AX
	VPBROADCASTD AX, Y21
	MOVL         $32, AX
	VPBROADCASTD AX, Y22

riq4loop:
	IQ4CHUNK(0)
	IQ4CHUNK(1)
	IQ4CHUNK(2)
	IQ4CHUNK(3)
	IQ4CHUNK(4)
	IQ4CHUNK(5)
	IQ4CHUNK(6)
	IQ4CHUNK(7)
	IQ4SC((SI), Y0)
	IQ4SC((SI)(R8*1), Y1)
	IQ4SC((SI)(R8*2), Y2)
	IQ4SC((SI)(R9*1), Y3)
	IQ4SC((R10), Y4)
	IQ4SC((R10)(R8*1), Y5)
	IQ4SC((R10)(R8*2), Y6)
	IQ4SC((R10)(R9*1), Y7)
	TRANSPOSE8
	VMOVDQU Y0, 2048(DI)
	VMOVDQU Y0, 2080(DI)
	VMOVDQU Y2, 2112(DI)
	VMOVDQU Y2, 2144(DI)
	VMOVDQU Y12, 2176(DI)
	VMOVDQU Y12, 2208(DI)
	VMOVDQU Y14, 2240(DI)
	VMOVDQU Y14, 2272(DI)
	VMOVDQU Y1, 2304(DI)
	VMOVDQU Y1, 2336(DI)
	VMOVDQU Y3, 2368(DI)
	VMOVDQU Y3, 2400(DI)
	VMOVDQU Y13, 2432(DI)
	VMOVDQU Y13, 2464(DI)
	VMOVDQU Y15, 2496(DI)
	VMOVDQU Y15, 2528(DI)
	GATHER16(0, X0, Y0)
	VMOVUPS Y0, 2560(DI)
	ADDQ $136, SI
	ADDQ $136, R10
	ADDQ $2592, DI
	DECQ CX
	JNZ  riq4loop
	VZEROUPPER
	RET

// The Q3_K tile is a Q6_K tile too: the 3-bit quants (low bits | high bit
// << 2, the value plus 4) built by the Q6_K chunk macros with other masks
// (Y16 = 0x03, Y17 = 0x04 bytes), the 16 scales minus 32, d; the offset
// of 4 is taken off by the corrections.

DATA q3ShLo<>+0(SB)/4, $0
DATA q3ShLo<>+4(SB)/4, $8
DATA q3ShLo<>+8(SB)/4, $16
DATA q3ShLo<>+12(SB)/4, $24
DATA q3ShLo<>+16(SB)/4, $2
DATA q3ShLo<>+20(SB)/4, $10
DATA q3ShLo<>+24(SB)/4, $18
DATA q3ShLo<>+28(SB)/4, $26
GLOBL q3ShLo<>(SB), RODATA|NOPTR, $32

DATA q3ShHi<>+0(SB)/4, $4
DATA q3ShHi<>+4(SB)/4, $12
DATA q3ShHi<>+8(SB)/4, $20
DATA q3ShHi<>+12(SB)/4, $28
DATA q3ShHi<>+16(SB)/4, $6
DATA q3ShHi<>+20(SB)/4, $14
DATA q3ShHi<>+24(SB)/4, $22
DATA q3ShHi<>+28(SB)/4, $30
GLOBL q3ShHi<>(SB), RODATA|NOPTR, $32

// Q3SC(B, LOSH, lon, SH, Y): 8 of the 16 scales of the row at B minus
// 32, as int32: low 4 bits from the bytes at 96 (shifted right by lon),
// high 2 bits from the dword at 104 (variable shifts SH). Y20 = 15, Y21 =
// 3, Y22 = 32; clobbers Y8.
#define Q3SC(B, lon, SH, Y) \
	VPMOVZXBD    96 B, Y      \
	VPSRLD       $lon, Y, Y   \
	VPANDD       Y20, Y, Y    \
	VPBROADCASTD 104 B, Y8    \
	VPSRLVD      SH, Y8, Y8   \
	VPANDD       Y21, Y8, Y8  \
	VPSLLD       $4, Y8, Y8   \
	VPORD        Y8, Y, Y     \
	VPSUBD       Y22, Y, Y

// func repackQ3_Kx8Asm(dst *byte, w *byte, rs int, nb int)
//
// repackQ3_Kx8Asm is repackQ3_Kx8Go (batch_k_amd64.go) in assembly.
TEXT ·repackQ3_Kx8Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Y16
	MOVL         $0x04040404, AX
	VPBROADCASTD AX, Y17
	VMOVDQU64    q3ShLo<>(SB), Y18
	VMOVDQU64    q3ShHi<>(SB), Y19
	MOVL         $15, AX
	VPBROADCASTD AX, Y20
	MOVL         $3, AX
	VPBROADCASTD AX, Y21
	MOVL         $32, AX
	VPBROADCASTD AX, Y22

rq3kloop:
	Q6CHUNK(0, 32, 0, 0, VPSLLW, 2)
	Q6CHUNK(1, 32, 0, 2, VPSLLW, 1)
	Q6CHUNK(2, 32, 0, 4, VPSLLW, 0)
	Q6CHUNK(3, 32, 0, 6, VPSRLW, 1)
	Q6CHUNK(4, 64, 0, 0, VPSRLW, 2)
	Q6CHUNK(5, 64, 0, 2, VPSRLW, 3)
	Q6CHUNK(6, 64, 0, 4, VPSRLW, 4)
	Q6CHUNK(7, 64, 0, 6, VPSRLW, 5)
	Q3SC((SI), 0, Y18, Y0)
	Q3SC((SI)(R8*1), 0, Y18, Y1)
	Q3SC((SI)(R8*2), 0, Y18, Y2)
	Q3SC((SI)(R9*1), 0, Y18, Y3)
	Q3SC((R10), 0, Y18, Y4)
	Q3SC((R10)(R8*1), 0, Y18, Y5)
	Q3SC((R10)(R8*2), 0, Y18, Y6)
	Q3SC((R10)(R9*1), 0, Y18, Y7)
	TRANSPOSE8
	VMOVDQU Y0, 2048(DI)
	VMOVDQU Y2, 2080(DI)
	VMOVDQU Y12, 2112(DI)
	VMOVDQU Y14, 2144(DI)
	VMOVDQU Y1, 2176(DI)
	VMOVDQU Y3, 2208(DI)
	VMOVDQU Y13, 2240(DI)
	VMOVDQU Y15, 2272(DI)
	Q3SC((SI), 4, Y19, Y0)
	Q3SC((SI)(R8*1), 4, Y19, Y1)
	Q3SC((SI)(R8*2), 4, Y19, Y2)
	Q3SC((SI)(R9*1), 4, Y19, Y3)
	Q3SC((R10), 4, Y19, Y4)
	Q3SC((R10)(R8*1), 4, Y19, Y5)
	Q3SC((R10)(R8*2), 4, Y19, Y6)
	Q3SC((R10)(R9*1), 4, Y19, Y7)
	TRANSPOSE8
	VMOVDQU Y0, 2304(DI)
	VMOVDQU Y2, 2336(DI)
	VMOVDQU Y12, 2368(DI)
	VMOVDQU Y14, 2400(DI)
	VMOVDQU Y1, 2432(DI)
	VMOVDQU Y3, 2464(DI)
	VMOVDQU Y13, 2496(DI)
	VMOVDQU Y15, 2528(DI)
	GATHER16(108, X0, Y0)
	VMOVUPS Y0, 2560(DI)
	ADDQ $110, SI
	ADDQ $110, R10
	ADDQ $2592, DI
	DECQ CX
	JNZ  rq3kloop
	VZEROUPPER
	RET

// The Q2_K tile (batchQ2Kx8x4): per super-block of the 8 rows, the 2-bit
// quants as a Q6_K tile's (by the Q6_K chunk macros, Y16 = 0x03 and no
// high bits: Y17 = 0), at 2048+32i the rows' scales of sub-block i as
// int32, at 2560+32k their mins 2k and 2k+1 as an int16 pair, at 2816
// and 2848 their d and dmin.

// Q2SC(B, off, Y): scales off..off+7 of the row at B as int32 (Y20 = 15).
#define Q2SC(B, off, Y) \
	VPMOVZXBD off B, Y  \
	VPANDD    Y20, Y, Y

// Q2MIN(B, Y): the 16 mins of the row at B as int16 (pairs in dwords).
#define Q2MIN(B, Y) \
	VPMOVZXBW 0 B, Y   \
	VPSRLW    $4, Y, Y

// func repackQ2_Kx8Asm(dst *byte, w *byte, rs int, nb int)
//
// repackQ2_Kx8Asm is repackQ2_Kx8Go (batch_k_amd64.go) in assembly.
TEXT ·repackQ2_Kx8Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Y16
	VPXORD       Y17, Y17, Y17
	MOVL         $15, AX
	VPBROADCASTD AX, Y20

rq2kloop:
	Q6CHUNK(0, 16, 16, 0, VPSLLW, 0)
	Q6CHUNK(1, 16, 16, 2, VPSLLW, 0)
	Q6CHUNK(2, 16, 16, 4, VPSLLW, 0)
	Q6CHUNK(3, 16, 16, 6, VPSLLW, 0)
	Q6CHUNK(4, 48, 48, 0, VPSLLW, 0)
	Q6CHUNK(5, 48, 48, 2, VPSLLW, 0)
	Q6CHUNK(6, 48, 48, 4, VPSLLW, 0)
	Q6CHUNK(7, 48, 48, 6, VPSLLW, 0)
	Q2SC((SI), 0, Y0)
	Q2SC((SI)(R8*1), 0, Y1)
	Q2SC((SI)(R8*2), 0, Y2)
	Q2SC((SI)(R9*1), 0, Y3)
	Q2SC((R10), 0, Y4)
	Q2SC((R10)(R8*1), 0, Y5)
	Q2SC((R10)(R8*2), 0, Y6)
	Q2SC((R10)(R9*1), 0, Y7)
	TRANSPOSE8
	VMOVDQU Y0, 2048(DI)
	VMOVDQU Y2, 2080(DI)
	VMOVDQU Y12, 2112(DI)
	VMOVDQU Y14, 2144(DI)
	VMOVDQU Y1, 2176(DI)
	VMOVDQU Y3, 2208(DI)
	VMOVDQU Y13, 2240(DI)
	VMOVDQU Y15, 2272(DI)
	Q2SC((SI), 8, Y0)
	Q2SC((SI)(R8*1), 8, Y1)
	Q2SC((SI)(R8*2), 8, Y2)
	Q2SC((SI)(R9*1), 8, Y3)
	Q2SC((R10), 8, Y4)
	Q2SC((R10)(R8*1), 8, Y5)
	Q2SC((R10)(R8*2), 8, Y6)
	Q2SC((R10)(R9*1), 8, Y7)
	TRANSPOSE8
	VMOVDQU Y0, 2304(DI)
	VMOVDQU Y2, 2336(DI)
	VMOVDQU Y12, 2368(DI)
	VMOVDQU Y14, 2400(DI)
	VMOVDQU Y1, 2432(DI)
	VMOVDQU Y3, 2464(DI)
	VMOVDQU Y13, 2496(DI)
	VMOVDQU Y15, 2528(DI)
	Q2MIN((SI), Y0)
	Q2MIN((SI)(R8*1), Y1)
	Q2MIN((SI)(R8*2), Y2)
	Q2MIN((SI)(R9*1), Y3)
	Q2MIN((R10), Y4)
	Q2MIN((R10)(R8*1), Y5)
	Q2MIN((R10)(R8*2), Y6)
	Q2MIN((R10)(R9*1), Y7)
	TRANSPOSE8
	VMOVDQU Y0, 2560(DI)
	VMOVDQU Y2, 2592(DI)
	VMOVDQU Y12, 2624(DI)
	VMOVDQU Y14, 2656(DI)
	VMOVDQU Y1, 2688(DI)
	VMOVDQU Y3, 2720(DI)
	VMOVDQU Y13, 2752(DI)
	VMOVDQU Y15, 2784(DI)
	GATHER16(80, X0, Y0)
	VMOVUPS Y0, 2816(DI)
	GATHER16(82, X1, Y1)
	VMOVUPS Y1, 2848(DI)
	ADDQ $84, SI
	ADDQ $84, R10
	ADDQ $2880, DI
	DECQ CX
	JNZ  rq2kloop
	VZEROUPPER
	RET

// The 16-row form of batchU8x8x8 (64-byte registers; see batchQ4Kx16x4 in
// batch_k_amd64.s): two tiles of 8 rows, the second t bytes after the
// first, joined per group by one VINSERTI64X4; four vectors a call.

// UZLD(off, Y, Z): the 32 bytes at tile+off and tile+t+off (t in R10).
#define UZLD(off, Y, Z) \
	VMOVDQU      off(SI), Y              \
	VINSERTI64X4 $1, off(SI)(R10*1), Z, Z

#define GUZ4(g) \
	UZLD((32*g), Y8, Z8)                     \
	VPDPBUSD.BCST (4*g)(DI), Z8, Z0          \
	VPDPBUSD.BCST (4*g)(DI)(R8*1), Z8, Z1    \
	VPDPBUSD.BCST (4*g)(DI)(R8*2), Z8, Z2    \
	VPDPBUSD.BCST (4*g)(DI)(R9*1), Z8, Z3

#define FUZ(t, I, F) \
	VCVTDQ2PS   I, I              \
	VMULPS.BCST (4*t)(DX), Z9, Z10 \
	VFMADD231PS Z10, I, F

// func batchU8x16x4(tile *byte, t int, x *int8, xs int, d *float32, c *int32, nb int, acc *float32)
//
// batchU8x16x4 adds to acc[v][r] (four vectors v, 16 rows r) as
// batchU8x8x8 does: d[8b+v], c[8b+v] (four of a group of eight).
TEXT ·batchU8x16x4(SB), NOSPLIT, $0-64
	MOVQ tile+0(FP), SI
	MOVQ t+8(FP), R10
	MOVQ x+16(FP), DI
	MOVQ xs+24(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ d+32(FP), DX
	MOVQ c+40(FP), BX
	MOVQ nb+48(FP), CX
	MOVQ acc+56(FP), AX
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19

buz4loop:
	VPBROADCASTD 0(BX), Z0
	VPBROADCASTD 4(BX), Z1
	VPBROADCASTD 8(BX), Z2
	VPBROADCASTD 12(BX), Z3
	GUZ4(0)
	GUZ4(1)
	GUZ4(2)
	GUZ4(3)
	GUZ4(4)
	GUZ4(5)
	GUZ4(6)
	GUZ4(7)
	UZLD(256, Y9, Z9)
	FUZ(0, Z0, Z16)
	FUZ(1, Z1, Z17)
	FUZ(2, Z2, Z18)
	FUZ(3, Z3, Z19)
	ADDQ $288, SI
	ADDQ $32, DI
	ADDQ $32, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  buz4loop
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	VZEROUPPER
	RET

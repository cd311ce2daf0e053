//go:build !purego

#include "textflag.h"

// The AVX-512 Q4_K batch kernels (dotQ4_KSeq's arithmetic, eight rows in
// the lanes of a register). A tile holds, per super-block of the 8 rows
// (q4KTileSB bytes): at 256j+32g the nibbles of group g (elements
// 4g..4g+3) of sub-block j, row r in bytes 4r..4r+3; at 2048+32j the
// rows' scales of sub-block j as int32; at 2304+32k their mins 2k and
// 2k+1 as an int16 pair; at 2432 and 2464 their d and dmin as float32.
// Per sub-block, eight VPDPBUSD (the vector's four quants broadcast from
// memory) give the rows' exact dots, scaled by one VPMULLD; the mins
// terms are four VPDPWSSD against the vector's sub-block sums (b2: 8 int16
// per super-block). acc holds per vector the 8 rows' accumulator, then
// the 8 rows' mins accumulator.
//
// Registers: Y0-Y3 the super-block sums of vectors 0-3, Y4-Y7 one
// sub-block's (then the mins'), Y8 a tile group, Y16-Y19 and Y20-Y23 the
// accumulators; vector t's quants at x + t*xs (DI, R8, R9 = 3xs), scales
// at d + t*ds (DX, R10, R11), sub-block sums at b2 + t*bs (BX, R12, R13).

#define KG4(j, g) \
	VMOVDQU       (256*j+32*g)(SI), Y8             \
	VPDPBUSD.BCST (32*j+4*g)(DI), Y8, Y4           \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R8*1), Y8, Y5     \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R8*2), Y8, Y6     \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R9*1), Y8, Y7

#define KSUB4(j) \
	VPXOR   Y4, Y4, Y4        \
	VPXOR   Y5, Y5, Y5        \
	VPXOR   Y6, Y6, Y6        \
	VPXOR   Y7, Y7, Y7        \
	KG4(j, 0)                 \
	KG4(j, 1)                 \
	KG4(j, 2)                 \
	KG4(j, 3)                 \
	KG4(j, 4)                 \
	KG4(j, 5)                 \
	KG4(j, 6)                 \
	KG4(j, 7)                 \
	VMOVDQU (2048+32*j)(SI), Y9 \
	VPMULLD Y9, Y4, Y4        \
	VPMULLD Y9, Y5, Y5        \
	VPMULLD Y9, Y6, Y6        \
	VPMULLD Y9, Y7, Y7        \
	VPADDD  Y4, Y0, Y0        \
	VPADDD  Y5, Y1, Y1        \
	VPADDD  Y6, Y2, Y2        \
	VPADDD  Y7, Y3, Y3

// KMINS1(M, B0..B3): M = the 8 rows' mins terms against the vector's
// sub-block sums (pairs at B0..B3; Y10-Y13 hold the tile's min pairs).
#define KMINS1(M, B0, B1, B2, B3) \
	VPXOR         M, M, M     \
	VPDPWSSD.BCST B0, Y10, M  \
	VPDPWSSD.BCST B1, Y11, M  \
	VPDPWSSD.BCST B2, Y12, M  \
	VPDPWSSD.BCST B3, Y13, M

// KFOLD1(D, S, M, A, AM): A = fma(float(S), d rows * D, A), AM likewise
// for the mins sums M with dmin (Y14 = the rows' d, Y15 their dmin).
#define KFOLD1(D, S, M, A, AM) \
	VCVTDQ2PS   S, S          \
	VMULPS.BCST D, Y14, Y9    \
	VFMADD231PS Y9, S, A      \
	VCVTDQ2PS   M, M          \
	VMULPS.BCST D, Y15, Y9    \
	VFMADD231PS Y9, M, AM

// func batchQ4Kx8x4(tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32)
TEXT ·batchQ4Kx8x4(SB), NOSPLIT, $0-72
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xs+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ d+24(FP), DX
	MOVQ ds+32(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ b2+40(FP), BX
	MOVQ bs+48(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ nb+56(FP), CX
	MOVQ acc+64(FP), AX
	VMOVUPS 0(AX), Y16
	VMOVUPS 32(AX), Y20
	VMOVUPS 64(AX), Y17
	VMOVUPS 96(AX), Y21
	VMOVUPS 128(AX), Y18
	VMOVUPS 160(AX), Y22
	VMOVUPS 192(AX), Y19
	VMOVUPS 224(AX), Y23

bq4kx4loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	KSUB4(0)
	KSUB4(1)
	KSUB4(2)
	KSUB4(3)
	KSUB4(4)
	KSUB4(5)
	KSUB4(6)
	KSUB4(7)
	VMOVDQU 2304(SI), Y10
	VMOVDQU 2336(SI), Y11
	VMOVDQU 2368(SI), Y12
	VMOVDQU 2400(SI), Y13
	VMOVUPS 2432(SI), Y14
	VMOVUPS 2464(SI), Y15
	KMINS1(Y4, 0(BX), 4(BX), 8(BX), 12(BX))
	KMINS1(Y5, 0(BX)(R12*1), 4(BX)(R12*1), 8(BX)(R12*1), 12(BX)(R12*1))
	KMINS1(Y6, 0(BX)(R12*2), 4(BX)(R12*2), 8(BX)(R12*2), 12(BX)(R12*2))
	KMINS1(Y7, 0(BX)(R13*1), 4(BX)(R13*1), 8(BX)(R13*1), 12(BX)(R13*1))
	KFOLD1((DX), Y0, Y4, Y16, Y20)
	KFOLD1((DX)(R10*1), Y1, Y5, Y17, Y21)
	KFOLD1((DX)(R10*2), Y2, Y6, Y18, Y22)
	KFOLD1((DX)(R11*1), Y3, Y7, Y19, Y23)
	ADDQ $2496, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kx4loop
	VMOVUPS Y16, 0(AX)
	VMOVUPS Y20, 32(AX)
	VMOVUPS Y17, 64(AX)
	VMOVUPS Y21, 96(AX)
	VMOVUPS Y18, 128(AX)
	VMOVUPS Y22, 160(AX)
	VMOVUPS Y19, 192(AX)
	VMOVUPS Y23, 224(AX)
	VZEROUPPER
	RET

// KG1(j, g) / KSUB1(j): KG4 / KSUB4 for one vector.
#define KG1(j, g) \
	VMOVDQU       (256*j+32*g)(SI), Y8 \
	VPDPBUSD.BCST (32*j+4*g)(DI), Y8, Y4

#define KSUB1(j) \
	VPXOR   Y4, Y4, Y4          \
	KG1(j, 0)                   \
	KG1(j, 1)                   \
	KG1(j, 2)                   \
	KG1(j, 3)                   \
	KG1(j, 4)                   \
	KG1(j, 5)                   \
	KG1(j, 6)                   \
	KG1(j, 7)                   \
	VPMULLD (2048+32*j)(SI), Y4, Y4 \
	VPADDD  Y4, Y0, Y0

// func batchQ4Kx8x1(tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32)
TEXT ·batchQ4Kx8x1(SB), NOSPLIT, $0-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ b2+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX
	VMOVUPS 0(AX), Y16
	VMOVUPS 32(AX), Y20

bq4kx1loop:
	VPXOR Y0, Y0, Y0
	KSUB1(0)
	KSUB1(1)
	KSUB1(2)
	KSUB1(3)
	KSUB1(4)
	KSUB1(5)
	KSUB1(6)
	KSUB1(7)
	VMOVDQU 2304(SI), Y10
	VMOVDQU 2336(SI), Y11
	VMOVDQU 2368(SI), Y12
	VMOVDQU 2400(SI), Y13
	VMOVUPS 2432(SI), Y14
	VMOVUPS 2464(SI), Y15
	KMINS1(Y4, 0(BX), 4(BX), 8(BX), 12(BX))
	KFOLD1((DX), Y0, Y4, Y16, Y20)
	ADDQ $2496, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kx1loop
	VMOVUPS Y16, 0(AX)
	VMOVUPS Y20, 32(AX)
	VZEROUPPER
	RET

// The Q6_K batch kernels (dotQ6_KSeq's arithmetic; the tile is described
// above repackQ6_Kx8Asm in batch_amd64.s): per sub-block of 16, the sums
// start at the vector's offset correction (c: -32 * its 16-sum, int32),
// take four VPDPBUSD and one VPMULLD by the rows' scales. acc as for
// batchQ4Kx8x4 (the mins half unused).

#define KG6(i, g) \
	VMOVDQU       (128*i+32*g)(SI), Y8           \
	VPDPBUSD.BCST (16*i+4*g)(DI), Y8, Y4         \
	VPDPBUSD.BCST (16*i+4*g)(DI)(R8*1), Y8, Y5   \
	VPDPBUSD.BCST (16*i+4*g)(DI)(R8*2), Y8, Y6   \
	VPDPBUSD.BCST (16*i+4*g)(DI)(R9*1), Y8, Y7

#define KSUB6(i) \
	VPBROADCASTD (4*i)(BX), Y4        \
	VPBROADCASTD (4*i)(BX)(R12*1), Y5 \
	VPBROADCASTD (4*i)(BX)(R12*2), Y6 \
	VPBROADCASTD (4*i)(BX)(R13*1), Y7 \
	KG6(i, 0)                         \
	KG6(i, 1)                         \
	KG6(i, 2)                         \
	KG6(i, 3)                         \
	VMOVDQU (2048+32*i)(SI), Y9       \
	VPMULLD Y9, Y4, Y4                \
	VPMULLD Y9, Y5, Y5                \
	VPMULLD Y9, Y6, Y6                \
	VPMULLD Y9, Y7, Y7                \
	VPADDD  Y4, Y0, Y0                \
	VPADDD  Y5, Y1, Y1                \
	VPADDD  Y6, Y2, Y2                \
	VPADDD  Y7, Y3, Y3

// KFOLD6(D, S, A): A = fma(float(S), d rows (Y14) * D, A).
#define KFOLD6(D, S, A) \
	VCVTDQ2PS   S, S       \
	VMULPS.BCST D, Y14, Y9 \
	VFMADD231PS Y9, S, A

// KPF2 hints two lines of the next row group into the cache, from R14 up to
// R15 (where it stays: past the end it hints the same lines again). Sixteen
// steps a super-block take 32 lines, the next 8 rows' 1680 bytes of Q6_K in 27.
#define KPF2 \
	PREFETCHT0 (R14)      \
	PREFETCHT0 64(R14)    \
	ADDQ       $128, R14  \
	CMPQ       R14, R15   \
	CMOVQHI    R15, R14

// func batchQ6Kx8x4(tile *byte, x *int8, xs int, d *float32, ds int, c *int32, cs int, nb int, acc *float32, pf, pfEnd *byte)
TEXT ·batchQ6Kx8x4(SB), NOSPLIT, $0-88
	MOVQ pf+72(FP), R14
	MOVQ pfEnd+80(FP), R15
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xs+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ d+24(FP), DX
	MOVQ ds+32(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ c+40(FP), BX
	MOVQ cs+48(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ nb+56(FP), CX
	MOVQ acc+64(FP), AX
	VMOVUPS 0(AX), Y16
	VMOVUPS 64(AX), Y17
	VMOVUPS 128(AX), Y18
	VMOVUPS 192(AX), Y19

bq6kx4loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	KSUB6(0)
	KPF2
	KSUB6(1)
	KPF2
	KSUB6(2)
	KPF2
	KSUB6(3)
	KPF2
	KSUB6(4)
	KPF2
	KSUB6(5)
	KPF2
	KSUB6(6)
	KPF2
	KSUB6(7)
	KPF2
	KSUB6(8)
	KPF2
	KSUB6(9)
	KPF2
	KSUB6(10)
	KPF2
	KSUB6(11)
	KPF2
	KSUB6(12)
	KPF2
	KSUB6(13)
	KPF2
	KSUB6(14)
	KPF2
	KSUB6(15)
	KPF2
	VMOVUPS 2560(SI), Y14
	KFOLD6((DX), Y0, Y16)
	KFOLD6((DX)(R10*1), Y1, Y17)
	KFOLD6((DX)(R10*2), Y2, Y18)
	KFOLD6((DX)(R11*1), Y3, Y19)
	ADDQ $2592, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $64, BX
	DECQ CX
	JNZ  bq6kx4loop
	VMOVUPS Y16, 0(AX)
	VMOVUPS Y17, 64(AX)
	VMOVUPS Y18, 128(AX)
	VMOVUPS Y19, 192(AX)
	VZEROUPPER
	RET

#define KSUB6x1(i) \
	VPBROADCASTD  (4*i)(BX), Y4                 \
	VMOVDQU       (128*i)(SI), Y8               \
	VPDPBUSD.BCST (16*i)(DI), Y8, Y4            \
	VMOVDQU       (128*i+32)(SI), Y8            \
	VPDPBUSD.BCST (16*i+4)(DI), Y8, Y4          \
	VMOVDQU       (128*i+64)(SI), Y8            \
	VPDPBUSD.BCST (16*i+8)(DI), Y8, Y4          \
	VMOVDQU       (128*i+96)(SI), Y8            \
	VPDPBUSD.BCST (16*i+12)(DI), Y8, Y4         \
	VPMULLD       (2048+32*i)(SI), Y4, Y4       \
	VPADDD        Y4, Y0, Y0

// func batchQ6Kx8x1(tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32)
TEXT ·batchQ6Kx8x1(SB), NOSPLIT, $0-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ c+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX
	VMOVUPS 0(AX), Y16

bq6kx1loop:
	VPXOR Y0, Y0, Y0
	KSUB6x1(0)
	KSUB6x1(1)
	KSUB6x1(2)
	KSUB6x1(3)
	KSUB6x1(4)
	KSUB6x1(5)
	KSUB6x1(6)
	KSUB6x1(7)
	KSUB6x1(8)
	KSUB6x1(9)
	KSUB6x1(10)
	KSUB6x1(11)
	KSUB6x1(12)
	KSUB6x1(13)
	KSUB6x1(14)
	KSUB6x1(15)
	VMOVUPS 2560(SI), Y14
	KFOLD6((DX), Y0, Y16)
	ADDQ $2592, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $64, BX
	DECQ CX
	JNZ  bq6kx1loop
	VMOVUPS Y16, 0(AX)
	VZEROUPPER
	RET

// The Q2_K batch kernels (dotQ2_KSeq's arithmetic; the tile is described
// above repackQ2_Kx8Asm in batch_amd64.s): the Q6_K kernels' sub-block
// sums (starting at zero) plus the mins terms of the 16 sub-blocks, eight
// VPDPWSSD against the vector's 16-sums (pairs), into the second
// accumulator as batchQ4Kx8x4's. b + t*bs: vector t's 16-sums (int16).

// KMIN2(k): the mins pair k against the four vectors' 16-sums pair k.
#define KMIN2(k) \
	VMOVDQU       (2560+32*k)(SI), Y10            \
	VPDPWSSD.BCST (4*k)(BX), Y10, Y4              \
	VPDPWSSD.BCST (4*k)(BX)(R12*1), Y10, Y5       \
	VPDPWSSD.BCST (4*k)(BX)(R12*2), Y10, Y6       \
	VPDPWSSD.BCST (4*k)(BX)(R13*1), Y10, Y7

#define KZ6(i) \
	VPXOR Y4, Y4, Y4 \
	VPXOR Y5, Y5, Y5 \
	VPXOR Y6, Y6, Y6 \
	VPXOR Y7, Y7, Y7 \
	KG6(i, 0)        \
	KG6(i, 1)        \
	KG6(i, 2)        \
	KG6(i, 3)        \
	VMOVDQU (2048+32*i)(SI), Y9 \
	VPMULLD Y9, Y4, Y4          \
	VPMULLD Y9, Y5, Y5          \
	VPMULLD Y9, Y6, Y6          \
	VPMULLD Y9, Y7, Y7          \
	VPADDD  Y4, Y0, Y0          \
	VPADDD  Y5, Y1, Y1          \
	VPADDD  Y6, Y2, Y2          \
	VPADDD  Y7, Y3, Y3

// func batchQ2Kx8x4(tile *byte, x *int8, xs int, d *float32, ds int, b *int16, bs int, nb int, acc *float32)
TEXT ·batchQ2Kx8x4(SB), NOSPLIT, $0-72
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xs+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ d+24(FP), DX
	MOVQ ds+32(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ b+40(FP), BX
	MOVQ bs+48(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ nb+56(FP), CX
	MOVQ acc+64(FP), AX
	VMOVUPS 0(AX), Y16
	VMOVUPS 32(AX), Y20
	VMOVUPS 64(AX), Y17
	VMOVUPS 96(AX), Y21
	VMOVUPS 128(AX), Y18
	VMOVUPS 160(AX), Y22
	VMOVUPS 192(AX), Y19
	VMOVUPS 224(AX), Y23

bq2kx4loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	KZ6(0)
	KZ6(1)
	KZ6(2)
	KZ6(3)
	KZ6(4)
	KZ6(5)
	KZ6(6)
	KZ6(7)
	KZ6(8)
	KZ6(9)
	KZ6(10)
	KZ6(11)
	KZ6(12)
	KZ6(13)
	KZ6(14)
	KZ6(15)
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	KMIN2(0)
	KMIN2(1)
	KMIN2(2)
	KMIN2(3)
	KMIN2(4)
	KMIN2(5)
	KMIN2(6)
	KMIN2(7)
	VMOVUPS 2816(SI), Y14
	VMOVUPS 2848(SI), Y15
	KFOLD1((DX), Y0, Y4, Y16, Y20)
	KFOLD1((DX)(R10*1), Y1, Y5, Y17, Y21)
	KFOLD1((DX)(R10*2), Y2, Y6, Y18, Y22)
	KFOLD1((DX)(R11*1), Y3, Y7, Y19, Y23)
	ADDQ $2880, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  bq2kx4loop
	VMOVUPS Y16, 0(AX)
	VMOVUPS Y20, 32(AX)
	VMOVUPS Y17, 64(AX)
	VMOVUPS Y21, 96(AX)
	VMOVUPS Y18, 128(AX)
	VMOVUPS Y22, 160(AX)
	VMOVUPS Y19, 192(AX)
	VMOVUPS Y23, 224(AX)
	VZEROUPPER
	RET

#define KZ6x1(i) \
	VPXOR         Y4, Y4, Y4                    \
	VMOVDQU       (128*i)(SI), Y8               \
	VPDPBUSD.BCST (16*i)(DI), Y8, Y4            \
	VMOVDQU       (128*i+32)(SI), Y8            \
	VPDPBUSD.BCST (16*i+4)(DI), Y8, Y4          \
	VMOVDQU       (128*i+64)(SI), Y8            \
	VPDPBUSD.BCST (16*i+8)(DI), Y8, Y4          \
	VMOVDQU       (128*i+96)(SI), Y8            \
	VPDPBUSD.BCST (16*i+12)(DI), Y8, Y4         \
	VPMULLD       (2048+32*i)(SI), Y4, Y4       \
	VPADDD        Y4, Y0, Y0

// func batchQ2Kx8x1(tile *byte, x *int8, d *float32, b *int16, nb int, acc *float32)
TEXT ·batchQ2Kx8x1(SB), NOSPLIT, $0-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ b+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX
	VMOVUPS 0(AX), Y16
	VMOVUPS 32(AX), Y20

bq2kx1loop:
	VPXOR Y0, Y0, Y0
	KZ6x1(0)
	KZ6x1(1)
	KZ6x1(2)
	KZ6x1(3)
	KZ6x1(4)
	KZ6x1(5)
	KZ6x1(6)
	KZ6x1(7)
	KZ6x1(8)
	KZ6x1(9)
	KZ6x1(10)
	KZ6x1(11)
	KZ6x1(12)
	KZ6x1(13)
	KZ6x1(14)
	KZ6x1(15)
	VPXOR Y4, Y4, Y4
	VMOVDQU 2560(SI), Y10
	VPDPWSSD.BCST 0(BX), Y10, Y4
	VMOVDQU 2592(SI), Y10
	VPDPWSSD.BCST 4(BX), Y10, Y4
	VMOVDQU 2624(SI), Y10
	VPDPWSSD.BCST 8(BX), Y10, Y4
	VMOVDQU 2656(SI), Y10
	VPDPWSSD.BCST 12(BX), Y10, Y4
	VMOVDQU 2688(SI), Y10
	VPDPWSSD.BCST 16(BX), Y10, Y4
	VMOVDQU 2720(SI), Y10
	VPDPWSSD.BCST 20(BX), Y10, Y4
	VMOVDQU 2752(SI), Y10
	VPDPWSSD.BCST 24(BX), Y10, Y4
	VMOVDQU 2784(SI), Y10
	VPDPWSSD.BCST 28(BX), Y10, Y4
	VMOVUPS 2816(SI), Y14
	VMOVUPS 2848(SI), Y15
	KFOLD1((DX), Y0, Y4, Y16, Y20)
	ADDQ $2880, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  bq2kx1loop
	VMOVUPS Y16, 0(AX)
	VMOVUPS Y20, 32(AX)
	VZEROUPPER
	RET

// The 16-row Q4_K (and Q5_K) batch kernel: two 8-row tiles side by side
// (rows 0-7 at tile, rows 8-15 at tile+T) in the two halves of 64-byte
// registers. VPDPBUSD on 64 bytes has the throughput of the 32-byte one
// on the cores measured (Sapphire Rapids: about 0.2 ns each, measured in
// a loop of independent ones), so sixteen rows cost little more than
// eight; each group's two halves are joined by one VINSERTI64X4 shared by
// the four vectors. acc holds per vector 16 row accumulators, then 16
// mins accumulators.

// ZLD(off, Y, Z): Z = the 32 bytes at tile+off (rows 0-7) and at
// tile+T+off (rows 8-15; T in AX during the loop).
#define ZLD(off, Y, Z) \
	VMOVDQU      off(SI), Y            \
	VINSERTI64X4 $1, off(SI)(AX*1), Z, Z

#define KZG4(j, g) \
	ZLD((256*j+32*g), Y8, Z8)                      \
	VPDPBUSD.BCST (32*j+4*g)(DI), Z8, Z4           \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R8*1), Z8, Z5     \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R8*2), Z8, Z6     \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R9*1), Z8, Z7

#define KZSUB4(j) \
	VPXORD  Z4, Z4, Z4        \
	VPXORD  Z5, Z5, Z5        \
	VPXORD  Z6, Z6, Z6        \
	VPXORD  Z7, Z7, Z7        \
	KZG4(j, 0)                \
	KZG4(j, 1)                \
	KZG4(j, 2)                \
	KZG4(j, 3)                \
	KZG4(j, 4)                \
	KZG4(j, 5)                \
	KZG4(j, 6)                \
	KZG4(j, 7)                \
	ZLD((2048+32*j), Y9, Z9)  \
	VPMULLD Z9, Z4, Z4        \
	VPMULLD Z9, Z5, Z5        \
	VPMULLD Z9, Z6, Z6        \
	VPMULLD Z9, Z7, Z7        \
	VPADDD  Z4, Z0, Z0        \
	VPADDD  Z5, Z1, Z1        \
	VPADDD  Z6, Z2, Z2        \
	VPADDD  Z7, Z3, Z3

#define KZMINS1(M, B0, B1, B2, B3) \
	VPXORD        M, M, M     \
	VPDPWSSD.BCST B0, Z10, M  \
	VPDPWSSD.BCST B1, Z11, M  \
	VPDPWSSD.BCST B2, Z12, M  \
	VPDPWSSD.BCST B3, Z13, M

#define KZFOLD1(D, S, M, A, AM) \
	VCVTDQ2PS   S, S          \
	VMULPS.BCST D, Z14, Z9    \
	VFMADD231PS Z9, S, A      \
	VCVTDQ2PS   M, M          \
	VMULPS.BCST D, Z15, Z9    \
	VFMADD231PS Z9, M, AM

// func batchQ4Kx16x4(tile *byte, t int, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32)
TEXT ·batchQ4Kx16x4(SB), NOSPLIT, $0-80
	MOVQ tile+0(FP), SI
	MOVQ x+16(FP), DI
	MOVQ xs+24(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ d+32(FP), DX
	MOVQ ds+40(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ b2+48(FP), BX
	MOVQ bs+56(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ nb+64(FP), CX
	MOVQ acc+72(FP), AX
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z20
	VMOVUPS 128(AX), Z17
	VMOVUPS 192(AX), Z21
	VMOVUPS 256(AX), Z18
	VMOVUPS 320(AX), Z22
	VMOVUPS 384(AX), Z19
	VMOVUPS 448(AX), Z23
	MOVQ t+8(FP), AX

bq4kz4loop:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	KZSUB4(0)
	KZSUB4(1)
	KZSUB4(2)
	KZSUB4(3)
	KZSUB4(4)
	KZSUB4(5)
	KZSUB4(6)
	KZSUB4(7)
	ZLD(2304, Y10, Z10)
	ZLD(2336, Y11, Z11)
	ZLD(2368, Y12, Z12)
	ZLD(2400, Y13, Z13)
	ZLD(2432, Y14, Z14)
	ZLD(2464, Y15, Z15)
	KZMINS1(Z4, 0(BX), 4(BX), 8(BX), 12(BX))
	KZMINS1(Z5, 0(BX)(R12*1), 4(BX)(R12*1), 8(BX)(R12*1), 12(BX)(R12*1))
	KZMINS1(Z6, 0(BX)(R12*2), 4(BX)(R12*2), 8(BX)(R12*2), 12(BX)(R12*2))
	KZMINS1(Z7, 0(BX)(R13*1), 4(BX)(R13*1), 8(BX)(R13*1), 12(BX)(R13*1))
	KZFOLD1((DX), Z0, Z4, Z16, Z20)
	KZFOLD1((DX)(R10*1), Z1, Z5, Z17, Z21)
	KZFOLD1((DX)(R10*2), Z2, Z6, Z18, Z22)
	KZFOLD1((DX)(R11*1), Z3, Z7, Z19, Z23)
	ADDQ $2496, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kz4loop
	MOVQ acc+72(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z20, 64(AX)
	VMOVUPS Z17, 128(AX)
	VMOVUPS Z21, 192(AX)
	VMOVUPS Z18, 256(AX)
	VMOVUPS Z22, 320(AX)
	VMOVUPS Z19, 384(AX)
	VMOVUPS Z23, 448(AX)
	VZEROUPPER
	RET

// The interleaved 16-row Q4_K kernels: batchQ4Kx16x4's arithmetic on a
// tile written by repackQ4_Kx16iAsm, where each 32-byte piece of rows 0-7
// is followed by that of rows 8-15, so one 64-byte load reads the 16
// rows' group (no VINSERTI64X4: about a tenth faster, measured on
// Sapphire Rapids). Offsets are twice the 8-row tile's: quants at
// 512j+64g, scales at 4096+64j, min pairs at 4608+64k, d at 4864, dmin at
// 4928; 4992 bytes per super-block. On the last super-blocks of a row
// (out not nil) they write the 16 results, accumulator minus mins
// accumulator, to out (vector t at out + t*os bytes) instead of acc.

#define KIG4(j, g) \
	VMOVDQU64     (512*j+64*g)(SI), Z8             \
	VPDPBUSD.BCST (32*j+4*g)(DI), Z8, Z4           \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R8*1), Z8, Z5     \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R8*2), Z8, Z6     \
	VPDPBUSD.BCST (32*j+4*g)(DI)(R9*1), Z8, Z7

#define KISUB4(j) \
	VPXORD  Z4, Z4, Z4        \
	VPXORD  Z5, Z5, Z5        \
	VPXORD  Z6, Z6, Z6        \
	VPXORD  Z7, Z7, Z7        \
	KIG4(j, 0)                \
	KIG4(j, 1)                \
	KIG4(j, 2)                \
	KIG4(j, 3)                \
	KIG4(j, 4)                \
	KIG4(j, 5)                \
	KIG4(j, 6)                \
	KIG4(j, 7)                \
	VMOVDQU64 (4096+64*j)(SI), Z9 \
	VPMULLD Z9, Z4, Z4        \
	VPMULLD Z9, Z5, Z5        \
	VPMULLD Z9, Z6, Z6        \
	VPMULLD Z9, Z7, Z7        \
	VPADDD  Z4, Z0, Z0        \
	VPADDD  Z5, Z1, Z1        \
	VPADDD  Z6, Z2, Z2        \
	VPADDD  Z7, Z3, Z3

// KIMINS: Z10-Z13 the tile's min pairs, Z14 its d, Z15 its dmin.
#define KIMINS \
	VMOVDQU64 4608(SI), Z10 \
	VMOVDQU64 4672(SI), Z11 \
	VMOVDQU64 4736(SI), Z12 \
	VMOVDQU64 4800(SI), Z13 \
	VMOVUPS   4864(SI), Z14 \
	VMOVUPS   4928(SI), Z15

// func batchQ4Kx16ix4(tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32, out *float32, os int)
TEXT ·batchQ4Kx16ix4(SB), NOSPLIT, $0-88
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xs+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ d+24(FP), DX
	MOVQ ds+32(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ b2+40(FP), BX
	MOVQ bs+48(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ nb+56(FP), CX
	MOVQ acc+64(FP), AX
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z20
	VMOVUPS 128(AX), Z17
	VMOVUPS 192(AX), Z21
	VMOVUPS 256(AX), Z18
	VMOVUPS 320(AX), Z22
	VMOVUPS 384(AX), Z19
	VMOVUPS 448(AX), Z23

bq4kiz4loop:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	KISUB4(0)
	KISUB4(1)
	KISUB4(2)
	KISUB4(3)
	KISUB4(4)
	KISUB4(5)
	KISUB4(6)
	KISUB4(7)
	KIMINS
	KZMINS1(Z4, 0(BX), 4(BX), 8(BX), 12(BX))
	KZMINS1(Z5, 0(BX)(R12*1), 4(BX)(R12*1), 8(BX)(R12*1), 12(BX)(R12*1))
	KZMINS1(Z6, 0(BX)(R12*2), 4(BX)(R12*2), 8(BX)(R12*2), 12(BX)(R12*2))
	KZMINS1(Z7, 0(BX)(R13*1), 4(BX)(R13*1), 8(BX)(R13*1), 12(BX)(R13*1))
	KZFOLD1((DX), Z0, Z4, Z16, Z20)
	KZFOLD1((DX)(R10*1), Z1, Z5, Z17, Z21)
	KZFOLD1((DX)(R10*2), Z2, Z6, Z18, Z22)
	KZFOLD1((DX)(R11*1), Z3, Z7, Z19, Z23)
	ADDQ $4992, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kiz4loop
	MOVQ out+72(FP), DI
	TESTQ DI, DI
	JZ   bq4kiz4acc
	MOVQ os+80(FP), R8
	LEAQ (R8)(R8*2), R9
	VSUBPS  Z20, Z16, Z16
	VSUBPS  Z21, Z17, Z17
	VSUBPS  Z22, Z18, Z18
	VSUBPS  Z23, Z19, Z19
	VMOVUPS Z16, (DI)
	VMOVUPS Z17, (DI)(R8*1)
	VMOVUPS Z18, (DI)(R8*2)
	VMOVUPS Z19, (DI)(R9*1)
	VZEROUPPER
	RET

bq4kiz4acc:
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z20, 64(AX)
	VMOVUPS Z17, 128(AX)
	VMOVUPS Z21, 192(AX)
	VMOVUPS Z18, 256(AX)
	VMOVUPS Z22, 320(AX)
	VMOVUPS Z19, 384(AX)
	VMOVUPS Z23, 448(AX)
	VZEROUPPER
	RET

#define KIG1(j, g) \
	VMOVDQU64     (512*j+64*g)(SI), Z8 \
	VPDPBUSD.BCST (32*j+4*g)(DI), Z8, Z4

#define KISUB1(j) \
	VPXORD  Z4, Z4, Z4              \
	KIG1(j, 0)                      \
	KIG1(j, 1)                      \
	KIG1(j, 2)                      \
	KIG1(j, 3)                      \
	KIG1(j, 4)                      \
	KIG1(j, 5)                      \
	KIG1(j, 6)                      \
	KIG1(j, 7)                      \
	VPMULLD (4096+64*j)(SI), Z4, Z4 \
	VPADDD  Z4, Z0, Z0

// func batchQ4Kx16ix1(tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32, out *float32)
TEXT ·batchQ4Kx16ix1(SB), NOSPLIT, $0-56
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ b2+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z20

bq4kiz1loop:
	VPXORD Z0, Z0, Z0
	KISUB1(0)
	KISUB1(1)
	KISUB1(2)
	KISUB1(3)
	KISUB1(4)
	KISUB1(5)
	KISUB1(6)
	KISUB1(7)
	KIMINS
	KZMINS1(Z4, 0(BX), 4(BX), 8(BX), 12(BX))
	KZFOLD1((DX), Z0, Z4, Z16, Z20)
	ADDQ $4992, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kiz1loop
	MOVQ out+48(FP), DI
	TESTQ DI, DI
	JZ   bq4kiz1acc
	VSUBPS  Z20, Z16, Z16
	VMOVUPS Z16, (DI)
	VZEROUPPER
	RET

bq4kiz1acc:
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z20, 64(AX)
	VZEROUPPER
	RET

// The 32-row Q4_K kernels: two 16-row halves of a packed tile written by
// repackQ4_Kx16pAsm (rows 0-15 at off, rows 16-31 at off+64: quants of
// sub-blocks 2p and 2p+1 as the low and high nibbles of the bytes at
// 1024p+128g, scales at 4096+128j, min pairs at 5120+128k, d at 5632,
// dmin at 5760; 5888 bytes per super-block). Each vector's quants,
// broadcast once into a register, feed both halves: half the broadcast
// loads per VPDPBUSD of the 16-row kernel, whose loads bound it (measured:
// without them it ran ~18% faster). The float accumulators stay in acc
// (per vector 32 row accumulators, then 32 mins accumulators), updated
// once per super-block; on the last super-blocks (out not nil) the results
// go to out + t*os bytes instead.
//
// Registers: Z0-Z7 one sub-block's sums (half h, vector t in Z(4h+t)),
// Z8-Z15 the super-block's, Z16/Z17 the halves' groups, Z24-Z27 the
// vectors' broadcast quants, Z28/Z29 the nibble masks.

// KPF9 hints nine lines of the next row group into the cache, from R14 up to
// R15 (where it stays: past the end it hints the same lines again).
#define KPF9 \
	PREFETCHT0 (R14)      \
	PREFETCHT0 64(R14)    \
	PREFETCHT0 128(R14)   \
	PREFETCHT0 192(R14)   \
	PREFETCHT0 256(R14)   \
	PREFETCHT0 320(R14)   \
	PREFETCHT0 384(R14)   \
	PREFETCHT0 448(R14)   \
	PREFETCHT0 512(R14)   \
	ADDQ       $576, R14  \
	CMPQ       R14, R15   \
	CMOVQHI    R15, R14

// KQFOLD(h, D, S, B, A): the sums S of half h of the vector whose scale is
// at D, sub-block sums at B and accumulators at A: the mins terms into
// Z22, then the row and mins accumulators of half h at AX+A updated.
#define KQFOLD(h, D, S, B0, B1, B2, B3, A) \
	VPXORD        Z22, Z22, Z22        \
	VPDPWSSD.BCST B0, Z16, Z22         \
	VPDPWSSD.BCST B1, Z17, Z22         \
	VPDPWSSD.BCST B2, Z18, Z22         \
	VPDPWSSD.BCST B3, Z19, Z22         \
	VCVTDQ2PS     S, S                 \
	VMULPS.BCST   D, Z20, Z23          \
	VMOVUPS       (A+64*h)(AX), Z24       \
	VFMADD231PS   Z23, S, Z24          \
	VMOVUPS       Z24, (A+64*h)(AX)       \
	VCVTDQ2PS     Z22, Z22             \
	VMULPS.BCST   D, Z21, Z23          \
	VMOVUPS       (A+128+64*h)(AX), Z24   \
	VFMADD231PS   Z23, Z22, Z24        \
	VMOVUPS       Z24, (A+128+64*h)(AX)

// KQOUT(a, _): the 32 results of the vector with accumulators at AX+a
// (rows minus mins) to DI.
#define KQOUT(a, z) \
	VMOVUPS (a)(AX), Z0        \
	VSUBPS  (a+128)(AX), Z0, Z0 \
	VMOVUPS Z0, (DI)           \
	VMOVUPS (a+64)(AX), Z1     \
	VSUBPS  (a+192)(AX), Z1, Z1 \
	VMOVUPS Z1, 64(DI)

// Sub-block 2p takes the low nibbles of its pair (AND 0x0f, Z28), 2p+1
// the high ones in place (AND 0xf0, Z29): 16 times each quant, so its
// int32 sums are 16 times the true ones, exactly, and an arithmetic shift
// by 4 gives them back before the scales multiply them (no overflow: 32
// products of at most 240 x 128 a sum). The same integers as an unpacked
// tile, so the same results bit for bit; the repack stores half as much
// and the kernel pays one AND (folded with the load) a group.

#define KQG4P(p, j, g, M) \
	VPANDD       (1024*p+128*g)(SI), M, Z16    \
	VPANDD       (1024*p+128*g+64)(SI), M, Z17 \
	VPBROADCASTD (32*(j)+4*g)(DI), Z24        \
	VPBROADCASTD (32*(j)+4*g)(DI)(R8*1), Z25  \
	VPBROADCASTD (32*(j)+4*g)(DI)(R8*2), Z26  \
	VPBROADCASTD (32*(j)+4*g)(DI)(R9*1), Z27  \
	VPDPBUSD     Z24, Z16, Z0               \
	VPDPBUSD     Z25, Z16, Z1               \
	VPDPBUSD     Z26, Z16, Z2               \
	VPDPBUSD     Z27, Z16, Z3               \
	VPDPBUSD     Z24, Z17, Z4               \
	VPDPBUSD     Z25, Z17, Z5               \
	VPDPBUSD     Z26, Z17, Z6               \
	VPDPBUSD     Z27, Z17, Z7

#define KQZERO8 \
	VPXORD  Z0, Z0, Z0 \
	VPXORD  Z1, Z1, Z1 \
	VPXORD  Z2, Z2, Z2 \
	VPXORD  Z3, Z3, Z3 \
	VPXORD  Z4, Z4, Z4 \
	VPXORD  Z5, Z5, Z5 \
	VPXORD  Z6, Z6, Z6 \
	VPXORD  Z7, Z7, Z7

#define KQGROUPS4P(p, j, M) \
	KQG4P(p, j, 0, M) \
	KQG4P(p, j, 1, M) \
	KQG4P(p, j, 2, M) \
	KQG4P(p, j, 3, M) \
	KQG4P(p, j, 4, M) \
	KQG4P(p, j, 5, M) \
	KQG4P(p, j, 6, M) \
	KQG4P(p, j, 7, M)

// KQSCALE4P(j): sub-block j's sums (Z0-Z7) times its scales into the
// super-block's (Z8-Z15).
#define KQSCALE4P(j) \
	VMOVDQU64 (4096+128*(j))(SI), Z16    \
	VMOVDQU64 (4096+128*(j)+64)(SI), Z17 \
	VPMULLD Z16, Z0, Z0       \
	VPMULLD Z16, Z1, Z1       \
	VPMULLD Z16, Z2, Z2       \
	VPMULLD Z16, Z3, Z3       \
	VPMULLD Z17, Z4, Z4       \
	VPMULLD Z17, Z5, Z5       \
	VPMULLD Z17, Z6, Z6       \
	VPMULLD Z17, Z7, Z7       \
	VPADDD  Z0, Z8, Z8        \
	VPADDD  Z1, Z9, Z9        \
	VPADDD  Z2, Z10, Z10      \
	VPADDD  Z3, Z11, Z11      \
	VPADDD  Z4, Z12, Z12      \
	VPADDD  Z5, Z13, Z13      \
	VPADDD  Z6, Z14, Z14      \
	VPADDD  Z7, Z15, Z15

// KQPAIR4P(p): sub-blocks 2p (low nibbles) and 2p+1 (high nibbles, their
// sums shifted back), a KPF9 after each.
#define KQPAIR4P(p) \
	KQZERO8                    \
	KQGROUPS4P(p, 2*p, Z28)    \
	KQSCALE4P(2*p)             \
	KPF9                       \
	KQZERO8                    \
	KQGROUPS4P(p, 2*p+1, Z29)  \
	VPSRAD  $4, Z0, Z0         \
	VPSRAD  $4, Z1, Z1         \
	VPSRAD  $4, Z2, Z2         \
	VPSRAD  $4, Z3, Z3         \
	VPSRAD  $4, Z4, Z4         \
	VPSRAD  $4, Z5, Z5         \
	VPSRAD  $4, Z6, Z6         \
	VPSRAD  $4, Z7, Z7         \
	KQSCALE4P(2*p+1)           \
	KPF9

// KQHALFP(h): Z16-Z19 half h's min pairs, Z20 its d, Z21 its dmin.
#define KQHALFP(h) \
	VMOVDQU64 (5120+64*h)(SI), Z16 \
	VMOVDQU64 (5248+64*h)(SI), Z17 \
	VMOVDQU64 (5376+64*h)(SI), Z18 \
	VMOVDQU64 (5504+64*h)(SI), Z19 \
	VMOVUPS   (5632+64*h)(SI), Z20 \
	VMOVUPS   (5760+64*h)(SI), Z21

// KQMASKS: Z28 = 0x0f bytes, Z29 = 0xf0 bytes (clobbers AX).
#define KQMASKS \
	MOVL         $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z28         \
	MOVL         $0xf0f0f0f0, AX \
	VPBROADCASTD AX, Z29

// func batchQ4Kx32px4(tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32, out *float32, os int, pf, pfEnd *byte)
TEXT ·batchQ4Kx32px4(SB), NOSPLIT, $0-104
	KQMASKS
	MOVQ pf+88(FP), R14
	MOVQ pfEnd+96(FP), R15
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xs+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ d+24(FP), DX
	MOVQ ds+32(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ b2+40(FP), BX
	MOVQ bs+48(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ nb+56(FP), CX
	MOVQ acc+64(FP), AX

bq4kp4loop:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	KQPAIR4P(0)
	KQPAIR4P(1)
	KQPAIR4P(2)
	KQPAIR4P(3)
	KQHALFP(0)
	KQFOLD(0, (DX), Z8, 0(BX), 4(BX), 8(BX), 12(BX), 0)
	KQFOLD(0, (DX)(R10*1), Z9, 0(BX)(R12*1), 4(BX)(R12*1), 8(BX)(R12*1), 12(BX)(R12*1), 256)
	KQFOLD(0, (DX)(R10*2), Z10, 0(BX)(R12*2), 4(BX)(R12*2), 8(BX)(R12*2), 12(BX)(R12*2), 512)
	KQFOLD(0, (DX)(R11*1), Z11, 0(BX)(R13*1), 4(BX)(R13*1), 8(BX)(R13*1), 12(BX)(R13*1), 768)
	KQHALFP(1)
	KQFOLD(1, (DX), Z12, 0(BX), 4(BX), 8(BX), 12(BX), 0)
	KQFOLD(1, (DX)(R10*1), Z13, 0(BX)(R12*1), 4(BX)(R12*1), 8(BX)(R12*1), 12(BX)(R12*1), 256)
	KQFOLD(1, (DX)(R10*2), Z14, 0(BX)(R12*2), 4(BX)(R12*2), 8(BX)(R12*2), 12(BX)(R12*2), 512)
	KQFOLD(1, (DX)(R11*1), Z15, 0(BX)(R13*1), 4(BX)(R13*1), 8(BX)(R13*1), 12(BX)(R13*1), 768)
	ADDQ $5888, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kp4loop
	MOVQ out+72(FP), DI
	TESTQ DI, DI
	JZ   bq4kp4done
	MOVQ os+80(FP), R8
	KQOUT(0, 0)
	ADDQ R8, DI
	KQOUT(256, 0)
	ADDQ R8, DI
	KQOUT(512, 0)
	ADDQ R8, DI
	KQOUT(768, 0)

bq4kp4done:
	VZEROUPPER
	RET

#define KQG1P(p, j, g, M) \
	VPANDD        (1024*p+128*g)(SI), M, Z16    \
	VPANDD        (1024*p+128*g+64)(SI), M, Z17 \
	VPDPBUSD.BCST (32*(j)+4*g)(DI), Z16, Z0      \
	VPDPBUSD.BCST (32*(j)+4*g)(DI), Z17, Z4

#define KQSUB1P(p, j, M) \
	VPXORD  Z0, Z0, Z0 \
	VPXORD  Z4, Z4, Z4 \
	KQG1P(p, j, 0, M)  \
	KQG1P(p, j, 1, M)  \
	KQG1P(p, j, 2, M)  \
	KQG1P(p, j, 3, M)  \
	KQG1P(p, j, 4, M)  \
	KQG1P(p, j, 5, M)  \
	KQG1P(p, j, 6, M)  \
	KQG1P(p, j, 7, M)

#define KQSCALE1P(j) \
	VPMULLD (4096+128*(j))(SI), Z0, Z0    \
	VPMULLD (4096+128*(j)+64)(SI), Z4, Z4 \
	VPADDD  Z0, Z8, Z8                  \
	VPADDD  Z4, Z12, Z12

#define KQPAIR1P(p) \
	KQSUB1P(p, 2*p, Z28)   \
	KQSCALE1P(2*p)         \
	KQSUB1P(p, 2*p+1, Z29) \
	VPSRAD $4, Z0, Z0      \
	VPSRAD $4, Z4, Z4      \
	KQSCALE1P(2*p+1)

// func batchQ4Kx32px1(tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32, out *float32)
TEXT ·batchQ4Kx32px1(SB), NOSPLIT, $0-56
	KQMASKS
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ b2+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX

bq4kp1loop:
	VPXORD Z8, Z8, Z8
	VPXORD Z12, Z12, Z12
	KQPAIR1P(0)
	KQPAIR1P(1)
	KQPAIR1P(2)
	KQPAIR1P(3)
	KQHALFP(0)
	KQFOLD(0, (DX), Z8, 0(BX), 4(BX), 8(BX), 12(BX), 0)
	KQHALFP(1)
	KQFOLD(1, (DX), Z12, 0(BX), 4(BX), 8(BX), 12(BX), 0)
	ADDQ $5888, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kp1loop
	MOVQ out+48(FP), DI
	TESTQ DI, DI
	JZ   bq4kp1done
	KQOUT(0, 0)

bq4kp1done:
	VZEROUPPER
	RET

// func touchLines(p *byte, n int)
TEXT ·touchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	XORQ AX, AX

touchloop:
	MOVBLZX (SI)(AX*1), DX
	ADDQ    $64, AX
	CMPQ    AX, CX
	JLT     touchloop
	MOVBLZX -1(SI)(CX*1), DX // the last line, where p is not line-aligned
	RET

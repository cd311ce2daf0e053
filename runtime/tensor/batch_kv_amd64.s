//go:build !purego

#include "textflag.h"

// The AVX-VNNI K-quant and IQ4_XS batch kernels (useAVXVNNI: CPUs with
// the VEX-encoded 32-byte VPDPBUSD/VPDPWSSD but not AVX-512): the 8-row
// kernels of batch_k_amd64.s on the same tiles, with what AVX-512 alone
// has taken out. The vector's quants are broadcast into registers (VEX
// has no broadcast inside the instruction), the accumulators stay in
// memory (16 registers: the fma reads and writes acc once per
// super-block), and the repacks use AVX2 only, with their byte masks read
// from memory. Go's assembler writes VPDPBUSD and VPDPWSSD only in their
// EVEX forms, so the VEX ones are spelled out in bytes.

// VPDPBUSDV(src2, src1, dst): dst += lanes(unsigned bytes of Y(src1) ·
// signed bytes of Y(src2)) (register numbers 0-15; VEX.256.66.0F38.W0 50).
#define VPDPBUSDV(src2, src1, dst) \
	BYTE $0xC4; BYTE $((((~(dst>>3))&1)<<7) | 0x40 | (((~(src2>>3))&1)<<5) | 0x02); BYTE $((((~src1)&15)<<3) | 0x05); BYTE $0x50; BYTE $(0xC0 | ((dst&7)<<3) | (src2&7))

// VPDPWSSDV(src2, src1, dst): dst += lanes(pairs of signed words of
// Y(src1) · those of Y(src2)) (VEX.256.66.0F38.W0 52).
#define VPDPWSSDV(src2, src1, dst) \
	BYTE $0xC4; BYTE $((((~(dst>>3))&1)<<7) | 0x40 | (((~(src2>>3))&1)<<5) | 0x02); BYTE $((((~src1)&15)<<3) | 0x05); BYTE $0x52; BYTE $(0xC0 | ((dst&7)<<3) | (src2&7))

DATA kv0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kv0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kv0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kv0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kv0f<>(SB), RODATA|NOPTR, $32
DATA kv30<>+0(SB)/8, $0x3030303030303030
DATA kv30<>+8(SB)/8, $0x3030303030303030
DATA kv30<>+16(SB)/8, $0x3030303030303030
DATA kv30<>+24(SB)/8, $0x3030303030303030
GLOBL kv30<>(SB), RODATA|NOPTR, $32
DATA kv10<>+0(SB)/8, $0x1010101010101010
DATA kv10<>+8(SB)/8, $0x1010101010101010
DATA kv10<>+16(SB)/8, $0x1010101010101010
DATA kv10<>+24(SB)/8, $0x1010101010101010
GLOBL kv10<>(SB), RODATA|NOPTR, $32
DATA kv03<>+0(SB)/8, $0x0303030303030303
DATA kv03<>+8(SB)/8, $0x0303030303030303
DATA kv03<>+16(SB)/8, $0x0303030303030303
DATA kv03<>+24(SB)/8, $0x0303030303030303
GLOBL kv03<>(SB), RODATA|NOPTR, $32
DATA kv04<>+0(SB)/8, $0x0404040404040404
DATA kv04<>+8(SB)/8, $0x0404040404040404
DATA kv04<>+16(SB)/8, $0x0404040404040404
DATA kv04<>+24(SB)/8, $0x0404040404040404
GLOBL kv04<>(SB), RODATA|NOPTR, $32
DATA kv3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kv3f<>+8(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kv3f<>+16(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kv3f<>+24(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL kv3f<>(SB), RODATA|NOPTR, $32
DATA kvz<>+0(SB)/8, $0x0000000000000000
DATA kvz<>+8(SB)/8, $0x0000000000000000
DATA kvz<>+16(SB)/8, $0x0000000000000000
DATA kvz<>+24(SB)/8, $0x0000000000000000
GLOBL kvz<>(SB), RODATA|NOPTR, $32
DATA kvsh04<>+0(SB)/4, $0
DATA kvsh04<>+4(SB)/4, $4
DATA kvsh04<>+8(SB)/4, $0
DATA kvsh04<>+12(SB)/4, $0
GLOBL kvsh04<>(SB), RODATA|NOPTR, $16
DATA kv15d<>+0(SB)/4, $15
DATA kv15d<>+4(SB)/4, $15
DATA kv15d<>+8(SB)/4, $15
DATA kv15d<>+12(SB)/4, $15
DATA kv15d<>+16(SB)/4, $15
DATA kv15d<>+20(SB)/4, $15
DATA kv15d<>+24(SB)/4, $15
DATA kv15d<>+28(SB)/4, $15
GLOBL kv15d<>(SB), RODATA|NOPTR, $32
DATA kv3d<>+0(SB)/4, $3
DATA kv3d<>+4(SB)/4, $3
DATA kv3d<>+8(SB)/4, $3
DATA kv3d<>+12(SB)/4, $3
DATA kv3d<>+16(SB)/4, $3
DATA kv3d<>+20(SB)/4, $3
DATA kv3d<>+24(SB)/4, $3
DATA kv3d<>+28(SB)/4, $3
GLOBL kv3d<>(SB), RODATA|NOPTR, $32
DATA kv32d<>+0(SB)/4, $32
DATA kv32d<>+4(SB)/4, $32
DATA kv32d<>+8(SB)/4, $32
DATA kv32d<>+12(SB)/4, $32
DATA kv32d<>+16(SB)/4, $32
DATA kv32d<>+20(SB)/4, $32
DATA kv32d<>+24(SB)/4, $32
DATA kv32d<>+28(SB)/4, $32
GLOBL kv32d<>(SB), RODATA|NOPTR, $32
DATA kviq4<>+0(SB)/1, $1
DATA kviq4<>+1(SB)/1, $24
DATA kviq4<>+2(SB)/1, $45
DATA kviq4<>+3(SB)/1, $63
DATA kviq4<>+4(SB)/1, $79
DATA kviq4<>+5(SB)/1, $93
DATA kviq4<>+6(SB)/1, $106
DATA kviq4<>+7(SB)/1, $118
DATA kviq4<>+8(SB)/1, $129
DATA kviq4<>+9(SB)/1, $141
DATA kviq4<>+10(SB)/1, $153
DATA kviq4<>+11(SB)/1, $166
DATA kviq4<>+12(SB)/1, $181
DATA kviq4<>+13(SB)/1, $197
DATA kviq4<>+14(SB)/1, $217
DATA kviq4<>+15(SB)/1, $241
DATA kviq4<>+16(SB)/1, $1
DATA kviq4<>+17(SB)/1, $24
DATA kviq4<>+18(SB)/1, $45
DATA kviq4<>+19(SB)/1, $63
DATA kviq4<>+20(SB)/1, $79
DATA kviq4<>+21(SB)/1, $93
DATA kviq4<>+22(SB)/1, $106
DATA kviq4<>+23(SB)/1, $118
DATA kviq4<>+24(SB)/1, $129
DATA kviq4<>+25(SB)/1, $141
DATA kviq4<>+26(SB)/1, $153
DATA kviq4<>+27(SB)/1, $166
DATA kviq4<>+28(SB)/1, $181
DATA kviq4<>+29(SB)/1, $197
DATA kviq4<>+30(SB)/1, $217
DATA kviq4<>+31(SB)/1, $241
GLOBL kviq4<>(SB), RODATA|NOPTR, $32
DATA kviq4L<>+0(SB)/4, $0
DATA kviq4L<>+4(SB)/4, $4
DATA kviq4L<>+8(SB)/4, $8
DATA kviq4L<>+12(SB)/4, $12
DATA kviq4L<>+16(SB)/4, $16
DATA kviq4L<>+20(SB)/4, $20
DATA kviq4L<>+24(SB)/4, $24
DATA kviq4L<>+28(SB)/4, $28
GLOBL kviq4L<>(SB), RODATA|NOPTR, $32
DATA kviq4H<>+0(SB)/4, $0
DATA kviq4H<>+4(SB)/4, $2
DATA kviq4H<>+8(SB)/4, $4
DATA kviq4H<>+12(SB)/4, $6
DATA kviq4H<>+16(SB)/4, $8
DATA kviq4H<>+20(SB)/4, $10
DATA kviq4H<>+24(SB)/4, $12
DATA kviq4H<>+28(SB)/4, $14
GLOBL kviq4H<>(SB), RODATA|NOPTR, $32
DATA kvq3L<>+0(SB)/4, $0
DATA kvq3L<>+4(SB)/4, $8
DATA kvq3L<>+8(SB)/4, $16
DATA kvq3L<>+12(SB)/4, $24
DATA kvq3L<>+16(SB)/4, $2
DATA kvq3L<>+20(SB)/4, $10
DATA kvq3L<>+24(SB)/4, $18
DATA kvq3L<>+28(SB)/4, $26
GLOBL kvq3L<>(SB), RODATA|NOPTR, $32
DATA kvq3H<>+0(SB)/4, $4
DATA kvq3H<>+4(SB)/4, $12
DATA kvq3H<>+8(SB)/4, $20
DATA kvq3H<>+12(SB)/4, $28
DATA kvq3H<>+16(SB)/4, $6
DATA kvq3H<>+20(SB)/4, $14
DATA kvq3H<>+24(SB)/4, $22
DATA kvq3H<>+28(SB)/4, $30
GLOBL kvq3H<>(SB), RODATA|NOPTR, $32

// KFOLDV(D, S, doff, A): A = fma(float(S), the rows' float32 scales at
// doff(SI) * D, A), A in memory (one rounding, as fma32). Clobbers Y9.
#define KFOLDV(D, S, doff, A) \
	VCVTDQ2PS    S, S            \
	VBROADCASTSS D, Y9           \
	VMULPS       doff(SI), Y9, Y9 \
	VFMADD213PS  A, Y9, S        \
	VMOVUPS      S, A

// Q4_K (and Q5_K) tiles (see batch_k_amd64.s): per sub-block j eight
// groups against the four vectors (x + t*xs: DI, R8, R9 = 3xs) into the
// int32 sums Y4-Y7, scaled by the rows' scales into Y0-Y3.
#define KG4V(j, g) \
	VMOVDQU      (256*j+32*g)(SI), Y8        \
	VPBROADCASTD (32*j+4*g)(DI), Y9          \
	VPBROADCASTD (32*j+4*g)(DI)(R8*1), Y10   \
	VPBROADCASTD (32*j+4*g)(DI)(R8*2), Y11   \
	VPBROADCASTD (32*j+4*g)(DI)(R9*1), Y12   \
	VPDPBUSDV(9, 8, 4)                       \
	VPDPBUSDV(10, 8, 5)                      \
	VPDPBUSDV(11, 8, 6)                      \
	VPDPBUSDV(12, 8, 7)

#define KSUB4V(j) \
	VPXOR   Y4, Y4, Y4              \
	VPXOR   Y5, Y5, Y5              \
	VPXOR   Y6, Y6, Y6              \
	VPXOR   Y7, Y7, Y7              \
	KG4V(j, 0)                      \
	KG4V(j, 1)                      \
	KG4V(j, 2)                      \
	KG4V(j, 3)                      \
	KG4V(j, 4)                      \
	KG4V(j, 5)                      \
	KG4V(j, 6)                      \
	KG4V(j, 7)                      \
	VPMULLD (2048+32*j)(SI), Y4, Y4 \
	VPMULLD (2048+32*j)(SI), Y5, Y5 \
	VPMULLD (2048+32*j)(SI), Y6, Y6 \
	VPMULLD (2048+32*j)(SI), Y7, Y7 \
	VPADDD  Y4, Y0, Y0              \
	VPADDD  Y5, Y1, Y1              \
	VPADDD  Y6, Y2, Y2              \
	VPADDD  Y7, Y3, Y3

// KMIN4V(toff, boff): the rows' int16 pairs at toff(SI) against the four
// vectors' pairs at boff(BX + t*bs: BX, R12, R13 = 3bs) into Y4-Y7.
#define KMIN4V(toff, boff) \
	VMOVDQU      toff(SI), Y8           \
	VPBROADCASTD boff(BX), Y9           \
	VPBROADCASTD boff(BX)(R12*1), Y10   \
	VPBROADCASTD boff(BX)(R12*2), Y11   \
	VPBROADCASTD boff(BX)(R13*1), Y12   \
	VPDPWSSDV(9, 8, 4)                  \
	VPDPWSSDV(10, 8, 5)                 \
	VPDPWSSDV(11, 8, 6)                 \
	VPDPWSSDV(12, 8, 7)

// func batchQ4Kx8x4V(tile *byte, x *int8, xs int, d *float32, ds int, b2 *int16, bs int, nb int, acc *float32)
TEXT ·batchQ4Kx8x4V(SB), NOSPLIT, $0-72
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

bq4kvx4loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	KSUB4V(0)
	KSUB4V(1)
	KSUB4V(2)
	KSUB4V(3)
	KSUB4V(4)
	KSUB4V(5)
	KSUB4V(6)
	KSUB4V(7)
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	KMIN4V(2304, 0)
	KMIN4V(2336, 4)
	KMIN4V(2368, 8)
	KMIN4V(2400, 12)
	KFOLDV((DX), Y0, 2432, 0(AX))
	KFOLDV((DX), Y4, 2464, 32(AX))
	KFOLDV((DX)(R10*1), Y1, 2432, 64(AX))
	KFOLDV((DX)(R10*1), Y5, 2464, 96(AX))
	KFOLDV((DX)(R10*2), Y2, 2432, 128(AX))
	KFOLDV((DX)(R10*2), Y6, 2464, 160(AX))
	KFOLDV((DX)(R11*1), Y3, 2432, 192(AX))
	KFOLDV((DX)(R11*1), Y7, 2464, 224(AX))
	ADDQ $2496, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kvx4loop
	VZEROUPPER
	RET

// KG1V(j, g, A): group g of sub-block j against one vector into Y(A).
#define KG1V(j, g, A) \
	VMOVDQU      (256*j+32*g)(SI), Y8 \
	VPBROADCASTD (32*j+4*g)(DI), Y9   \
	VPDPBUSDV(9, 8, A)

// KSUB1V(j): sub-block j into Y0 (two chains of sums, Y4 and Y5).
#define KSUB1V(j) \
	VPXOR   Y4, Y4, Y4              \
	VPXOR   Y5, Y5, Y5              \
	KG1V(j, 0, 4)                   \
	KG1V(j, 1, 5)                   \
	KG1V(j, 2, 4)                   \
	KG1V(j, 3, 5)                   \
	KG1V(j, 4, 4)                   \
	KG1V(j, 5, 5)                   \
	KG1V(j, 6, 4)                   \
	KG1V(j, 7, 5)                   \
	VPADDD  Y5, Y4, Y4              \
	VPMULLD (2048+32*j)(SI), Y4, Y4 \
	VPADDD  Y4, Y0, Y0

// KMIN1V(toff, boff): KMIN4V for one vector, into Y4.
#define KMIN1V(toff, boff) \
	VMOVDQU      toff(SI), Y8 \
	VPBROADCASTD boff(BX), Y9 \
	VPDPWSSDV(9, 8, 4)

// func batchQ4Kx8x1V(tile *byte, x *int8, d *float32, b2 *int16, nb int, acc *float32)
TEXT ·batchQ4Kx8x1V(SB), NOSPLIT, $0-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ b2+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX

bq4kvx1loop:
	VPXOR Y0, Y0, Y0
	KSUB1V(0)
	KSUB1V(1)
	KSUB1V(2)
	KSUB1V(3)
	KSUB1V(4)
	KSUB1V(5)
	KSUB1V(6)
	KSUB1V(7)
	VPXOR Y4, Y4, Y4
	KMIN1V(2304, 0)
	KMIN1V(2336, 4)
	KMIN1V(2368, 8)
	KMIN1V(2400, 12)
	KFOLDV((DX), Y0, 2432, 0(AX))
	KFOLDV((DX), Y4, 2464, 32(AX))
	ADDQ $2496, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $16, BX
	DECQ CX
	JNZ  bq4kvx1loop
	VZEROUPPER
	RET

// Q6_K-form tiles (Q6_K, Q3_K, IQ4_XS; see batch_k_amd64.s): per
// sub-block of 16, four groups against the four vectors, the sums
// starting at the vectors' offset corrections (c + t*cs: BX, R12, R13 =
// 3cs) or at zero (Q2_K).
#define KG6V(i, g) \
	VMOVDQU      (128*i+32*g)(SI), Y8        \
	VPBROADCASTD (16*i+4*g)(DI), Y9          \
	VPBROADCASTD (16*i+4*g)(DI)(R8*1), Y10   \
	VPBROADCASTD (16*i+4*g)(DI)(R8*2), Y11   \
	VPBROADCASTD (16*i+4*g)(DI)(R9*1), Y12   \
	VPDPBUSDV(9, 8, 4)                       \
	VPDPBUSDV(10, 8, 5)                      \
	VPDPBUSDV(11, 8, 6)                      \
	VPDPBUSDV(12, 8, 7)

// KSC6V(i): the sums Y4-Y7 of sub-block i scaled into Y0-Y3.
#define KSC6V(i) \
	KG6V(i, 0)                      \
	KG6V(i, 1)                      \
	KG6V(i, 2)                      \
	KG6V(i, 3)                      \
	VPMULLD (2048+32*i)(SI), Y4, Y4 \
	VPMULLD (2048+32*i)(SI), Y5, Y5 \
	VPMULLD (2048+32*i)(SI), Y6, Y6 \
	VPMULLD (2048+32*i)(SI), Y7, Y7 \
	VPADDD  Y4, Y0, Y0              \
	VPADDD  Y5, Y1, Y1              \
	VPADDD  Y6, Y2, Y2              \
	VPADDD  Y7, Y3, Y3

#define KSUB6V(i) \
	VPBROADCASTD (4*i)(BX), Y4        \
	VPBROADCASTD (4*i)(BX)(R12*1), Y5 \
	VPBROADCASTD (4*i)(BX)(R12*2), Y6 \
	VPBROADCASTD (4*i)(BX)(R13*1), Y7 \
	KSC6V(i)

// func batchQ6Kx8x4V(tile *byte, x *int8, xs int, d *float32, ds int, c *int32, cs int, nb int, acc *float32)
TEXT ·batchQ6Kx8x4V(SB), NOSPLIT, $0-72
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

bq6kvx4loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	KSUB6V(0)
	KSUB6V(1)
	KSUB6V(2)
	KSUB6V(3)
	KSUB6V(4)
	KSUB6V(5)
	KSUB6V(6)
	KSUB6V(7)
	KSUB6V(8)
	KSUB6V(9)
	KSUB6V(10)
	KSUB6V(11)
	KSUB6V(12)
	KSUB6V(13)
	KSUB6V(14)
	KSUB6V(15)
	KFOLDV((DX), Y0, 2560, 0(AX))
	KFOLDV((DX)(R10*1), Y1, 2560, 64(AX))
	KFOLDV((DX)(R10*2), Y2, 2560, 128(AX))
	KFOLDV((DX)(R11*1), Y3, 2560, 192(AX))
	ADDQ $2592, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $64, BX
	DECQ CX
	JNZ  bq6kvx4loop
	VZEROUPPER
	RET

// KSC6x1V(i): sub-block i of one vector (sums starting in Y4) into Y0.
#define KSC6x1V(i) \
	VMOVDQU      (128*i)(SI), Y8        \
	VPBROADCASTD (16*i)(DI), Y9         \
	VPDPBUSDV(9, 8, 4)                  \
	VMOVDQU      (128*i+32)(SI), Y8     \
	VPBROADCASTD (16*i+4)(DI), Y9       \
	VPDPBUSDV(9, 8, 4)                  \
	VMOVDQU      (128*i+64)(SI), Y8     \
	VPBROADCASTD (16*i+8)(DI), Y9       \
	VPDPBUSDV(9, 8, 4)                  \
	VMOVDQU      (128*i+96)(SI), Y8     \
	VPBROADCASTD (16*i+12)(DI), Y9      \
	VPDPBUSDV(9, 8, 4)                  \
	VPMULLD      (2048+32*i)(SI), Y4, Y4 \
	VPADDD       Y4, Y0, Y0

#define KSUB6x1V(i) \
	VPBROADCASTD (4*i)(BX), Y4 \
	KSC6x1V(i)

// func batchQ6Kx8x1V(tile *byte, x *int8, d *float32, c *int32, nb int, acc *float32)
TEXT ·batchQ6Kx8x1V(SB), NOSPLIT, $0-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ c+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX

bq6kvx1loop:
	VPXOR Y0, Y0, Y0
	KSUB6x1V(0)
	KSUB6x1V(1)
	KSUB6x1V(2)
	KSUB6x1V(3)
	KSUB6x1V(4)
	KSUB6x1V(5)
	KSUB6x1V(6)
	KSUB6x1V(7)
	KSUB6x1V(8)
	KSUB6x1V(9)
	KSUB6x1V(10)
	KSUB6x1V(11)
	KSUB6x1V(12)
	KSUB6x1V(13)
	KSUB6x1V(14)
	KSUB6x1V(15)
	KFOLDV((DX), Y0, 2560, 0(AX))
	ADDQ $2592, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $64, BX
	DECQ CX
	JNZ  bq6kvx1loop
	VZEROUPPER
	RET

// Q2_K tiles: the Q6_K sums from zero, then the mins of the 16 sub-blocks
// (pairs at 2560+32k) against the vectors' 16-sums (b + t*bs, int16).
#define KZ6V(i) \
	VPXOR Y4, Y4, Y4 \
	VPXOR Y5, Y5, Y5 \
	VPXOR Y6, Y6, Y6 \
	VPXOR Y7, Y7, Y7 \
	KSC6V(i)

// func batchQ2Kx8x4V(tile *byte, x *int8, xs int, d *float32, ds int, b *int16, bs int, nb int, acc *float32)
TEXT ·batchQ2Kx8x4V(SB), NOSPLIT, $0-72
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

bq2kvx4loop:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	KZ6V(0)
	KZ6V(1)
	KZ6V(2)
	KZ6V(3)
	KZ6V(4)
	KZ6V(5)
	KZ6V(6)
	KZ6V(7)
	KZ6V(8)
	KZ6V(9)
	KZ6V(10)
	KZ6V(11)
	KZ6V(12)
	KZ6V(13)
	KZ6V(14)
	KZ6V(15)
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	KMIN4V(2560, 0)
	KMIN4V(2592, 4)
	KMIN4V(2624, 8)
	KMIN4V(2656, 12)
	KMIN4V(2688, 16)
	KMIN4V(2720, 20)
	KMIN4V(2752, 24)
	KMIN4V(2784, 28)
	KFOLDV((DX), Y0, 2816, 0(AX))
	KFOLDV((DX), Y4, 2848, 32(AX))
	KFOLDV((DX)(R10*1), Y1, 2816, 64(AX))
	KFOLDV((DX)(R10*1), Y5, 2848, 96(AX))
	KFOLDV((DX)(R10*2), Y2, 2816, 128(AX))
	KFOLDV((DX)(R10*2), Y6, 2848, 160(AX))
	KFOLDV((DX)(R11*1), Y3, 2816, 192(AX))
	KFOLDV((DX)(R11*1), Y7, 2848, 224(AX))
	ADDQ $2880, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  bq2kvx4loop
	VZEROUPPER
	RET

#define KZ6x1V(i) \
	VPXOR Y4, Y4, Y4 \
	KSC6x1V(i)

// func batchQ2Kx8x1V(tile *byte, x *int8, d *float32, b *int16, nb int, acc *float32)
TEXT ·batchQ2Kx8x1V(SB), NOSPLIT, $0-48
	MOVQ tile+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ b+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ acc+40(FP), AX

bq2kvx1loop:
	VPXOR Y0, Y0, Y0
	KZ6x1V(0)
	KZ6x1V(1)
	KZ6x1V(2)
	KZ6x1V(3)
	KZ6x1V(4)
	KZ6x1V(5)
	KZ6x1V(6)
	KZ6x1V(7)
	KZ6x1V(8)
	KZ6x1V(9)
	KZ6x1V(10)
	KZ6x1V(11)
	KZ6x1V(12)
	KZ6x1V(13)
	KZ6x1V(14)
	KZ6x1V(15)
	VPXOR Y4, Y4, Y4
	KMIN1V(2560, 0)
	KMIN1V(2592, 4)
	KMIN1V(2624, 8)
	KMIN1V(2656, 12)
	KMIN1V(2688, 16)
	KMIN1V(2720, 20)
	KMIN1V(2752, 24)
	KMIN1V(2784, 28)
	KFOLDV((DX), Y0, 2816, 0(AX))
	KFOLDV((DX), Y4, 2848, 32(AX))
	ADDQ $2880, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  bq2kvx1loop
	VZEROUPPER
	RET

// The repacks into the same tiles (batch_amd64.s has their AVX-512
// forms, batch_k_amd64.go the Go references), in AVX2: the 8 rows' 32-byte
// pieces are transposed as an 8x8 matrix of dwords (TRANSPOSE8), with the
// masks from memory (kv*<> above).

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

// STORE8(off): the transposed groups to off, off+32, ... off+224 (DI).
#define STORE8(off) \
	VMOVDQU Y0, (off)(DI)      \
	VMOVDQU Y2, (off+32)(DI)   \
	VMOVDQU Y12, (off+64)(DI)  \
	VMOVDQU Y14, (off+96)(DI)  \
	VMOVDQU Y1, (off+128)(DI)  \
	VMOVDQU Y3, (off+160)(DI)  \
	VMOVDQU Y13, (off+192)(DI) \
	VMOVDQU Y15, (off+224)(DI)

// STORE4(off): the first four transposed groups to off..off+96.
#define STORE4(off) \
	VMOVDQU Y0, (off)(DI)      \
	VMOVDQU Y2, (off+32)(DI)   \
	VMOVDQU Y12, (off+64)(DI)  \
	VMOVDQU Y14, (off+96)(DI)

// LOAD8(off): the 32 bytes at off of the 8 rows' blocks (SI + r*R8; rows
// 4-7 from R10) into Y0..Y7.
#define LOAD8(off) \
	VMOVDQU off(SI), Y0        \
	VMOVDQU off(SI)(R8*1), Y1  \
	VMOVDQU off(SI)(R8*2), Y2  \
	VMOVDQU off(SI)(R9*1), Y3  \
	VMOVDQU off(R10), Y4       \
	VMOVDQU off(R10)(R8*1), Y5 \
	VMOVDQU off(R10)(R8*2), Y6 \
	VMOVDQU off(R10)(R9*1), Y7

// GATHER16(off, X, Y): the fp16 at offset off of the 8 rows' blocks as 8
// float32 in Y (X its low half). Clobbers AX.
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

// ROWS8(M, off): the macro M(off(row r's block), Yr) for the 8 rows.
#define ROWS8(M, off) \
	M(off(SI), Y0)        \
	M(off(SI)(R8*1), Y1)  \
	M(off(SI)(R8*2), Y2)  \
	M(off(SI)(R9*1), Y3)  \
	M(off(R10), Y4)       \
	M(off(R10)(R8*1), Y5) \
	M(off(R10)(R8*2), Y6) \
	M(off(R10)(R9*1), Y7)

// K4SCMIN(addr): X9 = the 8 6-bit scales (bytes 0-7) and the 8 mins
// (bytes 8-15) of the 12 bytes at addr (a Q4_K or Q5_K block's, at 4).
// K4SC(addr, Y) / K4MIN(addr, Y): the block at addr's 8 scales as int32 /
// its 8 mins as int16 (pairs in dwords). Clobbers X8-X10.
#define K4SCMIN(addr) \
	VMOVDQU    addr, X8                \
	VPAND      kv3f<>(SB), X8, X9      \
	VPSHUFD    $0xaa, X8, X10          \
	VPSRLVD    kvsh04<>(SB), X10, X10  \
	VPAND      kv0f<>(SB), X10, X10    \
	VPSRLD     $6, X8, X8              \
	VPAND      kv03<>(SB), X8, X8      \
	VPSLLD     $4, X8, X8              \
	VPOR       X8, X10, X10            \
	VPUNPCKLDQ X10, X9, X9

#define K4SC(addr, Y) \
	K4SCMIN(4+addr) \
	VPMOVZXBD X9, Y

#define K4MIN(addr, Y) \
	K4SCMIN(4+addr)         \
	VPSHUFD   $0xee, X9, X9 \
	VPMOVZXBW X9, Y

// K4NIBV(p, G, g): group vector G (group g of the pair p of sub-blocks)
// as the low nibbles (sub-block 2p) and high nibbles (2p+1) into the
// tile at DI. Clobbers Y4, Y5.
#define K4NIBV(p, G, g) \
	VPAND   kv0f<>(SB), G, Y4          \
	VMOVDQU Y4, (256*(2*p)+32*g)(DI)   \
	VPSRLW  $4, G, Y5                  \
	VPAND   kv0f<>(SB), Y5, Y5         \
	VMOVDQU Y5, (256*(2*p+1)+32*g)(DI)

#define K4PAIR8V(p) \
	LOAD8(16+32*p)   \
	TRANSPOSE8       \
	K4NIBV(p, Y0, 0) \
	K4NIBV(p, Y2, 1) \
	K4NIBV(p, Y12, 2) \
	K4NIBV(p, Y14, 3) \
	K4NIBV(p, Y1, 4) \
	K4NIBV(p, Y3, 5) \
	K4NIBV(p, Y13, 6) \
	K4NIBV(p, Y15, 7)

// K4SCALES: the scales and mins of the 8 rows' Q4_K or Q5_K blocks, and
// their d and dmin, into the tile.
#define K4SCALES \
	ROWS8(K4SC, 0)  \
	TRANSPOSE8      \
	STORE8(2048)    \
	ROWS8(K4MIN, 0) \
	TRANSPOSE8      \
	STORE4(2304)    \
	GATHER16(0, X0, Y0) \
	VMOVUPS Y0, 2432(DI) \
	GATHER16(2, X1, Y1) \
	VMOVUPS Y1, 2464(DI)

// func repackQ4_Kx8V(dst *byte, w *byte, rs int, nb int)
//
// repackQ4_Kx8V is repackQ4_Kx8Go (batch_k_amd64.go) in AVX2.
TEXT ·repackQ4_Kx8V(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

rq4kvloop:
	K4PAIR8V(0)
	K4PAIR8V(1)
	K4PAIR8V(2)
	K4PAIR8V(3)
	K4SCALES
	ADDQ $144, SI
	ADDQ $144, R10
	ADDQ $2496, DI
	DECQ CX
	JNZ  rq4kvloop
	VZEROUPPER
	RET

// K5NIBV(p, G, g, SH0, N0, SH1, N1): K4NIBV with the fifth bits of
// sub-blocks 2p (shift SH0 by N0 to bit 4) and 2p+1 (SH1 by N1) from the
// transposed qh in the frame. Clobbers Y4-Y6.
#define K5NIBV(p, G, g, SH0, N0, SH1, N1) \
	VMOVDQU (32*g)(SP), Y6             \
	SH0     $N0, Y6, Y6                \
	VPAND   kv10<>(SB), Y6, Y6         \
	VPAND   kv0f<>(SB), G, Y4          \
	VPOR    Y6, Y4, Y4                 \
	VMOVDQU Y4, (256*(2*p)+32*g)(DI)   \
	VMOVDQU (32*g)(SP), Y6             \
	SH1     $N1, Y6, Y6                \
	VPAND   kv10<>(SB), Y6, Y6         \
	VPSRLW  $4, G, Y5                  \
	VPAND   kv0f<>(SB), Y5, Y5         \
	VPOR    Y6, Y5, Y5                 \
	VMOVDQU Y5, (256*(2*p+1)+32*g)(DI)

#define K5PAIR8V(p, SH0, N0, SH1, N1) \
	LOAD8(48+32*p) \
	TRANSPOSE8     \
	K5NIBV(p, Y0, 0, SH0, N0, SH1, N1) \
	K5NIBV(p, Y2, 1, SH0, N0, SH1, N1) \
	K5NIBV(p, Y12, 2, SH0, N0, SH1, N1) \
	K5NIBV(p, Y14, 3, SH0, N0, SH1, N1) \
	K5NIBV(p, Y1, 4, SH0, N0, SH1, N1) \
	K5NIBV(p, Y3, 5, SH0, N0, SH1, N1) \
	K5NIBV(p, Y13, 6, SH0, N0, SH1, N1) \
	K5NIBV(p, Y15, 7, SH0, N0, SH1, N1)

// func repackQ5_Kx8V(dst *byte, w *byte, rs int, nb int)
//
// repackQ5_Kx8V is repackQ5_Kx8Go (batch_k_amd64.go) in AVX2. Frame: the
// fifth bits of the 8 rows, transposed (8 groups of 32 bytes).
TEXT ·repackQ5_Kx8V(SB), NOSPLIT, $256-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

rq5kvloop:
	LOAD8(16)
	TRANSPOSE8
	VMOVDQU Y0, 0(SP)
	VMOVDQU Y2, 32(SP)
	VMOVDQU Y12, 64(SP)
	VMOVDQU Y14, 96(SP)
	VMOVDQU Y1, 128(SP)
	VMOVDQU Y3, 160(SP)
	VMOVDQU Y13, 192(SP)
	VMOVDQU Y15, 224(SP)
	K5PAIR8V(0, VPSLLW, 4, VPSLLW, 3)
	K5PAIR8V(1, VPSLLW, 2, VPSLLW, 1)
	K5PAIR8V(2, VPSLLW, 0, VPSRLW, 1)
	K5PAIR8V(3, VPSRLW, 2, VPSRLW, 3)
	K4SCALES
	ADDQ $176, SI
	ADDQ $176, R10
	ADDQ $2496, DI
	DECQ CX
	JNZ  rq5kvloop
	VZEROUPPER
	RET

// Q6ROWV(B, loff, qoff, lon, HISH, hin, ML, MH, Y): Y = one chunk of 32
// quants of the row at B: the bytes at loff shifted right by lon, masked
// by ML, with those at qoff (shifted by hin, masked by MH) or'ed in.
// Clobbers Y8.
#define Q6ROWV(B, loff, qoff, lon, HISH, hin, ML, MH, Y) \
	VMOVDQU loff B, Y      \
	VPSRLW  $lon, Y, Y     \
	VPAND   ML, Y, Y       \
	VMOVDQU qoff B, Y8     \
	HISH    $hin, Y8, Y8   \
	VPAND   MH, Y8, Y8     \
	VPOR    Y8, Y, Y

// Q6CHUNKV(c, loff, qoff, lon, HISH, hin, ML, MH): chunk c of the 8 rows,
// transposed into the tile at DI.
#define Q6CHUNKV(c, loff, qoff, lon, HISH, hin, ML, MH) \
	Q6ROWV((SI), loff, qoff, lon, HISH, hin, ML, MH, Y0) \
	Q6ROWV((SI)(R8*1), loff, qoff, lon, HISH, hin, ML, MH, Y1) \
	Q6ROWV((SI)(R8*2), loff, qoff, lon, HISH, hin, ML, MH, Y2) \
	Q6ROWV((SI)(R9*1), loff, qoff, lon, HISH, hin, ML, MH, Y3) \
	Q6ROWV((R10), loff, qoff, lon, HISH, hin, ML, MH, Y4) \
	Q6ROWV((R10)(R8*1), loff, qoff, lon, HISH, hin, ML, MH, Y5) \
	Q6ROWV((R10)(R8*2), loff, qoff, lon, HISH, hin, ML, MH, Y6) \
	Q6ROWV((R10)(R9*1), loff, qoff, lon, HISH, hin, ML, MH, Y7) \
	TRANSPOSE8 \
	STORE8(256*c)

// Q6SCV(B, Y): 8 int8 scales at B as int32.
#define Q6SCV(B, Y) VPMOVSXBD B, Y

// func repackQ6_Kx8V(dst *byte, w *byte, rs int, nb int)
//
// repackQ6_Kx8V is repackQ6_Kx8Go (batch_k_amd64.go) in AVX2.
TEXT ·repackQ6_Kx8V(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

rq6kvloop:
	Q6CHUNKV(0, 0, 128, 0, VPSLLW, 4, kv0f<>(SB), kv30<>(SB))
	Q6CHUNKV(1, 32, 128, 0, VPSLLW, 2, kv0f<>(SB), kv30<>(SB))
	Q6CHUNKV(2, 0, 128, 4, VPSLLW, 0, kv0f<>(SB), kv30<>(SB))
	Q6CHUNKV(3, 32, 128, 4, VPSRLW, 2, kv0f<>(SB), kv30<>(SB))
	Q6CHUNKV(4, 64, 160, 0, VPSLLW, 4, kv0f<>(SB), kv30<>(SB))
	Q6CHUNKV(5, 96, 160, 0, VPSLLW, 2, kv0f<>(SB), kv30<>(SB))
	Q6CHUNKV(6, 64, 160, 4, VPSLLW, 0, kv0f<>(SB), kv30<>(SB))
	Q6CHUNKV(7, 96, 160, 4, VPSRLW, 2, kv0f<>(SB), kv30<>(SB))
	ROWS8(Q6SCV, 192)
	TRANSPOSE8
	STORE8(2048)
	ROWS8(Q6SCV, 200)
	TRANSPOSE8
	STORE8(2304)
	GATHER16(208, X0, Y0)
	VMOVUPS Y0, 2560(DI)
	ADDQ $210, SI
	ADDQ $210, R10
	ADDQ $2592, DI
	DECQ CX
	JNZ  rq6kvloop
	VZEROUPPER
	RET

// IQ4ROWV(B, j, Y): the 32 indices of sub-block j of the row at B in
// element order (low nibbles, then high; not yet masked). Clobbers X8.
#define IQ4ROWV(B, j, Y) \
	VMOVDQU     (8+16*j) B, X8 \
	VINSERTI128 $1, X8, Y8, Y  \
	VPSRLW      $4, Y, Y       \
	VINSERTI128 $0, X8, Y, Y

// IQ4LUTV(G, off): the group vector G as levels plus 128 into the tile at
// DI+off (Y5 = the level table). Clobbers Y4.
#define IQ4LUTV(G, off) \
	VPAND   kv0f<>(SB), G, Y4 \
	VPSHUFB Y4, Y5, Y4        \
	VMOVDQU Y4, off(DI)

#define IQ4CHUNKV(j) \
	IQ4ROWV((SI), j, Y0) \
	IQ4ROWV((SI)(R8*1), j, Y1) \
	IQ4ROWV((SI)(R8*2), j, Y2) \
	IQ4ROWV((SI)(R9*1), j, Y3) \
	IQ4ROWV((R10), j, Y4) \
	IQ4ROWV((R10)(R8*1), j, Y5) \
	IQ4ROWV((R10)(R8*2), j, Y6) \
	IQ4ROWV((R10)(R9*1), j, Y7) \
	TRANSPOSE8 \
	VMOVDQU kviq4<>(SB), Y5 \
	IQ4LUTV(Y0, (256*j+0)) \
	IQ4LUTV(Y2, (256*j+32)) \
	IQ4LUTV(Y12, (256*j+64)) \
	IQ4LUTV(Y14, (256*j+96)) \
	IQ4LUTV(Y1, (256*j+128)) \
	IQ4LUTV(Y3, (256*j+160)) \
	IQ4LUTV(Y13, (256*j+192)) \
	IQ4LUTV(Y15, (256*j+224))

// IQ4SCV(B, Y): the 8 scales of the row at B minus 32, as int32.
// Clobbers Y8.
#define IQ4SCV(B, Y) \
	VPBROADCASTD 4 B, Y                \
	VPSRLVD      kviq4L<>(SB), Y, Y    \
	VPAND        kv15d<>(SB), Y, Y     \
	VPBROADCASTW 2 B, Y8               \
	VPSRLVD      kviq4H<>(SB), Y8, Y8  \
	VPAND        kv3d<>(SB), Y8, Y8    \
	VPSLLD       $4, Y8, Y8            \
	VPOR         Y8, Y, Y              \
	VPSUBD       kv32d<>(SB), Y, Y

// func repackIQ4_XSx8V(dst *byte, w *byte, rs int, nb int)
//
// repackIQ4_XSx8V is repackIQ4_XSx8Go (batch_k_amd64.go) in AVX2.
TEXT ·repackIQ4_XSx8V(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

riq4vloop:
	IQ4CHUNKV(0)
	IQ4CHUNKV(1)
	IQ4CHUNKV(2)
	IQ4CHUNKV(3)
	IQ4CHUNKV(4)
	IQ4CHUNKV(5)
	IQ4CHUNKV(6)
	IQ4CHUNKV(7)
	IQ4SCV((SI), Y0)
	IQ4SCV((SI)(R8*1), Y1)
	IQ4SCV((SI)(R8*2), Y2)
	IQ4SCV((SI)(R9*1), Y3)
	IQ4SCV((R10), Y4)
	IQ4SCV((R10)(R8*1), Y5)
	IQ4SCV((R10)(R8*2), Y6)
	IQ4SCV((R10)(R9*1), Y7)
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
	JNZ  riq4vloop
	VZEROUPPER
	RET

// Q3SCV(B, lon, SH, Y): 8 of the 16 scales of the row at B minus 32, as
// int32: low 4 bits from the bytes at 96 (shifted right by lon), high 2
// bits from the dword at 104 (variable shifts SH). Clobbers Y8.
#define Q3SCV(B, lon, SH, Y) \
	VPMOVZXBD    96 B, Y             \
	VPSRLD       $lon, Y, Y          \
	VPAND        kv15d<>(SB), Y, Y   \
	VPBROADCASTD 104 B, Y8           \
	VPSRLVD      SH, Y8, Y8          \
	VPAND        kv3d<>(SB), Y8, Y8  \
	VPSLLD       $4, Y8, Y8          \
	VPOR         Y8, Y, Y            \
	VPSUBD       kv32d<>(SB), Y, Y

#define Q3SC8V(lon, SH) \
	Q3SCV((SI), lon, SH, Y0) \
	Q3SCV((SI)(R8*1), lon, SH, Y1) \
	Q3SCV((SI)(R8*2), lon, SH, Y2) \
	Q3SCV((SI)(R9*1), lon, SH, Y3) \
	Q3SCV((R10), lon, SH, Y4) \
	Q3SCV((R10)(R8*1), lon, SH, Y5) \
	Q3SCV((R10)(R8*2), lon, SH, Y6) \
	Q3SCV((R10)(R9*1), lon, SH, Y7)

// func repackQ3_Kx8V(dst *byte, w *byte, rs int, nb int)
//
// repackQ3_Kx8V is repackQ3_Kx8Go (batch_k_amd64.go) in AVX2.
TEXT ·repackQ3_Kx8V(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

rq3kvloop:
	Q6CHUNKV(0, 32, 0, 0, VPSLLW, 2, kv03<>(SB), kv04<>(SB))
	Q6CHUNKV(1, 32, 0, 2, VPSLLW, 1, kv03<>(SB), kv04<>(SB))
	Q6CHUNKV(2, 32, 0, 4, VPSLLW, 0, kv03<>(SB), kv04<>(SB))
	Q6CHUNKV(3, 32, 0, 6, VPSRLW, 1, kv03<>(SB), kv04<>(SB))
	Q6CHUNKV(4, 64, 0, 0, VPSRLW, 2, kv03<>(SB), kv04<>(SB))
	Q6CHUNKV(5, 64, 0, 2, VPSRLW, 3, kv03<>(SB), kv04<>(SB))
	Q6CHUNKV(6, 64, 0, 4, VPSRLW, 4, kv03<>(SB), kv04<>(SB))
	Q6CHUNKV(7, 64, 0, 6, VPSRLW, 5, kv03<>(SB), kv04<>(SB))
	Q3SC8V(0, kvq3L<>(SB))
	TRANSPOSE8
	STORE8(2048)
	Q3SC8V(4, kvq3H<>(SB))
	TRANSPOSE8
	STORE8(2304)
	GATHER16(108, X0, Y0)
	VMOVUPS Y0, 2560(DI)
	ADDQ $110, SI
	ADDQ $110, R10
	ADDQ $2592, DI
	DECQ CX
	JNZ  rq3kvloop
	VZEROUPPER
	RET

// Q2SCV(B, Y): 8 scales at B (low nibbles) as int32.
#define Q2SCV(B, Y) \
	VPMOVZXBD B, Y             \
	VPAND     kv15d<>(SB), Y, Y

// Q2MINV(B, Y): the 16 mins at B (high nibbles) as int16.
#define Q2MINV(B, Y) \
	VPMOVZXBW B, Y   \
	VPSRLW    $4, Y, Y

// func repackQ2_Kx8V(dst *byte, w *byte, rs int, nb int)
//
// repackQ2_Kx8V is repackQ2_Kx8Go (batch_k_amd64.go) in AVX2.
TEXT ·repackQ2_Kx8V(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rs+16(FP), R8
	MOVQ nb+24(FP), CX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

rq2kvloop:
	Q6CHUNKV(0, 16, 16, 0, VPSLLW, 0, kv03<>(SB), kvz<>(SB))
	Q6CHUNKV(1, 16, 16, 2, VPSLLW, 0, kv03<>(SB), kvz<>(SB))
	Q6CHUNKV(2, 16, 16, 4, VPSLLW, 0, kv03<>(SB), kvz<>(SB))
	Q6CHUNKV(3, 16, 16, 6, VPSLLW, 0, kv03<>(SB), kvz<>(SB))
	Q6CHUNKV(4, 48, 48, 0, VPSLLW, 0, kv03<>(SB), kvz<>(SB))
	Q6CHUNKV(5, 48, 48, 2, VPSLLW, 0, kv03<>(SB), kvz<>(SB))
	Q6CHUNKV(6, 48, 48, 4, VPSLLW, 0, kv03<>(SB), kvz<>(SB))
	Q6CHUNKV(7, 48, 48, 6, VPSLLW, 0, kv03<>(SB), kvz<>(SB))
	ROWS8(Q2SCV, 0)
	TRANSPOSE8
	STORE8(2048)
	ROWS8(Q2SCV, 8)
	TRANSPOSE8
	STORE8(2304)
	ROWS8(Q2MINV, 0)
	TRANSPOSE8
	STORE8(2560)
	GATHER16(80, X0, Y0)
	VMOVUPS Y0, 2816(DI)
	GATHER16(82, X1, Y1)
	VMOVUPS Y1, 2848(DI)
	ADDQ $84, SI
	ADDQ $84, R10
	ADDQ $2880, DI
	DECQ CX
	JNZ  rq2kvloop
	VZEROUPPER
	RET

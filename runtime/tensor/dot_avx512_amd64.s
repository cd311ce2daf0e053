//go:build !purego

#include "textflag.h"

DATA k4scIdx<>+0(SB)/2, $0
DATA k4scIdx<>+2(SB)/2, $0
DATA k4scIdx<>+4(SB)/2, $0
DATA k4scIdx<>+6(SB)/2, $0
DATA k4scIdx<>+8(SB)/2, $0
DATA k4scIdx<>+10(SB)/2, $0
DATA k4scIdx<>+12(SB)/2, $0
DATA k4scIdx<>+14(SB)/2, $0
DATA k4scIdx<>+16(SB)/2, $0
DATA k4scIdx<>+18(SB)/2, $0
DATA k4scIdx<>+20(SB)/2, $0
DATA k4scIdx<>+22(SB)/2, $0
DATA k4scIdx<>+24(SB)/2, $0
DATA k4scIdx<>+26(SB)/2, $0
DATA k4scIdx<>+28(SB)/2, $0
DATA k4scIdx<>+30(SB)/2, $0
DATA k4scIdx<>+32(SB)/2, $1
DATA k4scIdx<>+34(SB)/2, $1
DATA k4scIdx<>+36(SB)/2, $1
DATA k4scIdx<>+38(SB)/2, $1
DATA k4scIdx<>+40(SB)/2, $1
DATA k4scIdx<>+42(SB)/2, $1
DATA k4scIdx<>+44(SB)/2, $1
DATA k4scIdx<>+46(SB)/2, $1
DATA k4scIdx<>+48(SB)/2, $1
DATA k4scIdx<>+50(SB)/2, $1
DATA k4scIdx<>+52(SB)/2, $1
DATA k4scIdx<>+54(SB)/2, $1
DATA k4scIdx<>+56(SB)/2, $1
DATA k4scIdx<>+58(SB)/2, $1
DATA k4scIdx<>+60(SB)/2, $1
DATA k4scIdx<>+62(SB)/2, $1
DATA k4scIdx<>+64(SB)/2, $2
DATA k4scIdx<>+66(SB)/2, $2
DATA k4scIdx<>+68(SB)/2, $2
DATA k4scIdx<>+70(SB)/2, $2
DATA k4scIdx<>+72(SB)/2, $2
DATA k4scIdx<>+74(SB)/2, $2
DATA k4scIdx<>+76(SB)/2, $2
DATA k4scIdx<>+78(SB)/2, $2
DATA k4scIdx<>+80(SB)/2, $2
DATA k4scIdx<>+82(SB)/2, $2
DATA k4scIdx<>+84(SB)/2, $2
DATA k4scIdx<>+86(SB)/2, $2
DATA k4scIdx<>+88(SB)/2, $2
DATA k4scIdx<>+90(SB)/2, $2
DATA k4scIdx<>+92(SB)/2, $2
DATA k4scIdx<>+94(SB)/2, $2
DATA k4scIdx<>+96(SB)/2, $3
DATA k4scIdx<>+98(SB)/2, $3
DATA k4scIdx<>+100(SB)/2, $3
DATA k4scIdx<>+102(SB)/2, $3
DATA k4scIdx<>+104(SB)/2, $3
DATA k4scIdx<>+106(SB)/2, $3
DATA k4scIdx<>+108(SB)/2, $3
DATA k4scIdx<>+110(SB)/2, $3
DATA k4scIdx<>+112(SB)/2, $3
DATA k4scIdx<>+114(SB)/2, $3
DATA k4scIdx<>+116(SB)/2, $3
DATA k4scIdx<>+118(SB)/2, $3
DATA k4scIdx<>+120(SB)/2, $3
DATA k4scIdx<>+122(SB)/2, $3
DATA k4scIdx<>+124(SB)/2, $3
DATA k4scIdx<>+126(SB)/2, $3
DATA k4scIdx<>+128(SB)/2, $4
DATA k4scIdx<>+130(SB)/2, $4
DATA k4scIdx<>+132(SB)/2, $4
DATA k4scIdx<>+134(SB)/2, $4
DATA k4scIdx<>+136(SB)/2, $4
DATA k4scIdx<>+138(SB)/2, $4
DATA k4scIdx<>+140(SB)/2, $4
DATA k4scIdx<>+142(SB)/2, $4
DATA k4scIdx<>+144(SB)/2, $4
DATA k4scIdx<>+146(SB)/2, $4
DATA k4scIdx<>+148(SB)/2, $4
DATA k4scIdx<>+150(SB)/2, $4
DATA k4scIdx<>+152(SB)/2, $4
DATA k4scIdx<>+154(SB)/2, $4
DATA k4scIdx<>+156(SB)/2, $4
DATA k4scIdx<>+158(SB)/2, $4
DATA k4scIdx<>+160(SB)/2, $5
DATA k4scIdx<>+162(SB)/2, $5
DATA k4scIdx<>+164(SB)/2, $5
DATA k4scIdx<>+166(SB)/2, $5
DATA k4scIdx<>+168(SB)/2, $5
DATA k4scIdx<>+170(SB)/2, $5
DATA k4scIdx<>+172(SB)/2, $5
DATA k4scIdx<>+174(SB)/2, $5
DATA k4scIdx<>+176(SB)/2, $5
DATA k4scIdx<>+178(SB)/2, $5
DATA k4scIdx<>+180(SB)/2, $5
DATA k4scIdx<>+182(SB)/2, $5
DATA k4scIdx<>+184(SB)/2, $5
DATA k4scIdx<>+186(SB)/2, $5
DATA k4scIdx<>+188(SB)/2, $5
DATA k4scIdx<>+190(SB)/2, $5
DATA k4scIdx<>+192(SB)/2, $6
DATA k4scIdx<>+194(SB)/2, $6
DATA k4scIdx<>+196(SB)/2, $6
DATA k4scIdx<>+198(SB)/2, $6
DATA k4scIdx<>+200(SB)/2, $6
DATA k4scIdx<>+202(SB)/2, $6
DATA k4scIdx<>+204(SB)/2, $6
DATA k4scIdx<>+206(SB)/2, $6
DATA k4scIdx<>+208(SB)/2, $6
DATA k4scIdx<>+210(SB)/2, $6
DATA k4scIdx<>+212(SB)/2, $6
DATA k4scIdx<>+214(SB)/2, $6
DATA k4scIdx<>+216(SB)/2, $6
DATA k4scIdx<>+218(SB)/2, $6
DATA k4scIdx<>+220(SB)/2, $6
DATA k4scIdx<>+222(SB)/2, $6
DATA k4scIdx<>+224(SB)/2, $7
DATA k4scIdx<>+226(SB)/2, $7
DATA k4scIdx<>+228(SB)/2, $7
DATA k4scIdx<>+230(SB)/2, $7
DATA k4scIdx<>+232(SB)/2, $7
DATA k4scIdx<>+234(SB)/2, $7
DATA k4scIdx<>+236(SB)/2, $7
DATA k4scIdx<>+238(SB)/2, $7
DATA k4scIdx<>+240(SB)/2, $7
DATA k4scIdx<>+242(SB)/2, $7
DATA k4scIdx<>+244(SB)/2, $7
DATA k4scIdx<>+246(SB)/2, $7
DATA k4scIdx<>+248(SB)/2, $7
DATA k4scIdx<>+250(SB)/2, $7
DATA k4scIdx<>+252(SB)/2, $7
DATA k4scIdx<>+254(SB)/2, $7
GLOBL k4scIdx<>(SB), RODATA|NOPTR, $256

DATA k4minIdx<>+0(SB)/2, $8
DATA k4minIdx<>+2(SB)/2, $8
DATA k4minIdx<>+4(SB)/2, $9
DATA k4minIdx<>+6(SB)/2, $9
DATA k4minIdx<>+8(SB)/2, $10
DATA k4minIdx<>+10(SB)/2, $10
DATA k4minIdx<>+12(SB)/2, $11
DATA k4minIdx<>+14(SB)/2, $11
DATA k4minIdx<>+16(SB)/2, $12
DATA k4minIdx<>+18(SB)/2, $12
DATA k4minIdx<>+20(SB)/2, $13
DATA k4minIdx<>+22(SB)/2, $13
DATA k4minIdx<>+24(SB)/2, $14
DATA k4minIdx<>+26(SB)/2, $14
DATA k4minIdx<>+28(SB)/2, $15
DATA k4minIdx<>+30(SB)/2, $15
GLOBL k4minIdx<>(SB), RODATA|NOPTR, $32

DATA k4shift<>+0(SB)/2, $0
DATA k4shift<>+2(SB)/2, $0
DATA k4shift<>+4(SB)/2, $0
DATA k4shift<>+6(SB)/2, $0
DATA k4shift<>+8(SB)/2, $0
DATA k4shift<>+10(SB)/2, $0
DATA k4shift<>+12(SB)/2, $0
DATA k4shift<>+14(SB)/2, $0
DATA k4shift<>+16(SB)/2, $0
DATA k4shift<>+18(SB)/2, $0
DATA k4shift<>+20(SB)/2, $0
DATA k4shift<>+22(SB)/2, $0
DATA k4shift<>+24(SB)/2, $0
DATA k4shift<>+26(SB)/2, $0
DATA k4shift<>+28(SB)/2, $0
DATA k4shift<>+30(SB)/2, $0
DATA k4shift<>+32(SB)/2, $4
DATA k4shift<>+34(SB)/2, $4
DATA k4shift<>+36(SB)/2, $4
DATA k4shift<>+38(SB)/2, $4
DATA k4shift<>+40(SB)/2, $4
DATA k4shift<>+42(SB)/2, $4
DATA k4shift<>+44(SB)/2, $4
DATA k4shift<>+46(SB)/2, $4
DATA k4shift<>+48(SB)/2, $4
DATA k4shift<>+50(SB)/2, $4
DATA k4shift<>+52(SB)/2, $4
DATA k4shift<>+54(SB)/2, $4
DATA k4shift<>+56(SB)/2, $4
DATA k4shift<>+58(SB)/2, $4
DATA k4shift<>+60(SB)/2, $4
DATA k4shift<>+62(SB)/2, $4
GLOBL k4shift<>(SB), RODATA|NOPTR, $64

// AVX-512 kernels (F, BW, VL and VNNI). Each computes exactly what its
// generic namesake in dot_generic.go computes: the integer lane sums are
// exact however they are formed, so only the float steps (one FMA per lane
// and block, the same reduction) must follow the reference, and they do,
// in 8-lane registers as the AVX2 kernels. What changes is how the integer
// sums are formed: 64 bytes per instruction, VPDPWSSD (multiply int16
// pairs and accumulate, one instruction where AVX2 needs VPMADDWD and
// VPADDD) and VPDPBUSD (bytes straight to int32 lanes).

// K4ZCONST loads the Q4_K constants: Z31 = 0x0f bytes, Z30 = the nibble
// shifts (0 for the low 32 bytes, 4 for the high), Z26-Z29 the scale
// permutations of the four pairs of sub-blocks, Y25 the mins' (each min
// twice, for the pairs of 16-sums), X21-X24 the scale unpacking masks.
#define K4ZCONST \
	MOVL            $0x0f0f0f0f, AX     \
	VPBROADCASTD    AX, Z31             \
	VMOVDQU64       k4shift<>(SB), Z30  \
	VMOVDQU64       k4scIdx<>+0(SB), Z26   \
	VMOVDQU64       k4scIdx<>+64(SB), Z27  \
	VMOVDQU64       k4scIdx<>+128(SB), Z28 \
	VMOVDQU64       k4scIdx<>+192(SB), Z29 \
	VMOVDQU64       k4minIdx<>(SB), Y25    \
	MOVL            $0x3f3f3f3f, AX     \
	VPBROADCASTD    AX, X24             \
	MOVL            $0x03030303, AX     \
	VPBROADCASTD    AX, X22             \
	MOVQ            $0x0000000400000000, AX \
	VMOVQ           AX, X21

// K4ZSCALES unpacks the 12 scale bytes of the Q4_K/Q5_K block at SI+4 in
// vector registers (ggml's kmask arithmetic on the three dwords a, b, c:
// scales 0-3 = a&0x3f, 4-7 = c&15 | (a>>6&3)<<4; mins 0-3 = b&0x3f,
// 4-7 = c>>4&15 | (b>>6&3)<<4) and sets Z16-Z19 to the words
// [scale 2g x16 | scale 2g+1 x16] for g = 0..3 and Y12 to the 16 words
// [min 0, min 0, min 1, min 1, ..., min 7, min 7]. Clobbers X6, X7, X13, X14.
#define K4ZSCALES \
	VMOVDQU    4(SI), X6          \
	VPANDD     X24, X6, X13       \
	VPSHUFD    $0xaa, X6, X14     \
	VPSRLVD    X21, X14, X14      \
	VPANDD     X31, X14, X14      \
	VPSRLD     $6, X6, X6         \
	VPANDD     X22, X6, X6        \
	VPSLLD     $4, X6, X6         \
	VPORD      X6, X14, X14       \
	VPUNPCKLDQ X14, X13, X13      \
	VPMOVZXBW  X13, Y7            \
	VPERMW     Z7, Z26, Z16       \
	VPERMW     Z7, Z27, Z17       \
	VPERMW     Z7, Z28, Z18       \
	VPERMW     Z7, Z29, Z19       \
	VPERMW     Y7, Y25, Y12

// K4ZW(qoff): Z4 = the 64 nibbles of the 32 quant bytes at SI+qoff, low
// nibbles in the low half (sub-block 2g), high nibbles in the high half
// (sub-block 2g+1), so that int32 lane l of a product holds elements
// 4l..4l+3 of sub-block 2g (l < 8) or 4(l-8).. of 2g+1.
#define K4ZW(qoff) \
	VBROADCASTI64X4 qoff(SI), Z4 \
	VPSRLVW         Z30, Z4, Z4  \
	VPANDD          Z31, Z4, Z4

// K4ZFIRST(X, SC, ACC) / K4ZNEXT: ACC = / += the scaled lane sums of the
// nibbles in Z4 with the 64 activation bytes at X (scales SC). The pair
// sums of VPMADDUBSW cannot saturate (15 * 128 * 2 < 32768).
#define K4ZFIRST(X, SC, ACC) \
	VPMADDUBSW X, Z4, Z5   \
	VPMADDWD   SC, Z5, ACC

#define K4ZNEXT(X, SC, ACC) \
	VPMADDUBSW X, Z4, Z5   \
	VPDPWSSD   SC, Z5, ACC

// K4ZFOLD(Z, Y, F, DD): the super-block's 8 lane sums (the two halves of
// Z added) into the float accumulator F with the scale product at DD:
// F = fma(float(sum), dd, F). Clobbers Y5.
#define K4ZFOLD(Z, Y, F, DD) \
	VEXTRACTI64X4 $1, Z, Y5 \
	VPADDD        Y5, Y, Y  \
	VCVTDQ2PS     Y, Y      \
	VBROADCASTSS  DD, Y5    \
	VFMADD231PS   Y5, Y, F

// HSUMZ(Y, X, T): X[0] = hsum8 of Y's lanes (T is clobbered).
#define HSUMZ(Y, X, T) \
	VEXTRACTF128 $1, Y, T \
	VADDPS       T, X, X  \
	VMOVHLPS     X, X, T  \
	VADDPS       T, X, X  \
	VMOVSHDUP    X, T     \
	VADDSS       T, X, X

// func dotQ4_KAVX512(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KAVX512(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	K4ZCONST
	VXORPS Y8, Y8, Y8
	VXORPS X15, X15, X15

q4kzloop:
	PREFETCHT0 (4096)(SI)
	PREFETCHT0 (4160)(SI)
	PREFETCHT0 (4224)(SI)
	K4ZSCALES
	// X13 = d * fp16 d, X14 = d * fp16 dmin (lane 0).
	MOVL         (SI), AX
	VMOVD        AX, X13
	VCVTPH2PS    X13, X13
	VMULPS.BCST  (DX), X13, X13
	VMOVSHDUP    X13, X14
	K4ZW(16)
	K4ZFIRST((DI), Z16, Z0)
	K4ZW(48)
	K4ZNEXT(64(DI), Z17, Z0)
	K4ZW(80)
	K4ZNEXT(128(DI), Z18, Z0)
	K4ZW(112)
	K4ZNEXT(192(DI), Z19, Z0)
	// The mins term: sum_j min j * (16-sum 2j + 16-sum 2j+1), as a scalar.
	VPMADDWD     (BX), Y12, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VPSHUFD      $0x4e, X4, X5
	VPADDD       X5, X4, X4
	VPSHUFD      $0xb1, X4, X5
	VPADDD       X5, X4, X4
	VCVTDQ2PS    X4, X4
	VFMADD231SS  X14, X4, X15
	VEXTRACTI64X4 $1, Z0, Y5
	VPADDD        Y5, Y0, Y0
	VCVTDQ2PS     Y0, Y0
	VBROADCASTSS  X13, Y5
	VFMADD231PS   Y5, Y0, Y8
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q4kzloop

	HSUMZ(Y8, X8, X1)
	VSUBSS X15, X8, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// The four-vector Q4_K kernel (prefill): per super-block the nibbles,
// scales and mins are unpacked once for four vectors (quants x + t*xs,
// scales d + t*ds, 16-sums bsums + t*bs; byte strides); per vector the
// same arithmetic as dotQ4_KAVX512. The four mins terms are reduced side
// by side in the four lanes of X15. Frame: 0 the four d[t] * fp16 d.
//
// func dotQ4_Kx4AVX512(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)
TEXT ·dotQ4_Kx4AVX512(SB), NOSPLIT, $16-72
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ xs+40(FP), R8
	LEAQ (R8)(R8*2), R11
	MOVQ ds+48(FP), R9
	LEAQ (R9)(R9*2), R12
	MOVQ bs+56(FP), R10
	LEAQ (R10)(R10*2), R13
	K4ZCONST
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS X15, X15, X15

q4kzx4loop:
	K4ZSCALES
	// 0(SP) = the four d[t] * fp16 d, X13 = the four d[t] * fp16 dmin.
	MOVL         (SI), AX
	VMOVD        AX, X13
	VCVTPH2PS    X13, X13
	VBROADCASTSS X13, X14
	VMOVSHDUP    X13, X13
	VBROADCASTSS X13, X13
	VMOVSS       (DX), X6
	VINSERTPS    $0x10, (DX)(R9*1), X6, X6
	VINSERTPS    $0x20, (DX)(R9*2), X6, X6
	VINSERTPS    $0x30, (DX)(R12*1), X6, X6
	VMULPS       X6, X13, X13
	VMULPS       X6, X14, X6
	VMOVUPS      X6, 0(SP)
	K4ZW(16)
	K4ZFIRST((DI), Z16, Z0)
	K4ZFIRST((DI)(R8*1), Z16, Z1)
	K4ZFIRST((DI)(R8*2), Z16, Z2)
	K4ZFIRST((DI)(R11*1), Z16, Z3)
	K4ZW(48)
	K4ZNEXT(64(DI), Z17, Z0)
	K4ZNEXT(64(DI)(R8*1), Z17, Z1)
	K4ZNEXT(64(DI)(R8*2), Z17, Z2)
	K4ZNEXT(64(DI)(R11*1), Z17, Z3)
	K4ZW(80)
	K4ZNEXT(128(DI), Z18, Z0)
	K4ZNEXT(128(DI)(R8*1), Z18, Z1)
	K4ZNEXT(128(DI)(R8*2), Z18, Z2)
	K4ZNEXT(128(DI)(R11*1), Z18, Z3)
	K4ZW(112)
	K4ZNEXT(192(DI), Z19, Z0)
	K4ZNEXT(192(DI)(R8*1), Z19, Z1)
	K4ZNEXT(192(DI)(R8*2), Z19, Z2)
	K4ZNEXT(192(DI)(R11*1), Z19, Z3)
	// The mins terms of the four vectors, reduced side by side.
	VPMADDWD     (BX), Y12, Y4
	VPMADDWD     (BX)(R10*1), Y12, Y5
	VPHADDD      Y5, Y4, Y4
	VPMADDWD     (BX)(R10*2), Y12, Y5
	VPMADDWD     (BX)(R13*1), Y12, Y6
	VPHADDD      Y6, Y5, Y5
	VPHADDD      Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VCVTDQ2PS    X4, X4
	VFMADD231PS  X13, X4, X15
	K4ZFOLD(Z0, Y0, Y8, 0(SP))
	K4ZFOLD(Z1, Y1, Y9, 4(SP))
	K4ZFOLD(Z2, Y2, Y10, 8(SP))
	K4ZFOLD(Z3, Y3, Y11, 12(SP))
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q4kzx4loop

	MOVQ out+64(FP), BX
	HSUMZ(Y8, X8, X1)
	VSUBSS X15, X8, X0
	VMOVSS X0, (BX)
	HSUMZ(Y9, X9, X1)
	VMOVSHDUP X15, X2
	VSUBSS X2, X9, X0
	VMOVSS X0, 4(BX)
	HSUMZ(Y10, X10, X1)
	VMOVHLPS X15, X15, X2
	VSUBSS X2, X10, X0
	VMOVSS X0, 8(BX)
	HSUMZ(Y11, X11, X1)
	VPSHUFD $0xff, X15, X2
	VSUBSS X2, X11, X0
	VMOVSS X0, 12(BX)
	VZEROUPPER
	RET

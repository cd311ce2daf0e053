//go:build !purego

#include "textflag.h"

// quantizeQ8KAVX512 quantizes whole Q8_K blocks of 256 as quantizeQ8KGeneric
// does, sixteen 64-byte registers per block. The generic code takes the
// signed value m of the first element of largest magnitude; here the
// largest positive value is the signed-integer maximum of the float bits
// and the largest-magnitude negative one the unsigned maximum, so m is
// whichever of the two is larger in magnitude. Where they tie (both +a and
// -a present: which element comes first decides), the block holds an Inf
// or NaN, or -127/m overflows (m subnormal), the kernel stops and returns
// the number of blocks done: the Go wrapper quantizes that block and calls
// it again. The quants are round-to-nearest-even (VCVTPS2DQ) of the same
// float32 products, so they match bit for bit; the 16-sums come from VPSADBW of the quants plus 128.

// MAXRED(OP, Z, Y, X, T, R): R = OP-reduction of the 16 dwords of Z.
#define MAXRED(OP, Z, Y, X, TZ, TY, TX, R) \
	VEXTRACTI64X4 $1, Z, TY  \
	OP            TY, Y, Y   \
	VEXTRACTI32X4 $1, Y, TX  \
	OP            TX, X, X   \
	VPSHUFD       $0x4e, X, TX \
	OP            TX, X, X   \
	VPSHUFD       $0xb1, X, TX \
	OP            TX, X, X   \
	VMOVD         X, R

// MAXTREE(OP, D): D (Z16) = OP over Z0-Z15 (Z16-Z23 scratch).
#define MAXTREE(OP) \
	OP Z1, Z0, Z16    \
	OP Z3, Z2, Z17    \
	OP Z5, Z4, Z18    \
	OP Z7, Z6, Z19    \
	OP Z9, Z8, Z20    \
	OP Z11, Z10, Z21  \
	OP Z13, Z12, Z22  \
	OP Z15, Z14, Z23  \
	OP Z17, Z16, Z16  \
	OP Z19, Z18, Z18  \
	OP Z21, Z20, Z20  \
	OP Z23, Z22, Z22  \
	OP Z18, Z16, Z16  \
	OP Z22, Z20, Z20  \
	OP Z20, Z16, Z16

// Q4(a, b, c, d): Za = the int8 quants of Za..Zd (scaled by Z30), 64 bytes.
#define Q4(A, B, C, D, XA, XB, XC, XD, ZA, ZB, ZC, ZD) \
	VMULPS    Z30, ZA, ZA     \
	VMULPS    Z30, ZB, ZB     \
	VMULPS    Z30, ZC, ZC     \
	VMULPS    Z30, ZD, ZD     \
	VCVTPS2DQ ZA, ZA          \
	VCVTPS2DQ ZB, ZB          \
	VCVTPS2DQ ZC, ZC          \
	VCVTPS2DQ ZD, ZD          \
	VPMOVSDB  ZA, XA          \
	VPMOVSDB  ZB, XB          \
	VPMOVSDB  ZC, XC          \
	VPMOVSDB  ZD, XD          \
	VINSERTI32X4 $1, XB, ZA, ZA \
	VINSERTI32X4 $2, XC, ZA, ZA \
	VINSERTI32X4 $3, XD, ZA, ZA

// func quantizeQ8KAVX512(x *float32, q *int8, d *float32, bsums *int16, nb int) int
TEXT ·quantizeQ8KAVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), R10
	MOVQ nb+32(FP), R11
	XORQ R12, R12 // blocks done
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	VPXORD       Z29, Z29, Z29
	MOVL         $2048, AX
	VPBROADCASTW AX, Y28
	VMOVDQU64    permQ8K<>(SB), Y27

q8kloop:
	CMPQ R12, R11
	JGE  q8kdone
	VMOVUPS 0(SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS 128(SI), Z2
	VMOVUPS 192(SI), Z3
	VMOVUPS 256(SI), Z4
	VMOVUPS 320(SI), Z5
	VMOVUPS 384(SI), Z6
	VMOVUPS 448(SI), Z7
	VMOVUPS 512(SI), Z8
	VMOVUPS 576(SI), Z9
	VMOVUPS 640(SI), Z10
	VMOVUPS 704(SI), Z11
	VMOVUPS 768(SI), Z12
	VMOVUPS 832(SI), Z13
	VMOVUPS 896(SI), Z14
	VMOVUPS 960(SI), Z15
	MAXTREE(VPMAXSD)
	MAXRED(VPMAXSD, Z16, Y16, X16, Z17, Y17, X17, AX)
	MAXTREE(VPMAXUD)
	MAXRED(VPMAXUD, Z16, Y16, X16, Z17, Y17, X17, BX)

	// AX: the largest positive magnitude (-1 if none); BX: the largest
	// negative one (-1 if none).
	MOVL   $-1, CX
	TESTL  AX, AX
	CMOVLLT CX, AX
	XORL   $0x80000000, BX
	TESTL  BX, BX
	CMOVLLT CX, BX
	MOVL   AX, R8
	CMPL   BX, R8
	CMOVLGT BX, R8 // R8 = amax bits
	CMPL   R8, $0x7f800000
	JGE    q8kdone // Inf or NaN
	TESTL  R8, R8
	JEQ    q8kzero
	CMPL   AX, BX
	JEQ    q8kdone // +amax and -amax both there
	JGT    q8kpos
	ORL    $0x80000000, R8 // m negative

q8kpos:
	VMOVD   R8, X16           // m
	MOVL    $0xc2fe0000, AX   // -127.0
	VMOVD   AX, X17
	VDIVSS  X16, X17, X18     // iscale = -127 / m
	VMOVD   X18, AX
	ANDL    $0x7fffffff, AX
	CMPL    AX, $0x7f800000
	JGE     q8kdone           // m subnormal: iscale overflows
	MOVL    $0x3f800000, AX   // 1.0
	VMOVD   AX, X17
	VDIVSS  X18, X17, X19     // d = 1 / iscale
	VMOVSS  X19, (DX)
	VBROADCASTSS X18, Z30
	Q4(0, 1, 2, 3, X0, X1, X2, X3, Z0, Z1, Z2, Z3)
	Q4(4, 5, 6, 7, X4, X5, X6, X7, Z4, Z5, Z6, Z7)
	Q4(8, 9, 10, 11, X8, X9, X10, X11, Z8, Z9, Z10, Z11)
	Q4(12, 13, 14, 15, X12, X13, X14, X15, Z12, Z13, Z14, Z15)
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z4, 64(DI)
	VMOVDQU64 Z8, 128(DI)
	VMOVDQU64 Z12, 192(DI)

	// 16-sums: VPSADBW of q+128 gives per qword the sum of 8 bytes; lane L
	// of register k holds group 4k+L. Pairs of qwords summed, the groups
	// come out as [0 4 1 5 2 6 3 7 | 8 12 9 13 10 14 11 15], minus 16*128.
	VPXORD    Z31, Z0, Z0
	VPXORD    Z31, Z4, Z4
	VPXORD    Z31, Z8, Z8
	VPXORD    Z31, Z12, Z12
	VPSADBW   Z29, Z0, Z0
	VPSADBW   Z29, Z4, Z4
	VPSADBW   Z29, Z8, Z8
	VPSADBW   Z29, Z12, Z12
	VPUNPCKLQDQ Z4, Z0, Z16
	VPUNPCKHQDQ Z4, Z0, Z17
	VPADDQ    Z17, Z16, Z16
	VPUNPCKLQDQ Z12, Z8, Z18
	VPUNPCKHQDQ Z12, Z8, Z19
	VPADDQ    Z19, Z18, Z18
	VPMOVQW   Z16, X16
	VPMOVQW   Z18, X18
	VINSERTI32X4 $1, X18, Y16, Y16
	VPSUBW    Y28, Y16, Y16
	VPERMW    Y16, Y27, Y16
	VMOVDQU64 Y16, (R10)

q8knext:
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R10
	INCQ R12
	JMP  q8kloop

q8kzero:
	MOVL      $0, (DX)
	VMOVDQU64 Z29, 0(DI)
	VMOVDQU64 Z29, 64(DI)
	VMOVDQU64 Z29, 128(DI)
	VMOVDQU64 Z29, 192(DI)
	VMOVDQU64 Y29, (R10)
	JMP       q8knext

q8kdone:
	MOVQ R12, ret+40(FP)
	VZEROUPPER
	RET

// permQ8K: for each 16-sum j, its word in the sums as VPSADBW leaves them.
DATA permQ8K<>+0(SB)/2, $0
DATA permQ8K<>+2(SB)/2, $2
DATA permQ8K<>+4(SB)/2, $4
DATA permQ8K<>+6(SB)/2, $6
DATA permQ8K<>+8(SB)/2, $1
DATA permQ8K<>+10(SB)/2, $3
DATA permQ8K<>+12(SB)/2, $5
DATA permQ8K<>+14(SB)/2, $7
DATA permQ8K<>+16(SB)/2, $8
DATA permQ8K<>+18(SB)/2, $10
DATA permQ8K<>+20(SB)/2, $12
DATA permQ8K<>+22(SB)/2, $14
DATA permQ8K<>+24(SB)/2, $9
DATA permQ8K<>+26(SB)/2, $11
DATA permQ8K<>+28(SB)/2, $13
DATA permQ8K<>+30(SB)/2, $15
GLOBL permQ8K<>(SB), RODATA|NOPTR, $32

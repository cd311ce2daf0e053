//go:build !purego

#include "textflag.h"

// The attention kernels (attn.go) in AVX2+FMA+F16C, and AVX-512 forms of
// the two float kernels. Each computes exactly what its generic namesake
// computes, lane for lane and in the same float32 order.

// HSUM(Y, X, T): X[0] = hsum8 of Y's lanes (halves, pairs, the last two);
// T is clobbered.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T \
	VADDPS       T, X, X  \
	VMOVHLPS     X, X, T  \
	VADDPS       T, X, X  \
	VMOVSHDUP    X, T     \
	VADDSS       T, X, X

#define BCAST(val, X, Y) \
	MOVL         val, AX \
	VMOVD        AX, X   \
	VPBROADCASTD X, Y

// func dotRowsAVX2(out, q, rows *float32, n, nrows, stride int)
//
// out[r] = dotVecGeneric(q[:n], row r) for r < nrows (> 0), rows stride
// bytes apart: dotF32AVX2's steps for each row.
//
// A head of 64 keeps the query in registers (Y8-Y15) and reads each row
// once.
TEXT ·dotRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), BX
	MOVQ q+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ n+24(FP), R10
	MOVQ nrows+32(FP), R11
	MOVQ stride+40(FP), R12
	CMPQ R10, $64
	JNE  drrow
	VMOVUPS 0(R8), Y8
	VMOVUPS 32(R8), Y9
	VMOVUPS 64(R8), Y10
	VMOVUPS 96(R8), Y11
	VMOVUPS 128(R8), Y12
	VMOVUPS 160(R8), Y13
	VMOVUPS 192(R8), Y14
	VMOVUPS 224(R8), Y15

dq64row:
	VXORPS      Y0, Y0, Y0
	VXORPS      Y1, Y1, Y1
	VXORPS      Y2, Y2, Y2
	VXORPS      Y3, Y3, Y3
	VFMADD231PS 0(R9), Y8, Y0
	VFMADD231PS 32(R9), Y9, Y1
	VFMADD231PS 64(R9), Y10, Y2
	VFMADD231PS 96(R9), Y11, Y3
	VFMADD231PS 128(R9), Y12, Y0
	VFMADD231PS 160(R9), Y13, Y1
	VFMADD231PS 192(R9), Y14, Y2
	VFMADD231PS 224(R9), Y15, Y3
	VADDPS      Y2, Y0, Y0
	VADDPS      Y3, Y1, Y1
	VADDPS      Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS      X0, (BX)
	ADDQ        $4, BX
	ADDQ        R12, R9
	DECQ        R11
	JNZ         dq64row
	VZEROUPPER
	RET

drrow:
	MOVQ   R9, SI
	MOVQ   R8, DI
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dr32:
	CMPQ        CX, $32
	JLT         drfold
	VMOVUPS     0(SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         dr32

drfold:
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0

dr8:
	CMPQ        CX, $8
	JLT         drtail
	VMOVUPS     0(SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         dr8

drtail:
	HSUM(Y0, X0, X1)
	TESTQ CX, CX
	JZ    drstore

dr1:
	VMOVSS      (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         dr1

drstore:
	VMOVSS X0, (BX)
	ADDQ   $4, BX
	ADDQ   R12, R9
	DECQ   R11
	JNZ    drrow
	VZEROUPPER
	RET

// func axpyRowsAVX2(dst, alpha, rows *float32, n, nrows, stride int)
//
// For r < nrows (> 0): dst[:n] = fma(alpha[r], row r, dst), rows stride
// bytes apart. dst stays in registers 64 elements at a time while the rows
// stream past; each element's chain of FMAs is in row order.
TEXT ·axpyRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ alpha+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ n+24(FP), CX
	MOVQ nrows+32(FP), R11
	MOVQ stride+40(FP), R12

ar64:
	CMPQ    CX, $64
	JLT     ar8
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	MOVQ    R8, AX
	MOVQ    R9, SI
	MOVQ    R11, DX

ar64row:
	VBROADCASTSS (AX), Y8
	VFMADD231PS  0(SI), Y8, Y0
	VFMADD231PS  32(SI), Y8, Y1
	VFMADD231PS  64(SI), Y8, Y2
	VFMADD231PS  96(SI), Y8, Y3
	VFMADD231PS  128(SI), Y8, Y4
	VFMADD231PS  160(SI), Y8, Y5
	VFMADD231PS  192(SI), Y8, Y6
	VFMADD231PS  224(SI), Y8, Y7
	ADDQ         $4, AX
	ADDQ         R12, SI
	DECQ         DX
	JNZ          ar64row
	VMOVUPS      Y0, 0(DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, 64(DI)
	VMOVUPS      Y3, 96(DI)
	VMOVUPS      Y4, 128(DI)
	VMOVUPS      Y5, 160(DI)
	VMOVUPS      Y6, 192(DI)
	VMOVUPS      Y7, 224(DI)
	ADDQ         $256, DI
	ADDQ         $256, R9
	SUBQ         $64, CX
	JMP          ar64

ar8:
	CMPQ    CX, $8
	JLT     ar1
	VMOVUPS (DI), Y0
	MOVQ    R8, AX
	MOVQ    R9, SI
	MOVQ    R11, DX

ar8row:
	VBROADCASTSS (AX), Y8
	VFMADD231PS  (SI), Y8, Y0
	ADDQ         $4, AX
	ADDQ         R12, SI
	DECQ         DX
	JNZ          ar8row
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	ADDQ         $32, R9
	SUBQ         $8, CX
	JMP          ar8

ar1:
	TESTQ  CX, CX
	JZ     ardone
	VMOVSS (DI), X0
	MOVQ   R8, AX
	MOVQ   R9, SI
	MOVQ   R11, DX

ar1row:
	VMOVSS      (AX), X8
	VFMADD231SS (SI), X8, X0
	ADDQ        $4, AX
	ADDQ        R12, SI
	DECQ        DX
	JNZ         ar1row
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	ADDQ        $4, R9
	DECQ        CX
	JMP         ar1

ardone:
	VZEROUPPER
	RET

// func dotRowsAVX512(out, q, rows *float32, n, nrows, stride int)
//
// dotRowsAVX2 in 64-byte registers: Z0 holds accumulators 0 and 1 of the
// generic's four (lanes 0-7, 8-15), Z2 accumulators 2 and 3, so Z0+Z2 is
// acc0+acc2 | acc1+acc3 and adding its halves is the generic's fold.
//
// Heads of 64 and 128 (the common ones) keep the query in registers
// (Z16-Z23) and read each row once.
TEXT ·dotRowsAVX512(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), BX
	MOVQ q+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ n+24(FP), R10
	MOVQ nrows+32(FP), R11
	MOVQ stride+40(FP), R12
	CMPQ R10, $64
	JEQ  zq64
	CMPQ R10, $128
	JEQ  zq128
	JMP  zrrow

zq64:
	VMOVUPS 0(R8), Z16
	VMOVUPS 64(R8), Z17
	VMOVUPS 128(R8), Z18
	VMOVUPS 192(R8), Z19

zq64row:
	VPXORD        Z0, Z0, Z0 // (a product into +0, not VMULPS: -0 products must add to +0 as the generic's do)
	VPXORD        Z2, Z2, Z2
	VFMADD231PS   0(R9), Z16, Z0
	VFMADD231PS   64(R9), Z17, Z2
	VFMADD231PS   128(R9), Z18, Z0
	VFMADD231PS   192(R9), Z19, Z2
	VADDPS        Z2, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          $4, BX
	ADDQ          R12, R9
	DECQ          R11
	JNZ           zq64row
	VZEROUPPER
	RET

zq128:
	VMOVUPS 0(R8), Z16
	VMOVUPS 64(R8), Z17
	VMOVUPS 128(R8), Z18
	VMOVUPS 192(R8), Z19
	VMOVUPS 256(R8), Z20
	VMOVUPS 320(R8), Z21
	VMOVUPS 384(R8), Z22
	VMOVUPS 448(R8), Z23

zq128row:
	VPXORD        Z0, Z0, Z0 // (a product into +0, not VMULPS: -0 products must add to +0 as the generic's do)
	VPXORD        Z2, Z2, Z2
	VFMADD231PS   0(R9), Z16, Z0
	VFMADD231PS   64(R9), Z17, Z2
	VFMADD231PS   128(R9), Z18, Z0
	VFMADD231PS   192(R9), Z19, Z2
	VFMADD231PS   256(R9), Z20, Z0
	VFMADD231PS   320(R9), Z21, Z2
	VFMADD231PS   384(R9), Z22, Z0
	VFMADD231PS   448(R9), Z23, Z2
	VADDPS        Z2, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          $4, BX
	ADDQ          R12, R9
	DECQ          R11
	JNZ           zq128row
	VZEROUPPER
	RET

zrrow:
	MOVQ    R9, SI
	MOVQ    R8, DI
	MOVQ    R10, CX
	VPXORD  Z0, Z0, Z0
	VPXORD  Z2, Z2, Z2

zr32:
	CMPQ        CX, $32
	JLT         zrfold
	VMOVUPS     0(SI), Z4
	VMOVUPS     64(SI), Z6
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z6, Z2
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         zr32

zrfold:
	VADDPS        Z2, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0

zr8:
	CMPQ        CX, $8
	JLT         zrtail
	VMOVUPS     0(SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         zr8

zrtail:
	HSUM(Y0, X0, X1)
	TESTQ CX, CX
	JZ    zrstore

zr1:
	VMOVSS      (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         zr1

zrstore:
	VMOVSS X0, (BX)
	ADDQ   $4, BX
	ADDQ   R12, R9
	DECQ   R11
	JNZ    zrrow
	VZEROUPPER
	RET

// dotRows8Perm puts the scores dotRows8AVX512's reduction leaves at
// element 4j+e (position 4e+j) back in position order.
DATA dotRows8Perm<>+0(SB)/4, $0
DATA dotRows8Perm<>+4(SB)/4, $4
DATA dotRows8Perm<>+8(SB)/4, $8
DATA dotRows8Perm<>+12(SB)/4, $12
DATA dotRows8Perm<>+16(SB)/4, $1
DATA dotRows8Perm<>+20(SB)/4, $5
DATA dotRows8Perm<>+24(SB)/4, $9
DATA dotRows8Perm<>+28(SB)/4, $13
DATA dotRows8Perm<>+32(SB)/4, $2
DATA dotRows8Perm<>+36(SB)/4, $6
DATA dotRows8Perm<>+40(SB)/4, $10
DATA dotRows8Perm<>+44(SB)/4, $14
DATA dotRows8Perm<>+48(SB)/4, $3
DATA dotRows8Perm<>+52(SB)/4, $7
DATA dotRows8Perm<>+56(SB)/4, $11
DATA dotRows8Perm<>+60(SB)/4, $15
GLOBL dotRows8Perm<>(SB), RODATA|NOPTR, $64

// func dotRows8AVX512(out, q, rows *float32, groups int)
//
// dotRowsAVX512 for rows of 8 floats at stride 8 (a head of 8: tiny
// models), 16 rows a group: each row's products land in half a register
// (two rows a register, the query in both halves), and the generic's
// hsum8 (halves, pairs, the last two) runs for 16 rows at once by
// shuffles across registers instead of once a row: lanes l and l+4 of a
// row (VSHUFF32X4), then l and l+2, then the last two (VSHUFPS). Every
// sum pairs the values the generic's does.
TEXT ·dotRows8AVX512(SB), NOSPLIT, $0-32
	MOVQ             out+0(FP), BX
	MOVQ             q+8(FP), R8
	MOVQ             rows+16(FP), SI
	MOVQ             groups+24(FP), CX
	VBROADCASTF32X8  (R8), Z16
	VMOVDQU32        dotRows8Perm<>(SB), Z17

z8group:
	VPXORD      Z0, Z0, Z0 // (products into +0, as the generic's)
	VPXORD      Z1, Z1, Z1
	VPXORD      Z2, Z2, Z2
	VPXORD      Z3, Z3, Z3
	VPXORD      Z4, Z4, Z4
	VPXORD      Z5, Z5, Z5
	VPXORD      Z6, Z6, Z6
	VPXORD      Z7, Z7, Z7
	VFMADD231PS 0(SI), Z16, Z0   // rows 0, 1
	VFMADD231PS 64(SI), Z16, Z1  // rows 2, 3
	VFMADD231PS 128(SI), Z16, Z2
	VFMADD231PS 192(SI), Z16, Z3
	VFMADD231PS 256(SI), Z16, Z4
	VFMADD231PS 320(SI), Z16, Z5
	VFMADD231PS 384(SI), Z16, Z6
	VFMADD231PS 448(SI), Z16, Z7
	// Halves: lanes 0-3 of four rows against their lanes 4-7.
	VSHUFF32X4  $0x88, Z1, Z0, Z8  // rows 0-3, lanes 0-3
	VSHUFF32X4  $0xDD, Z1, Z0, Z9  // rows 0-3, lanes 4-7
	VADDPS      Z9, Z8, Z8
	VSHUFF32X4  $0x88, Z3, Z2, Z10 // rows 4-7
	VSHUFF32X4  $0xDD, Z3, Z2, Z11
	VADDPS      Z11, Z10, Z10
	VSHUFF32X4  $0x88, Z5, Z4, Z12 // rows 8-11
	VSHUFF32X4  $0xDD, Z5, Z4, Z13
	VADDPS      Z13, Z12, Z12
	VSHUFF32X4  $0x88, Z7, Z6, Z14 // rows 12-15
	VSHUFF32X4  $0xDD, Z7, Z6, Z15
	VADDPS      Z15, Z14, Z14
	// Pairs: s0+s2 and s1+s3 (128-bit lane j: rows j and 4+j, then
	// 8+j and 12+j).
	VSHUFPS     $0x44, Z10, Z8, Z0
	VSHUFPS     $0xEE, Z10, Z8, Z1
	VADDPS      Z1, Z0, Z0
	VSHUFPS     $0x44, Z14, Z12, Z2
	VSHUFPS     $0xEE, Z14, Z12, Z3
	VADDPS      Z3, Z2, Z2
	// The last two: element e of lane j is row 4e+j.
	VSHUFPS     $0x88, Z2, Z0, Z4
	VSHUFPS     $0xDD, Z2, Z0, Z5
	VADDPS      Z5, Z4, Z4
	VPERMPS     Z4, Z17, Z4
	VMOVUPS     Z4, (BX)
	ADDQ        $64, BX
	ADDQ        $512, SI
	DECQ        CX
	JNZ         z8group
	VZEROUPPER
	RET

// func axpyRows8x2AVX512(dst0, dst1, alpha0, alpha1, rows *float32, nrows, stride int)
//
// Two chains of 8 in one register: each row broadcast to both halves,
// its weights alpha0[r] (low half) and alpha1[r] (high half).
TEXT ·axpyRows8x2AVX512(SB), NOSPLIT, $0-56
	MOVQ         dst0+0(FP), DI
	MOVQ         dst1+8(FP), R10
	MOVQ         alpha0+16(FP), R8
	MOVQ         alpha1+24(FP), R13
	MOVQ         rows+32(FP), SI
	MOVQ         nrows+40(FP), CX
	MOVQ         stride+48(FP), R12
	VMOVUPS      (DI), Y0
	VINSERTF32X8 $1, (R10), Z0, Z0

z8x2row:
	VBROADCASTSS    (R8), Y1
	VBROADCASTSS    (R13), Y2
	VINSERTF32X8    $1, Y2, Z1, Z1
	VBROADCASTF32X8 (SI), Z2
	VFMADD231PS     Z2, Z1, Z0
	ADDQ            $4, R8
	ADDQ            $4, R13
	ADDQ            R12, SI
	DECQ            CX
	JNZ             z8x2row
	VMOVUPS         Y0, (DI)
	VEXTRACTF32X8   $1, Z0, (R10)
	VZEROUPPER
	RET

// func axpyRows8x4AVX512(p *[16]*float32, rows *float32, nrows, stride int)
//
// axpyRows8x2AVX512 for four pairs at once (the same two query heads of
// four tokens): four chains that do not wait on each other, where one
// pair's chain waits on each fused multiply-add's latency. p holds the
// eight destinations (pair t's at 2t and 2t+1) and then their eight
// weight rows in the same order; row r's weights are at byte 4r of each.
TEXT ·axpyRows8x4AVX512(SB), NOSPLIT, $0-32
	MOVQ          p+0(FP), DI
	MOVQ          0(DI), R8
	MOVQ          8(DI), R9
	VMOVUPS       (R8), Y0
	VINSERTF32X8  $1, (R9), Z0, Z0
	MOVQ          16(DI), R8
	MOVQ          24(DI), R9
	VMOVUPS       (R8), Y1
	VINSERTF32X8  $1, (R9), Z1, Z1
	MOVQ          32(DI), R8
	MOVQ          40(DI), R9
	VMOVUPS       (R8), Y2
	VINSERTF32X8  $1, (R9), Z2, Z2
	MOVQ          48(DI), R8
	MOVQ          56(DI), R9
	VMOVUPS       (R8), Y3
	VINSERTF32X8  $1, (R9), Z3, Z3
	MOVQ          64(DI), R8
	MOVQ          72(DI), R9
	MOVQ          80(DI), R10
	MOVQ          88(DI), R11
	MOVQ          96(DI), R13
	MOVQ          104(DI), R14
	MOVQ          112(DI), AX
	MOVQ          120(DI), BX
	MOVQ          rows+8(FP), SI
	MOVQ          nrows+16(FP), CX
	MOVQ          stride+24(FP), R12
	XORQ          DX, DX
	MOVQ          $0xff00, DI
	KMOVW         DI, K1

z8x4row:
	VBROADCASTF32X8 (SI), Z8
	VBROADCASTSS    (R8)(DX*1), Z9
	VBROADCASTSS    (R9)(DX*1), K1, Z9
	VFMADD231PS     Z8, Z9, Z0
	VBROADCASTSS    (R10)(DX*1), Z10
	VBROADCASTSS    (R11)(DX*1), K1, Z10
	VFMADD231PS     Z8, Z10, Z1
	VBROADCASTSS    (R13)(DX*1), Z11
	VBROADCASTSS    (R14)(DX*1), K1, Z11
	VFMADD231PS     Z8, Z11, Z2
	VBROADCASTSS    (AX)(DX*1), Z12
	VBROADCASTSS    (BX)(DX*1), K1, Z12
	VFMADD231PS     Z8, Z12, Z3
	ADDQ            $4, DX
	ADDQ            R12, SI
	DECQ            CX
	JNZ             z8x4row
	MOVQ            p+0(FP), DI
	MOVQ            0(DI), R8
	MOVQ            8(DI), R9
	VMOVUPS         Y0, (R8)
	VEXTRACTF32X8   $1, Z0, (R9)
	MOVQ            16(DI), R8
	MOVQ            24(DI), R9
	VMOVUPS         Y1, (R8)
	VEXTRACTF32X8   $1, Z1, (R9)
	MOVQ            32(DI), R8
	MOVQ            40(DI), R9
	VMOVUPS         Y2, (R8)
	VEXTRACTF32X8   $1, Z2, (R9)
	MOVQ            48(DI), R8
	MOVQ            56(DI), R9
	VMOVUPS         Y3, (R8)
	VEXTRACTF32X8   $1, Z3, (R9)
	VZEROUPPER
	RET

// func axpyRowsAVX512(dst, alpha, rows *float32, n, nrows, stride int)
//
// axpyRowsAVX2 with dst held 128 elements at a time in eight 64-byte
// registers (a 64-wide head in four); the 8- and 1-element tails as there.
TEXT ·axpyRowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ alpha+8(FP), R8
	MOVQ rows+16(FP), R9
	MOVQ n+24(FP), CX
	MOVQ nrows+32(FP), R11
	MOVQ stride+40(FP), R12

zr128:
	CMPQ    CX, $128
	JLT     zr64
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS 256(DI), Z4
	VMOVUPS 320(DI), Z5
	VMOVUPS 384(DI), Z6
	VMOVUPS 448(DI), Z7
	MOVQ    R8, AX
	MOVQ    R9, SI
	MOVQ    R11, DX

zr128row:
	VBROADCASTSS (AX), Z8
	VFMADD231PS  0(SI), Z8, Z0
	VFMADD231PS  64(SI), Z8, Z1
	VFMADD231PS  128(SI), Z8, Z2
	VFMADD231PS  192(SI), Z8, Z3
	VFMADD231PS  256(SI), Z8, Z4
	VFMADD231PS  320(SI), Z8, Z5
	VFMADD231PS  384(SI), Z8, Z6
	VFMADD231PS  448(SI), Z8, Z7
	ADDQ         $4, AX
	ADDQ         R12, SI
	DECQ         DX
	JNZ          zr128row
	VMOVUPS      Z0, 0(DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	VMOVUPS      Z4, 256(DI)
	VMOVUPS      Z5, 320(DI)
	VMOVUPS      Z6, 384(DI)
	VMOVUPS      Z7, 448(DI)
	ADDQ         $512, DI
	ADDQ         $512, R9
	SUBQ         $128, CX
	JMP          zr128

zr64:
	CMPQ    CX, $64
	JLT     zr8
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	MOVQ    R8, AX
	MOVQ    R9, SI
	MOVQ    R11, DX

zr64row:
	VBROADCASTSS (AX), Z8
	VFMADD231PS  0(SI), Z8, Z0
	VFMADD231PS  64(SI), Z8, Z1
	VFMADD231PS  128(SI), Z8, Z2
	VFMADD231PS  192(SI), Z8, Z3
	ADDQ         $4, AX
	ADDQ         R12, SI
	DECQ         DX
	JNZ          zr64row
	VMOVUPS      Z0, 0(DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	ADDQ         $256, DI
	ADDQ         $256, R9
	SUBQ         $64, CX

zr8:
	CMPQ    CX, $8
	JLT     zr1
	VMOVUPS (DI), Y0
	MOVQ    R8, AX
	MOVQ    R9, SI
	MOVQ    R11, DX

zr8row:
	VBROADCASTSS (AX), Y8
	VFMADD231PS  (SI), Y8, Y0
	ADDQ         $4, AX
	ADDQ         R12, SI
	DECQ         DX
	JNZ          zr8row
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	ADDQ         $32, R9
	SUBQ         $8, CX
	JMP          zr8

zr1:
	TESTQ  CX, CX
	JZ     zrdone
	VMOVSS (DI), X0
	MOVQ   R8, AX
	MOVQ   R9, SI
	MOVQ   R11, DX

zr1row:
	VMOVSS      (AX), X8
	VFMADD231SS (SI), X8, X0
	ADDQ        $4, AX
	ADDQ        R12, SI
	DECQ        DX
	JNZ         zr1row
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	ADDQ        $4, R9
	DECQ        CX
	JMP         zr1

zrdone:
	VZEROUPPER
	RET

// func decodeF16AVX2(dst *float32, src *uint16, n int)
//
// dst[i] = the half src[i] for n (a positive multiple of 8) elements.
TEXT ·decodeF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

h32:
	CMPQ      CX, $32
	JLT       h8
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	JMP       h32

h8:
	TESTQ     CX, CX
	JZ        hdone
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       h8

hdone:
	VZEROUPPER
	RET

// func encodeF16AVX2(dst *uint16, src *float32, n int)
//
// dst[i] = FP32ToFP16(src[i]) for n (a positive multiple of 8) elements:
// VCVTPS2PH with rounding mode 0 rounds to nearest even, overflows to
// ±Inf, keeps subnormals and quiets NaNs keeping the top payload bits, as
// FP32ToFP16 does.
TEXT ·encodeF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

e8:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JNZ       e8
	VZEROUPPER
	RET

// func scaleMaxAVX2(x *float32, scale float32, n int) float32
//
// x[i] *= scale for n (a positive multiple of 8) elements; returns their
// largest (VMAXPS lanes, then the halves, pairs and last two).
TEXT ·scaleMaxAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	VBROADCASTSS scale+8(FP), Y1
	MOVQ         n+16(FP), CX
	VMULPS       (DI), Y1, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	SUBQ         $8, CX
	JZ           smreduce

smloop:
	VMULPS  (DI), Y1, Y2
	VMOVUPS Y2, (DI)
	VMAXPS  Y2, Y0, Y0
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     smloop

smreduce:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func expSubAVX2(x *float32, mx float32, n int) float32
//
// x[i] = expf32(x[i] - mx) for n (a positive multiple of 8) elements;
// returns the sum of the results: lane l of eight float32 accumulators
// sums elements l, l+8, ..., then hsum8. The exponential is swigluAVX2's,
// step for step.
TEXT ·expSubAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	VBROADCASTSS mx+8(FP), Y9
	MOVQ         n+16(FP), CX
	BCAST($0x42b0c0a5, X15, Y15) // 88.3762626647949
	BCAST($0x3fb8aa3b, X14, Y14) // log2(e)
	BCAST($0x3f000000, X13, Y13) // 0.5
	BCAST($0x3f318000, X12, Y12) // C1 = 0.693359375
	BCAST($0xb95e8083, X11, Y11) // C2 = -2.12194440e-4
	BCAST($0x3f800000, X10, Y10) // 1.0
	VXORPS Y8, Y8, Y8            // the sums
	VXORPS Y7, Y7, Y7
	VSUBPS Y15, Y7, Y7           // -88.376

exloop:
	VMOVUPS (DI), Y1
	VSUBPS  Y9, Y1, Y1         // x - mx
	VMINPS  Y15, Y1, Y1
	VMAXPS  Y7, Y1, Y1
	VMOVAPS Y13, Y2
	VFMADD231PS Y14, Y1, Y2    // fx = x*log2e + 0.5
	VROUNDPS $1, Y2, Y2        // floor
	VFNMADD231PS Y12, Y2, Y1   // x -= fx*C1
	VFNMADD231PS Y11, Y2, Y1   // x -= fx*C2
	VMULPS  Y1, Y1, Y3         // z = x*x
	BCAST($0x39506967, X4, Y4) // p0 = 1.9875691500e-4
	BCAST($0x3ab743ce, X5, Y5) // p1 = 1.3981999507e-3
	VFMADD213PS Y5, Y1, Y4     // y = y*x + p1
	BCAST($0x3c088908, X5, Y5) // p2 = 8.3334519073e-3
	VFMADD213PS Y5, Y1, Y4
	BCAST($0x3d2aa9c1, X5, Y5) // p3 = 4.1665795894e-2
	VFMADD213PS Y5, Y1, Y4
	BCAST($0x3e2aaaaa, X5, Y5) // p4 = 1.6666665459e-1
	VFMADD213PS Y5, Y1, Y4
	BCAST($0x3f000000, X5, Y5) // p5 = 5.0000001201e-1
	VFMADD213PS Y5, Y1, Y4
	VFMADD213PS Y1, Y3, Y4     // y = y*z + x
	VADDPS  Y10, Y4, Y4        // + 1
	VCVTPS2DQ Y2, Y2           // n (fx is integral)
	BCAST($0x0000007f, X5, Y5)
	VPADDD  Y5, Y2, Y2
	VPSLLD  $23, Y2, Y2        // 2^n
	VMULPS  Y2, Y4, Y4
	VMOVUPS Y4, (DI)
	VADDPS  Y4, Y8, Y8
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     exloop
	HSUM(Y8, X8, X1)
	VZEROUPPER
	MOVSS   X8, ret+24(FP)
	RET

// EXP8(M, X, F, Z, E): the 8 exponentials of M - Y9 into M and E, as
// expSubAVX2 computes them, with expSubAVX512's constants; X, F, Z
// scratch.
#define EXP8(M, X, F, Z, E) \
	VMOVUPS      M, X \
	VSUBPS       Y9, X, X \
	VMINPS       Y16, X, X \
	VMAXPS       Y17, X, X \
	VMOVAPS      Y18, F \
	VFMADD231PS  Y19, X, F \
	VROUNDPS     $1, F, F \
	VFNMADD231PS Y20, F, X \
	VFNMADD231PS Y21, F, X \
	VMULPS       X, X, Z \
	VMOVAPS      Y23, E \
	VFMADD213PS  Y24, X, E \
	VFMADD213PS  Y25, X, E \
	VFMADD213PS  Y26, X, E \
	VFMADD213PS  Y27, X, E \
	VFMADD213PS  Y18, X, E \
	VFMADD213PS  X, Z, E \
	VADDPS       Y22, E, E \
	VCVTPS2DQ    F, F \
	VPADDD       Y28, F, F \
	VPSLLD       $23, F, F \
	VMULPS       F, E, E \
	VMOVUPS      E, M

// EXP16(M, X, F, Z, E): EXP8 on 16 lanes of ZMM registers, the same
// steps lane for lane (VRNDSCALEPS $1 is VROUNDPS $1: toward -inf), so
// every exponential has EXP8's bits.
#define EXP16(M, X, F, Z, E) \
	VMOVUPS      M, X \
	VSUBPS       Z9, X, X \
	VMINPS       Z16, X, X \
	VMAXPS       Z17, X, X \
	VMOVAPS      Z18, F \
	VFMADD231PS  Z19, X, F \
	VRNDSCALEPS  $1, F, F \
	VFNMADD231PS Z20, F, X \
	VFNMADD231PS Z21, F, X \
	VMULPS       X, X, Z \
	VMOVAPS      Z23, E \
	VFMADD213PS  Z24, X, E \
	VFMADD213PS  Z25, X, E \
	VFMADD213PS  Z26, X, E \
	VFMADD213PS  Z27, X, E \
	VFMADD213PS  Z18, X, E \
	VFMADD213PS  X, Z, E \
	VADDPS       Z22, E, E \
	VCVTPS2DQ    F, F \
	VPADDD       Z28, F, F \
	VPSLLD       $23, F, F \
	VMULPS       F, E, E \
	VMOVUPS      E, M

// BCAST16(val, X, Z): val in every lane of Z.
#define BCAST16(val, X, Z) \
	MOVL         val, AX \
	VMOVD        AX, X   \
	VPBROADCASTD X, Z

// func expSubAVX512(x *float32, mx float32, n int) float32
//
// expSubAVX2 with its constants held in registers (AVX-512's sixteen
// more) and 16 exponentials a round in ZMM registers; each lane's steps
// are those of expSubAVX2 and the sums take the round's two groups of 8
// in order, so every bit is expSubAVX2's.
TEXT ·expSubAVX512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	VBROADCASTSS mx+8(FP), Z9
	MOVQ         n+16(FP), CX
	BCAST16($0x42b0c0a5, X0, Z16) // 88.3762626647949
	VXORPS       Z17, Z17, Z17
	VSUBPS       Z16, Z17, Z17  // -88.376
	BCAST16($0x3f000000, X0, Z18) // 0.5 (and p5's 5.0000001201e-1 rounds to it)
	BCAST16($0x3fb8aa3b, X0, Z19) // log2(e)
	BCAST16($0x3f318000, X0, Z20) // C1 = 0.693359375
	BCAST16($0xb95e8083, X0, Z21) // C2 = -2.12194440e-4
	BCAST16($0x3f800000, X0, Z22) // 1.0
	BCAST16($0x39506967, X0, Z23) // p0 = 1.9875691500e-4
	BCAST16($0x3ab743ce, X0, Z24) // p1 = 1.3981999507e-3
	BCAST16($0x3c088908, X0, Z25) // p2 = 8.3334519073e-3
	BCAST16($0x3d2aa9c1, X0, Z26) // p3 = 4.1665795894e-2
	BCAST16($0x3e2aaaaa, X0, Z27) // p4 = 1.6666665459e-1
	BCAST16($0x0000007f, X0, Z28)
	VXORPS       Y8, Y8, Y8     // the sums

ex2loop:
	CMPQ CX, $16
	JLT  ex2one
	EXP16((DI), Z1, Z2, Z3, Z4)
	VEXTRACTF64X4 $1, Z4, Y14
	VADDPS       Y4, Y8, Y8
	VADDPS       Y14, Y8, Y8
	ADDQ         $64, DI
	SUBQ         $16, CX
	JMP          ex2loop

ex2one:
	TESTQ CX, CX
	JZ    ex2done
	EXP8((DI), Y1, Y2, Y3, Y4)
	VADDPS       Y4, Y8, Y8

ex2done:
	HSUM(Y8, X8, X1)
	VZEROUPPER
	MOVSS   X8, ret+24(FP)
	RET

// func scaleAVX2(x *float32, s float32, n int)
//
// x[i] *= s for n (a positive multiple of 8) elements.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	VBROADCASTSS s+8(FP), Y1
	MOVQ         n+16(FP), CX

scloop:
	VMULPS  (DI), Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     scloop
	VZEROUPPER
	RET

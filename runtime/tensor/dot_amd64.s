//go:build !purego

#include "textflag.h"
#include "vnni_amd64.h"
#include "ired_amd64.h"

// AVX2+FMA dot products of weight rows with activations. Each routine
// computes exactly what its generic namesake in dot_generic.go computes:
// eight int32 lanes per 32 elements (lane l sums elements 4l..4l+3, via
// VPMADDUBSW then VPMADDWD), converted and scaled by one VFMADD231PS per
// block, and the same final reduction (HSUM8). Q4_K, Q5_K and Q6_K instead
// sum row-sequentially (dotQ4_KSeq, dotQ5_KSeq, dotQ6_KSeq): a
// super-block's lanes are reduced exactly as integers (IRED8) and added
// by one scalar FMA.

DATA permQ32<>+0(SB)/4, $0
DATA permQ32<>+4(SB)/4, $4
DATA permQ32<>+8(SB)/4, $1
DATA permQ32<>+12(SB)/4, $5
DATA permQ32<>+16(SB)/4, $2
DATA permQ32<>+20(SB)/4, $6
DATA permQ32<>+24(SB)/4, $3
DATA permQ32<>+28(SB)/4, $7
GLOBL permQ32<>(SB), RODATA|NOPTR, $32

DATA bcastIdx<>+0(SB)/4, $0
DATA bcastIdx<>+4(SB)/4, $0
DATA bcastIdx<>+8(SB)/4, $0
DATA bcastIdx<>+12(SB)/4, $0
DATA bcastIdx<>+16(SB)/4, $0
DATA bcastIdx<>+20(SB)/4, $0
DATA bcastIdx<>+24(SB)/4, $0
DATA bcastIdx<>+28(SB)/4, $0
DATA bcastIdx<>+32(SB)/4, $1
DATA bcastIdx<>+36(SB)/4, $1
DATA bcastIdx<>+40(SB)/4, $1
DATA bcastIdx<>+44(SB)/4, $1
DATA bcastIdx<>+48(SB)/4, $1
DATA bcastIdx<>+52(SB)/4, $1
DATA bcastIdx<>+56(SB)/4, $1
DATA bcastIdx<>+60(SB)/4, $1
DATA bcastIdx<>+64(SB)/4, $2
DATA bcastIdx<>+68(SB)/4, $2
DATA bcastIdx<>+72(SB)/4, $2
DATA bcastIdx<>+76(SB)/4, $2
DATA bcastIdx<>+80(SB)/4, $2
DATA bcastIdx<>+84(SB)/4, $2
DATA bcastIdx<>+88(SB)/4, $2
DATA bcastIdx<>+92(SB)/4, $2
DATA bcastIdx<>+96(SB)/4, $3
DATA bcastIdx<>+100(SB)/4, $3
DATA bcastIdx<>+104(SB)/4, $3
DATA bcastIdx<>+108(SB)/4, $3
DATA bcastIdx<>+112(SB)/4, $3
DATA bcastIdx<>+116(SB)/4, $3
DATA bcastIdx<>+120(SB)/4, $3
DATA bcastIdx<>+124(SB)/4, $3
DATA bcastIdx<>+128(SB)/4, $4
DATA bcastIdx<>+132(SB)/4, $4
DATA bcastIdx<>+136(SB)/4, $4
DATA bcastIdx<>+140(SB)/4, $4
DATA bcastIdx<>+144(SB)/4, $4
DATA bcastIdx<>+148(SB)/4, $4
DATA bcastIdx<>+152(SB)/4, $4
DATA bcastIdx<>+156(SB)/4, $4
DATA bcastIdx<>+160(SB)/4, $5
DATA bcastIdx<>+164(SB)/4, $5
DATA bcastIdx<>+168(SB)/4, $5
DATA bcastIdx<>+172(SB)/4, $5
DATA bcastIdx<>+176(SB)/4, $5
DATA bcastIdx<>+180(SB)/4, $5
DATA bcastIdx<>+184(SB)/4, $5
DATA bcastIdx<>+188(SB)/4, $5
DATA bcastIdx<>+192(SB)/4, $6
DATA bcastIdx<>+196(SB)/4, $6
DATA bcastIdx<>+200(SB)/4, $6
DATA bcastIdx<>+204(SB)/4, $6
DATA bcastIdx<>+208(SB)/4, $6
DATA bcastIdx<>+212(SB)/4, $6
DATA bcastIdx<>+216(SB)/4, $6
DATA bcastIdx<>+220(SB)/4, $6
DATA bcastIdx<>+224(SB)/4, $7
DATA bcastIdx<>+228(SB)/4, $7
DATA bcastIdx<>+232(SB)/4, $7
DATA bcastIdx<>+236(SB)/4, $7
DATA bcastIdx<>+240(SB)/4, $7
DATA bcastIdx<>+244(SB)/4, $7
DATA bcastIdx<>+248(SB)/4, $7
DATA bcastIdx<>+252(SB)/4, $7
GLOBL bcastIdx<>(SB), RODATA|NOPTR, $256

DATA pairIdx<>+0(SB)/4, $0
DATA pairIdx<>+4(SB)/4, $0
DATA pairIdx<>+8(SB)/4, $0
DATA pairIdx<>+12(SB)/4, $0
DATA pairIdx<>+16(SB)/4, $1
DATA pairIdx<>+20(SB)/4, $1
DATA pairIdx<>+24(SB)/4, $1
DATA pairIdx<>+28(SB)/4, $1
DATA pairIdx<>+32(SB)/4, $2
DATA pairIdx<>+36(SB)/4, $2
DATA pairIdx<>+40(SB)/4, $2
DATA pairIdx<>+44(SB)/4, $2
DATA pairIdx<>+48(SB)/4, $3
DATA pairIdx<>+52(SB)/4, $3
DATA pairIdx<>+56(SB)/4, $3
DATA pairIdx<>+60(SB)/4, $3
DATA pairIdx<>+64(SB)/4, $4
DATA pairIdx<>+68(SB)/4, $4
DATA pairIdx<>+72(SB)/4, $4
DATA pairIdx<>+76(SB)/4, $4
DATA pairIdx<>+80(SB)/4, $5
DATA pairIdx<>+84(SB)/4, $5
DATA pairIdx<>+88(SB)/4, $5
DATA pairIdx<>+92(SB)/4, $5
DATA pairIdx<>+96(SB)/4, $6
DATA pairIdx<>+100(SB)/4, $6
DATA pairIdx<>+104(SB)/4, $6
DATA pairIdx<>+108(SB)/4, $6
DATA pairIdx<>+112(SB)/4, $7
DATA pairIdx<>+116(SB)/4, $7
DATA pairIdx<>+120(SB)/4, $7
DATA pairIdx<>+124(SB)/4, $7
GLOBL pairIdx<>(SB), RODATA|NOPTR, $128

// K4X4PAIR(g): sub-blocks 2g, 2g+1 (nibbles unpacked once into Y10, Y11,
// their scales broadcast into Y12, Y13) against the four vectors, into the
// sums Y0-Y3.
#define K4X4PAIR(g) \
	VMOVDQU      (16+32*g)(SI), X10                 \
	VINSERTI128  $1, (32+32*g)(SI), Y10, Y10        \
	VPSRLW       $4, Y10, Y11                       \
	VPAND        Y14, Y10, Y10                      \
	VPAND        Y14, Y11, Y11                      \
	VPBROADCASTW (4*g)(SP), Y12                     \
	VPBROADCASTW (4*g+2)(SP), Y13                   \
	VPMADDUBSW   (64*g)(DI), Y10, Y8                \
	VPMADDUBSW   (64*g+32)(DI), Y11, Y9             \
	VPMADDWD     Y12, Y8, Y8                        \
	VPMADDWD     Y13, Y9, Y9                        \
	VPADDD       Y8, Y0, Y0                         \
	VPADDD       Y9, Y0, Y0                         \
	VPMADDUBSW   (64*g)(DI)(R8*1), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R8*1), Y11, Y9       \
	VPMADDWD     Y12, Y8, Y8                        \
	VPMADDWD     Y13, Y9, Y9                        \
	VPADDD       Y8, Y1, Y1                         \
	VPADDD       Y9, Y1, Y1                         \
	VPMADDUBSW   (64*g)(DI)(R8*2), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R8*2), Y11, Y9       \
	VPMADDWD     Y12, Y8, Y8                        \
	VPMADDWD     Y13, Y9, Y9                        \
	VPADDD       Y8, Y2, Y2                         \
	VPADDD       Y9, Y2, Y2                         \
	VPMADDUBSW   (64*g)(DI)(R9*1), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R9*1), Y11, Y9       \
	VPMADDWD     Y12, Y8, Y8                        \
	VPMADDWD     Y13, Y9, Y9                        \
	VPADDD       Y8, Y3, Y3                         \
	VPADDD       Y9, Y3, Y3

// K4X4FIN(S, XS, XA, DADDR, BADDR, MOFF): lane 0 of XA = fma(float(sum
// of S's lanes), d[t]*d, XA), the super-block's integer sum reduced
// exactly first (row-sequential, dotQ4_KSeq); the mins term of vector t
// (16-sums at BADDR) into the accumulator at MOFF(SP) with d[t]*dmin.
// Clobbers X8, X9, X12, X13, AX.
#define K4X4FIN(S, XS, XA, DADDR, BADDR, MOFF) \
	VMOVSS       DADDR, X12        \
	VMULSS       32(SP), X12, X13  \
	IRED8(S, XS, X9)               \
	VCVTDQ2PS    XS, XS            \
	VFMADD231SS  XS, X13, XA       \
	VMULSS       36(SP), X12, X12  \
	VMOVDQU      BADDR, Y8         \
	VEXTRACTI128 $1, Y8, X9        \
	VPHADDW      X9, X8, X8        \
	VMOVDQU      16(SP), X9        \
	VPMADDWD     X8, X9, X8        \
	VPSHUFD      $0x4e, X8, X9     \
	VPADDD       X9, X8, X8        \
	VPSHUFD      $0xb1, X8, X9     \
	VPADDD       X9, X8, X8        \
	VMOVD        X8, AX            \
	VCVTSI2SSL   AX, X9, X9        \
	VMOVSS       MOFF(SP), X13     \
	VFMADD231SS  X9, X12, X13      \
	VMOVSS       X13, MOFF(SP)

// HSUM8 reduces the 8 lanes of Y0 into X0 as hsum8 does:
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). Clobbers X1.
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVHLPS     X0, X0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVSHDUP    X0, X1     \
	VADDSS       X1, X0, X0

// HSUMR(Y, X, T): X[0] = hsum8 of Y's lanes (T is clobbered).
#define HSUMR(Y, X, T) \
	VEXTRACTF128 $1, Y, T \
	VADDPS       T, X, X  \
	VMOVHLPS     X, X, T  \
	VADDPS       T, X, X  \
	VMOVSHDUP    X, T     \
	VADDSS       T, X, X

// HSUM4(A, B, C, D, T1, T2, T3, X1, X3, OUT) stores HSUMR of A, B, C
// and D as four floats at OUT, each by HSUMR's tree (lanes k and k+4,
// then 0+2 and 1+3, then those two), four rows a step: the halves of A
// and C and of B and D side by side, then lanes 0-1 against 2-3 of all
// four, then the adjacent pairs. T1-T3 are clobbered; X1 and X3 are the
// low halves of T1 and T3. (The two-vector F32 kernel takes it; in the
// one-vector kernels it was slower on rows read from L2, 512x64 F32.)
#define HSUM4(A, B, C, D, T1, T2, T3, X1, X3, OUT) \
	VPERM2F128   $0x20, C, A, T1   \
	VPERM2F128   $0x31, C, A, T2   \
	VADDPS       T2, T1, T1        \
	VPERM2F128   $0x20, D, B, T2   \
	VPERM2F128   $0x31, D, B, T3   \
	VADDPS       T3, T2, T2        \
	VSHUFPS      $0x44, T2, T1, T3 \
	VSHUFPS      $0xEE, T2, T1, T1 \
	VADDPS       T1, T3, T3        \
	VHADDPS      T3, T3, T3        \
	VEXTRACTF128 $1, T3, X1        \
	VSHUFPS      $0x44, X1, X3, X3 \
	VMOVUPS      X3, OUT

// BCAST(reg32, val, Y) broadcasts a 32-bit constant into Y.
#define BCAST(val, X, Y) \
	MOVL         val, AX \
	VMOVD        AX, X   \
	VPBROADCASTD X, Y

// SCALE16(off, Y) sets Y to 8 copies of fp16(off(SI)) * d[0] (DX).
#define SCALE16(off, X, Y) \
	MOVWLZX      off(SI), AX \
	VMOVD        AX, X       \
	VCVTPH2PS    X, X        \
	VMULSS       (DX), X, X  \
	VBROADCASTSS X, Y

// Q8DOT(xoff, W, ACC, S): ACC += S * lanes(W · x[xoff]) for signed bytes W
// (clobbers W, Y5, Y6; Y15 holds 16 x int16(1)).
#define Q8DOT(xoff, W, ACC, S) \
	VMOVDQU     xoff(DI), Y5 \
	VPSIGNB     W, W, Y6     \
	VPSIGNB     W, Y5, Y5    \
	VPMADDUBSW  Y5, Y6, Y6   \
	VPMADDWD    Y15, Y6, Y6  \
	VCVTDQ2PS   Y6, Y6       \
	VFMADD231PS Y6, S, ACC

// The one-vector kernels prefetch the weights 4 KB ahead: decode streams
// each row once from memory, and the hardware prefetcher alone leaves the
// kernels waiting (measured: Q8_0 decode went from about 55% to about 65-70%
// of the read bandwidth; 4 KB ahead beat 1 and 2 KB by a few percent).

// SCALES8X(stride, wb, db): the products fp16(w scale) * d for 8 blocks
// (weight blocks stride bytes apart from SI+wb, activation scales from
// DX+db) as 8 float32 in Y4: one conversion and one multiply for 8
// blocks, on the integer side until the last steps. The loops compute the
// next group's products while using the current group's (Y7), so the FMAs
// do not wait on this chain.
#define SCALES8X(stride, wb, db) \
	MOVWLZX   (wb)(SI), AX                \
	MOVWLZX   (wb+1*stride)(SI), R8      \
	SHLL      $16, R8                 \
	ORL       R8, AX                  \
	MOVWLZX   (wb+2*stride)(SI), R9      \
	SHLQ      $32, R9                 \
	MOVWLZX   (wb+3*stride)(SI), R10     \
	SHLQ      $48, R10                \
	ORQ       R10, R9                 \
	ORQ       R9, AX                  \
	MOVWLZX   (wb+4*stride)(SI), R11     \
	MOVWLZX   (wb+5*stride)(SI), R8      \
	SHLL      $16, R8                 \
	ORL       R8, R11                 \
	MOVWLZX   (wb+6*stride)(SI), R9      \
	SHLQ      $32, R9                 \
	MOVWLZX   (wb+7*stride)(SI), R10     \
	SHLQ      $48, R10                \
	ORQ       R10, R9                 \
	ORQ       R9, R11                 \
	VMOVQ     AX, X2                  \
	VPINSRQ   $1, R11, X2, X2         \
	VCVTPH2PS X2, Y2                  \
	VMULPS    (db)(DX), Y2, Y4

// func dotQ8_0AVX2(w *byte, x *int8, d *float32, nb int) float32
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $32-36
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15
	VXORPS   Y0, Y0, Y0
	VXORPS   Y1, Y1, Y1

	CMPQ CX, $8
	JLT  q80loop2
	SCALES8X(34, 0, 0)

q80loop8:
	VMOVAPS Y4, Y7
	CMPQ    CX, $16
	JLT     q80cur8
	SCALES8X(34, 272, 32)

q80cur8:
	PREFETCHT0 (4096)(SI)
	PREFETCHT0 (4160)(SI)
	PREFETCHT0 (4224)(SI)
	PREFETCHT0 (4288)(SI)
	PREFETCHT0 (4352)(SI)
	VMOVDQU      bcastIdx<>+0(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      2(SI), X3
	VINSERTI128  $1, 18(SI), Y3, Y3
	Q8DOT(0, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+32(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      36(SI), X3
	VINSERTI128  $1, 52(SI), Y3, Y3
	Q8DOT(32, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+64(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      70(SI), X3
	VINSERTI128  $1, 86(SI), Y3, Y3
	Q8DOT(64, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+96(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      104(SI), X3
	VINSERTI128  $1, 120(SI), Y3, Y3
	Q8DOT(96, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+128(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      138(SI), X3
	VINSERTI128  $1, 154(SI), Y3, Y3
	Q8DOT(128, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+160(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      172(SI), X3
	VINSERTI128  $1, 188(SI), Y3, Y3
	Q8DOT(160, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+192(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      206(SI), X3
	VINSERTI128  $1, 222(SI), Y3, Y3
	Q8DOT(192, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+224(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      240(SI), X3
	VINSERTI128  $1, 256(SI), Y3, Y3
	Q8DOT(224, Y3, Y1, Y2)
	ADDQ $272, SI
	ADDQ $256, DI
	ADDQ $32, DX
	SUBQ $8, CX
	CMPQ CX, $8
	JGE  q80loop8
	JMP  q80loop2

q80loop2:
	CMPQ    CX, $2
	JLT     q80tail
	SCALE16(0, X2, Y2)
	// Two 16-byte loads: a 32-byte load that crosses a cache line (most
	// do, blocks being 34 bytes) costs several times more on some CPUs.
	VMOVDQU 2(SI), X3
	VINSERTI128 $1, 18(SI), Y3, Y3
	Q8DOT(0, Y3, Y0, Y2)
	ADDQ    $4, DX
	SCALE16(34, X4, Y4)
	VMOVDQU 36(SI), X3
	VINSERTI128 $1, 52(SI), Y3, Y3
	Q8DOT(32, Y3, Y1, Y4)
	ADDQ    $4, DX
	ADDQ    $68, SI
	ADDQ    $64, DI
	SUBQ    $2, CX
	JMP     q80loop2

q80tail:
	TESTQ   CX, CX
	JZ      q80done
	SCALE16(0, X2, Y2)
	VMOVDQU 2(SI), X3
	VINSERTI128 $1, 18(SI), Y3, Y3
	Q8DOT(0, Y3, Y0, Y2)

q80done:
	VADDPS Y1, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS  X0, ret+32(FP)
	RET

// Q4LOAD(off, W): W = the 32 nibbles of the Q4_0 block at SI+off as
// unsigned bytes in element order (Y14 = 0x0f bytes; clobbers X10).
#define Q4LOAD(off, X, W) \
	VMOVDQU     off(SI), X     \
	VPSRLW      $4, X, X10     \
	VINSERTI128 $1, X10, W, W  \
	VPAND       Y14, W, W

// Q4DOT(xoff, W, ACC, S): ACC += S * lanes(W · x[xoff]), W unsigned.
#define Q4DOT(xoff, W, ACC, S) \
	VPMADDUBSW  xoff(DI), W, Y6 \
	VPMADDWD    Y15, Y6, Y6     \
	VCVTDQ2PS   Y6, Y6          \
	VFMADD231PS Y6, S, ACC

// Q4PAIR(wo, xo, S, ACC): blocks at SI+wo and SI+wo+18 (two 16-byte
// quant loads in one register), activations arranged in pairs at DI+xo,
// scales [s_b x4 | s_b+1 x4] in S: ACC += S * lanes.
#define Q4PAIR(wo, xo, S, ACC) \
	VMOVDQU     (wo+2)(SI), X3             \
	VINSERTI128 $1, (wo+20)(SI), Y3, Y3    \
	VPSRLW      $4, Y3, Y5                 \
	VPAND       Y14, Y3, Y3                \
	VPAND       Y14, Y5, Y5                \
	VPMADDUBSW  (xo)(DI), Y3, Y3           \
	VPMADDUBSW  (xo+32)(DI), Y5, Y5        \
	VPADDW      Y5, Y3, Y3                 \
	VPMADDWD    Y15, Y3, Y3                \
	VCVTDQ2PS   Y3, Y3                     \
	VFMADD231PS Y3, S, ACC

// S1(off, doff, X): X = fp16(off(SI)) * doff(DX) as a scalar (lane 0).
#define S1(off, doff, X) \
	MOVWLZX   off(SI), AX   \
	VMOVD     AX, X         \
	VCVTPH2PS X, X          \
	VMULSS    doff(DX), X, X

// TPAIR(ACC): a pair of blocks after the last group of 8, its scales
// computed one by one and its corrections added to X9 in block order.
#define TPAIR(ACC) \
	S1(0, 0, X2)                  \
	VFMADD231SS  (R12), X2, X9    \
	S1(18, 4, X4)                 \
	VFMADD231SS  4(R12), X4, X9   \
	VBROADCASTSS X2, X2           \
	VBROADCASTSS X4, X4           \
	VINSERTF128  $1, X4, Y2, Y2   \
	Q4PAIR(0, 0, Y2, ACC)         \
	ADDQ         $36, SI          \
	ADDQ         $64, DI          \
	ADDQ         $8, DX           \
	ADDQ         $8, R12          \
	SUBQ         $2, CX

// func dotQ4_0AVX2(w *byte, x *int8, d, s8 *float32, nb int) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ s8+24(FP), R12
	MOVQ nb+32(FP), CX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15
	BCAST($0x0f0f0f0f, X14, Y14)
	VXORPS   Y0, Y0, Y0
	VXORPS   Y1, Y1, Y1
	VXORPS   Y8, Y8, Y8 // corrections, lane b%8
	VXORPS   X9, X9, X9 // corrections of the blocks after the last group of 8
	CMPQ     CX, $8
	JLT      q40tail
	SCALES8X(18, 0, 0)

q40loop8:
	VMOVAPS Y4, Y7
	CMPQ    CX, $16
	JLT     q40cur8
	SCALES8X(18, 144, 32)

q40cur8:
	PREFETCHT0  4096(SI)
	PREFETCHT0  4160(SI)
	PREFETCHT0  4224(SI)
	VFMADD231PS (R12), Y7, Y8
	VMOVDQU     pairIdx<>+0(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIR(0, 0, Y2, Y0)
	VMOVDQU     pairIdx<>+32(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIR(36, 64, Y2, Y1)
	VMOVDQU     pairIdx<>+64(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIR(72, 128, Y2, Y0)
	VMOVDQU     pairIdx<>+96(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIR(108, 192, Y2, Y1)
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $32, DX
	ADDQ $32, R12
	SUBQ $8, CX
	CMPQ CX, $8
	JGE  q40loop8

q40tail:
	// Up to 7 blocks: pairs alternate Y0, Y1, Y0, then a lone block.
	CMPQ CX, $2
	JLT  q40lone0
	TPAIR(Y0)
	CMPQ CX, $2
	JLT  q40lone1
	TPAIR(Y1)
	CMPQ CX, $2
	JLT  q40lone0
	TPAIR(Y0)

q40lone1:
	TESTQ CX, CX
	JZ    q40done
	S1(0, 0, X2)
	VFMADD231SS  (R12), X2, X9
	VBROADCASTSS X2, Y2
	VMOVDQU      2(SI), X3
	VPSRLW       $4, Y3, Y5
	VPAND        Y14, Y3, Y3
	VPAND        Y14, Y5, Y5
	VPMADDUBSW   (DI), Y3, Y3
	VPMADDUBSW   32(DI), Y5, Y5
	VPADDW       Y5, Y3, Y3
	VPMADDWD     Y15, Y3, Y3
	VCVTDQ2PS    Y3, Y3
	VFMADD231PS  Y3, Y2, Y1
	JMP          q40done

q40lone0:
	TESTQ CX, CX
	JZ    q40done
	S1(0, 0, X2)
	VFMADD231SS  (R12), X2, X9
	VBROADCASTSS X2, Y2
	VMOVDQU      2(SI), X3
	VPSRLW       $4, Y3, Y5
	VPAND        Y14, Y3, Y3
	VPAND        Y14, Y5, Y5
	VPMADDUBSW   (DI), Y3, Y3
	VPMADDUBSW   32(DI), Y5, Y5
	VPADDW       Y5, Y3, Y3
	VPMADDWD     Y15, Y3, Y3
	VCVTDQ2PS    Y3, Y3
	VFMADD231PS  Y3, Y2, Y0

q40done:
	VADDPS Y1, Y0, Y0
	HSUM8
	HSUMR(Y8, X8, X12)
	VADDSS X9, X8, X8
	VSUBSS X8, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// KSCALES unpacks the 12 scale bytes at SI+4 of a Q4_K/Q5_K block (as
// ggml's kmask code): the 8 scales become 8 int16 at 0(SP), the 8 mins 8
// int16 in X8. Clobbers R8-R13, X7.
#define KSCALES \
	MOVL      4(SI), R8           \
	MOVL      8(SI), R9           \
	MOVL      12(SI), R10         \
	MOVL      R10, R11            \
	SHRL      $4, R11             \
	ANDL      $0x0f0f0f0f, R11    \
	MOVL      R9, R12             \
	SHRL      $6, R12             \
	ANDL      $0x03030303, R12    \
	SHLL      $4, R12             \
	ORL       R12, R11            \
	MOVL      R9, R12             \
	ANDL      $0x3f3f3f3f, R12    \
	ANDL      $0x0f0f0f0f, R10    \
	MOVL      R8, R13             \
	SHRL      $6, R13             \
	ANDL      $0x03030303, R13    \
	SHLL      $4, R13             \
	ORL       R13, R10            \
	ANDL      $0x3f3f3f3f, R8     \
	VMOVD     R8, X7              \
	VPINSRD   $1, R10, X7, X7     \
	VPMOVZXBW X7, X7              \
	VMOVDQU   X7, 0(SP)           \
	VMOVD     R12, X8             \
	VPINSRD   $1, R11, X8, X8     \
	VPMOVZXBW X8, X8

// KMINS: X5 += float(sum_j mins[j] * (bsums[2j]+bsums[2j+1])) * X6 (dmin),
// mins in X8 as int16, bsums at BX. Clobbers X3, X4, X8, AX.
#define KMINS \
	VMOVDQU      (BX), X3         \
	VMOVDQU      16(BX), X4       \
	VPHADDW      X4, X3, X3       \
	VPMADDWD     X3, X8, X8       \
	VPSHUFD      $0x4e, X8, X3    \
	VPADDD       X3, X8, X8       \
	VPSHUFD      $0xb1, X8, X3    \
	VPADDD       X3, X8, X8       \
	VMOVD        X8, AX           \
	VCVTSI2SSL   AX, X3, X3       \
	VFMADD231SS  X3, X6, X5

// KDSCALES: Y2 = 8 x (d[0] * fp16 d), X6 = d[0] * fp16 dmin.
#define KDSCALES \
	MOVWLZX      (SI), AX     \
	VMOVD        AX, X2       \
	VCVTPH2PS    X2, X2       \
	VMULSS       (DX), X2, X2 \
	VBROADCASTSS X2, Y2       \
	MOVWLZX      2(SI), AX    \
	VMOVD        AX, X6       \
	VCVTPH2PS    X6, X6       \
	VMULSS       (DX), X6, X6

// K4PAIR(g, qoff): sub-blocks 2g and 2g+1 from the 32 quant bytes at
// SI+qoff (low nibbles in Y10, high in Y11, plus any fifth bits ORed in by
// the caller via K5BITS), times their scales, into Y1. Weights are read
// 16 bytes at a time, as in the Q8_0 kernel.
#define K4LOAD(qoff) \
	VMOVDQU     qoff(SI), X10            \
	VINSERTI128 $1, (qoff+16)(SI), Y10, Y10 \
	VPSRLW  $4, Y10, Y11  \
	VPAND   Y14, Y10, Y10 \
	VPAND   Y14, Y11, Y11

#define K4MUL(g) \
	VPMADDUBSW   (64*g)(DI), Y10, Y10    \
	VPMADDUBSW   (64*g+32)(DI), Y11, Y11 \
	VPBROADCASTW (4*g)(SP), Y12          \
	VPMADDWD     Y12, Y10, Y10           \
	VPBROADCASTW (4*g+2)(SP), Y12        \
	VPMADDWD     Y12, Y11, Y11           \
	VPADDD       Y10, Y1, Y1             \
	VPADDD       Y11, Y1, Y1

// K5BITS ORs the next two fifth bits of Y13 (qh, shifted as it goes) into
// Y10 and Y11 as bit 4 (Y15 = 0x01 bytes).
#define K5BITS \
	VPAND  Y15, Y13, Y12 \
	VPSLLW $4, Y12, Y12  \
	VPOR   Y12, Y10, Y10 \
	VPSRLW $1, Y13, Y13  \
	VPAND  Y15, Y13, Y12 \
	VPSLLW $4, Y12, Y12  \
	VPOR   Y12, Y11, Y11 \
	VPSRLW $1, Y13, Y13

// K4SUPER(MUL): the Q4_K super-block at SI against the vector at DI
// (one-vector kernels; MUL: K4MUL, or K4MULV with AVX-VNNI): X0 +=
// d * its integer dot, X5 its mins term (KMINS); then SI, DI, DX, BX on
// to the next super-block.
#define K4SUPER(MUL) \
	PREFETCHT0 (4096)(SI) \
	PREFETCHT0 (4160)(SI) \
	PREFETCHT0 (4224)(SI) \
	KDSCALES \
	KSCALES \
	KMINS \
	VPXOR  Y1, Y1, Y1 \
	K4LOAD(16) \
	MUL(0) \
	K4LOAD(48) \
	MUL(1) \
	K4LOAD(80) \
	MUL(2) \
	K4LOAD(112) \
	MUL(3) \
	IRED8(Y1, X1, X3) \
	VCVTDQ2PS   X1, X1 \
	VFMADD231SS X1, X2, X0 \
	ADDQ $144, SI \
	ADDQ $256, DI \
	ADDQ $4, DX \
	ADDQ $32, BX

// func dotQ4_KAVX2(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	BCAST($0x0f0f0f0f, X14, Y14)
	VXORPS Y0, Y0, Y0
	VXORPS X5, X5, X5

q4kloop:
	K4SUPER(K4MUL)
	DECQ CX
	JNZ  q4kloop

	VSUBSS X5, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// func dotQ4_KRowsAVX2(w *byte, x *int8, d *float32, bsums *int16, nb, rows, rs int, out *float32)
//
// dotQ4_KAVX2 of rows > 0 rows (rs bytes apart from w) with one vector,
// each row's result to out[r]: the same instructions a row, no call a
// row. Frame: 0 the scales (KSCALES), 32 the row's start, 40 where its
// result goes, 48 the rows left (KSCALES takes R8-R13).
TEXT ·dotQ4_KRowsAVX2(SB), NOSPLIT, $56-64
	MOVQ w+0(FP), AX
	MOVQ AX, 32(SP)
	MOVQ out+56(FP), AX
	MOVQ AX, 40(SP)
	MOVQ rows+40(FP), AX
	MOVQ AX, 48(SP)
	BCAST($0x0f0f0f0f, X14, Y14)

q4kr2row:
	MOVQ   32(SP), SI
	MOVQ   x+8(FP), DI
	MOVQ   d+16(FP), DX
	MOVQ   bsums+24(FP), BX
	MOVQ   nb+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS X5, X5, X5

q4kr2loop:
	K4SUPER(K4MUL)
	DECQ CX
	JNZ  q4kr2loop

	VSUBSS X5, X0, X0
	MOVQ   40(SP), AX
	MOVSS  X0, (AX)
	ADDQ   $4, 40(SP)
	MOVQ   rs+48(FP), AX
	ADDQ   AX, 32(SP)
	DECQ   48(SP)
	JNZ    q4kr2row
	VZEROUPPER
	RET

// func dotQ5_KAVX2(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	BCAST($0x0f0f0f0f, X14, Y14)
	BCAST($0x01010101, X15, Y15)
	VXORPS Y0, Y0, Y0
	VXORPS X5, X5, X5

q5kloop:
	PREFETCHT0 (4096)(SI)
	PREFETCHT0 (4160)(SI)
	PREFETCHT0 (4224)(SI)
	KDSCALES
	KSCALES
	KMINS
	VPXOR   Y1, Y1, Y1
	VMOVDQU     16(SI), X13
	VINSERTI128 $1, 32(SI), Y13, Y13
	K4LOAD(48)
	K5BITS
	K4MUL(0)
	K4LOAD(80)
	K5BITS
	K4MUL(1)
	K4LOAD(112)
	K5BITS
	K4MUL(2)
	K4LOAD(144)
	K5BITS
	K4MUL(3)
	IRED8(Y1, X1, X3)
	VCVTDQ2PS   X1, X1
	VFMADD231SS X1, X2, X0
	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q5kloop

	VSUBSS X5, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// K6Q(m, Q): one quarter of 32 elements whose 6-bit quants are in Q:
// Y1 += scales(2m, 2m+1) * (Q·x - 32·x), x at DI+32m. Y12 = 0x20 bytes,
// Y11 = the scale shuffle; clobbers Q, Y10.
#define K6Q(m, Q) \
	VPMADDUBSW   (32*(m))(DI), Q, Q     \
	VPMADDUBSW   (32*(m))(DI), Y12, Y10 \
	VPSUBW       Y10, Q, Q            \
	VPBROADCASTD (4*(m))(SP), Y10       \
	VPSHUFB      Y11, Y10, Y10        \
	VPMADDWD     Y10, Q, Q            \
	VPADDD       Q, Y1, Y1

// K6HALF(h): the 128 elements of half h: ql at SI+64h, qh at SI+128+32h.
#define K6HALF(h) \
	VMOVDQU     (64*(h))(SI), X4                 \
	VINSERTI128 $1, (64*(h)+16)(SI), Y4, Y4      \
	VMOVDQU     (64*(h)+32)(SI), X5              \
	VINSERTI128 $1, (64*(h)+48)(SI), Y5, Y5      \
	VMOVDQU     (128+32*(h))(SI), X6             \
	VINSERTI128 $1, (128+32*(h)+16)(SI), Y6, Y6  \
	VPAND   Y14, Y4, Y7           \
	VPAND   Y13, Y6, Y8           \
	VPSLLW  $4, Y8, Y8            \
	VPOR    Y8, Y7, Y7            \
	K6Q(4*h, Y7)                  \
	VPAND   Y14, Y5, Y7           \
	VPSRLW  $2, Y6, Y8            \
	VPAND   Y13, Y8, Y8           \
	VPSLLW  $4, Y8, Y8            \
	VPOR    Y8, Y7, Y7            \
	K6Q(4*h+1, Y7)                \
	VPSRLW  $4, Y4, Y7            \
	VPAND   Y14, Y7, Y7           \
	VPSRLW  $4, Y6, Y8            \
	VPAND   Y13, Y8, Y8           \
	VPSLLW  $4, Y8, Y8            \
	VPOR    Y8, Y7, Y7            \
	K6Q(4*h+2, Y7)                \
	VPSRLW  $4, Y5, Y7            \
	VPAND   Y14, Y7, Y7           \
	VPSRLW  $6, Y6, Y8            \
	VPAND   Y13, Y8, Y8           \
	VPSLLW  $4, Y8, Y8            \
	VPOR    Y8, Y7, Y7            \
	K6Q(4*h+3, Y7)

// func dotQ6_KAVX2(w *byte, x *int8, d *float32, nb int) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $32-36
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	BCAST($0x0f0f0f0f, X14, Y14)
	BCAST($0x03030303, X13, Y13)
	BCAST($0x20202020, X12, Y12)
	BCAST($0x01000100, X11, X11)
	BCAST($0x03020302, X10, X10)
	VINSERTI128 $1, X10, Y11, Y11
	VXORPS Y0, Y0, Y0

q6kloop:
	PREFETCHT0 (4096)(SI)
	PREFETCHT0 (4160)(SI)
	PREFETCHT0 (4224)(SI)
	PREFETCHT0 (4288)(SI)
	SCALE16(208, X2, Y2)
	VPMOVSXBW 192(SI), Y3
	VMOVDQU   Y3, 0(SP)
	VPXOR     Y1, Y1, Y1
	K6HALF(0)
	K6HALF(1)
	IRED8(Y1, X1, X3)
	VCVTDQ2PS   X1, X1
	VFMADD231SS X1, X2, X0
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q6kloop

	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// The float dots. Every kernel (one vector, four vectors, four rows)
// sums a row's products in one order, the "float order": two 8-lane FMA
// accumulators over 16 elements a round (elements 0-7 and 8-15), one
// more round of 8 into the first where 8 remain, the two added, the sum
// of the 8 lanes (HSUM8's tree), then single elements by scalar FMA. So a
// vector's result is the same bits alone, in a batch of four vectors, or
// among many rows: float weights batch without changing any result
// (InvariantVectors). Weights are converted exactly to float32.

// dotF32AVX2 is Dot's kernel (dotVecGeneric's order: four accumulators
// over 32 elements), not a weight row's.

// func dotF32AVX2(w *byte, x *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f32loop32:
	CMPQ        CX, $32
	JLT         f32sum
	VMOVUPS 0(SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         f32loop32

f32sum:
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0

f32loop8:
	CMPQ        CX, $8
	JLT         f32tail
	VMOVUPS 0(SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         f32loop8

f32tail:
	HSUM8
	TESTQ CX, CX
	JZ    f32done

f32loop1:
	VMOVSS (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f32loop1

f32done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotF32RowAVX2(w *byte, x *float32, n int) float32
TEXT ·dotF32RowAVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

f32rloop16:
	CMPQ        CX, $16
	JLT         f32rloop8
	VMOVUPS 0(SI), Y4
	VMOVUPS 32(SI), Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         f32rloop16

f32rloop8:
	CMPQ        CX, $8
	JLT         f32rsum
	VMOVUPS 0(SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

f32rsum:
	VADDPS Y1, Y0, Y0
	HSUM8
	TESTQ CX, CX
	JZ    f32rdone

f32rloop1:
	VMOVSS (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f32rloop1

f32rdone:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET


// func dotF16AVX2(w *byte, x *float32, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

f16loop16:
	CMPQ        CX, $16
	JLT         f16loop8
	VCVTPH2PS 0(SI), Y4
	VCVTPH2PS 16(SI), Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         f16loop16

f16loop8:
	CMPQ        CX, $8
	JLT         f16sum
	VCVTPH2PS 0(SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

f16sum:
	VADDPS Y1, Y0, Y0
	HSUM8
	TESTQ CX, CX
	JZ    f16done

f16loop1:
	MOVWLZX   (SI), AX
	VMOVD     AX, X4
	VCVTPH2PS X4, X4
	VFMADD231SS (DI), X4, X0
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f16loop1

f16done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET


// func dotBF16AVX2(w *byte, x *float32, n int) float32
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

bf16loop16:
	CMPQ        CX, $16
	JLT         bf16loop8
	VPMOVZXWD 0(SI), Y4
	VPSLLD    $16, Y4, Y4
	VPMOVZXWD 16(SI), Y5
	VPSLLD    $16, Y5, Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         bf16loop16

bf16loop8:
	CMPQ        CX, $8
	JLT         bf16sum
	VPMOVZXWD 0(SI), Y4
	VPSLLD    $16, Y4, Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

bf16sum:
	VADDPS Y1, Y0, Y0
	HSUM8
	TESTQ CX, CX
	JZ    bf16done

bf16loop1:
	MOVWLZX (SI), AX
	SHLL    $16, AX
	VMOVD   AX, X4
	VFMADD231SS (DI), X4, X0
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         bf16loop1

bf16done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// The four-row float dots (decode): rows w, w+rs, w+2rs, w+3rs (rs in
// bytes) against one vector x, each row in the float order with its own
// two accumulators (eight chains, so the FMA units stay busy where one
// row's two chains would wait on latency); groups of four rows, out[r]
// for r < 4*groups. The 16-bit kernels take 32 elements a round (two
// rounds of the float order) and prefetch 1 KiB ahead in each row: at
// 16 a round, four rows' streams of half a cache line per round read
// F16 weights 15 % slower than the one-row kernel before them
// (8192x4096, one thread); with both, within noise of it.

// func dotF32Rows4AVX2(w *byte, x *float32, n, groups, rs int, out *float32)
TEXT ·dotF32Rows4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R12
	MOVQ rs+32(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ out+40(FP), BX
	MOVQ groups+24(FP), R13

f32r4group:
	MOVQ   R12, SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f32r4loop16:
	CMPQ        CX, $16
	JLT         f32r4loop8
	VMOVUPS     (DI), Y8
	VMOVUPS     32(DI), Y9
	VFMADD231PS (SI), Y8, Y0
	VFMADD231PS 32(SI), Y9, Y1
	VFMADD231PS (SI)(R10*1), Y8, Y2
	VFMADD231PS 32(SI)(R10*1), Y9, Y3
	VFMADD231PS (SI)(R10*2), Y8, Y4
	VFMADD231PS 32(SI)(R10*2), Y9, Y5
	VFMADD231PS (SI)(R11*1), Y8, Y6
	VFMADD231PS 32(SI)(R11*1), Y9, Y7
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         f32r4loop16

f32r4loop8:
	CMPQ        CX, $8
	JLT         f32r4sum
	VMOVUPS     (DI), Y8
	VFMADD231PS (SI), Y8, Y0
	VFMADD231PS (SI)(R10*1), Y8, Y2
	VFMADD231PS (SI)(R10*2), Y8, Y4
	VFMADD231PS (SI)(R11*1), Y8, Y6
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

f32r4sum:
	VADDPS Y1, Y0, Y0
	HSUMR(Y0, X0, X12)
	VADDPS Y3, Y2, Y2
	HSUMR(Y2, X2, X12)
	VADDPS Y5, Y4, Y4
	HSUMR(Y4, X4, X12)
	VADDPS Y7, Y6, Y6
	HSUMR(Y6, X6, X12)
	TESTQ CX, CX
	JZ    f32r4store

f32r4loop1:
	VMOVSS (DI), X8
	VMOVSS (SI), X10
	VFMADD231SS X10, X8, X0
	VMOVSS (SI)(R10*1), X10
	VFMADD231SS X10, X8, X2
	VMOVSS (SI)(R10*2), X10
	VFMADD231SS X10, X8, X4
	VMOVSS (SI)(R11*1), X10
	VFMADD231SS X10, X8, X6
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f32r4loop1

f32r4store:
	VMOVSS X0, (BX)
	VMOVSS X2, 4(BX)
	VMOVSS X4, 8(BX)
	VMOVSS X6, 12(BX)
	ADDQ   $16, BX
	LEAQ   (R12)(R10*4), R12
	DECQ   R13
	JNZ    f32r4group
	VZEROUPPER
	RET


// func dotF16Rows4AVX2(w *byte, x *float32, n, groups, rs int, out *float32)
TEXT ·dotF16Rows4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R12
	MOVQ rs+32(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ out+40(FP), BX
	MOVQ groups+24(FP), R13

f16r4group:
	MOVQ   R12, SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f16r4loop32:
	CMPQ        CX, $32
	JLT         f16r4loop16
	PREFETCHT0  1024(SI)
	PREFETCHT0  1024(SI)(R10*1)
	PREFETCHT0  1024(SI)(R10*2)
	PREFETCHT0  1024(SI)(R11*1)
	VMOVUPS     0(DI), Y8
	VMOVUPS     32(DI), Y9
	VCVTPH2PS 0(SI), Y10
	VCVTPH2PS 16(SI), Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y9, Y1
	VCVTPH2PS 0(SI)(R10*1), Y10
	VCVTPH2PS 16(SI)(R10*1), Y11
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y3
	VCVTPH2PS 0(SI)(R10*2), Y10
	VCVTPH2PS 16(SI)(R10*2), Y11
	VFMADD231PS Y10, Y8, Y4
	VFMADD231PS Y11, Y9, Y5
	VCVTPH2PS 0(SI)(R11*1), Y10
	VCVTPH2PS 16(SI)(R11*1), Y11
	VFMADD231PS Y10, Y8, Y6
	VFMADD231PS Y11, Y9, Y7
	VMOVUPS     64(DI), Y8
	VMOVUPS     96(DI), Y9
	VCVTPH2PS 32(SI), Y10
	VCVTPH2PS 48(SI), Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y9, Y1
	VCVTPH2PS 32(SI)(R10*1), Y10
	VCVTPH2PS 48(SI)(R10*1), Y11
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y3
	VCVTPH2PS 32(SI)(R10*2), Y10
	VCVTPH2PS 48(SI)(R10*2), Y11
	VFMADD231PS Y10, Y8, Y4
	VFMADD231PS Y11, Y9, Y5
	VCVTPH2PS 32(SI)(R11*1), Y10
	VCVTPH2PS 48(SI)(R11*1), Y11
	VFMADD231PS Y10, Y8, Y6
	VFMADD231PS Y11, Y9, Y7
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         f16r4loop32

f16r4loop16:
	CMPQ        CX, $16
	JLT         f16r4loop8
	VMOVUPS     (DI), Y8
	VMOVUPS     32(DI), Y9
	VCVTPH2PS 0(SI), Y10
	VCVTPH2PS 16(SI), Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y9, Y1
	VCVTPH2PS (SI)(R10*1), Y10
	VCVTPH2PS 16(SI)(R10*1), Y11
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y3
	VCVTPH2PS (SI)(R10*2), Y10
	VCVTPH2PS 16(SI)(R10*2), Y11
	VFMADD231PS Y10, Y8, Y4
	VFMADD231PS Y11, Y9, Y5
	VCVTPH2PS (SI)(R11*1), Y10
	VCVTPH2PS 16(SI)(R11*1), Y11
	VFMADD231PS Y10, Y8, Y6
	VFMADD231PS Y11, Y9, Y7
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         f16r4loop16

f16r4loop8:
	CMPQ        CX, $8
	JLT         f16r4sum
	VMOVUPS     (DI), Y8
	VCVTPH2PS (SI), Y10
	VFMADD231PS Y10, Y8, Y0
	VCVTPH2PS (SI)(R10*1), Y10
	VFMADD231PS Y10, Y8, Y2
	VCVTPH2PS (SI)(R10*2), Y10
	VFMADD231PS Y10, Y8, Y4
	VCVTPH2PS (SI)(R11*1), Y10
	VFMADD231PS Y10, Y8, Y6
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

f16r4sum:
	VADDPS Y1, Y0, Y0
	HSUMR(Y0, X0, X12)
	VADDPS Y3, Y2, Y2
	HSUMR(Y2, X2, X12)
	VADDPS Y5, Y4, Y4
	HSUMR(Y4, X4, X12)
	VADDPS Y7, Y6, Y6
	HSUMR(Y6, X6, X12)
	TESTQ CX, CX
	JZ    f16r4store

f16r4loop1:
	VMOVSS (DI), X8
	MOVWLZX   (SI), AX
	VMOVD     AX, X10
	VCVTPH2PS X10, X10
	VFMADD231SS X10, X8, X0
	MOVWLZX   (SI)(R10*1), AX
	VMOVD     AX, X10
	VCVTPH2PS X10, X10
	VFMADD231SS X10, X8, X2
	MOVWLZX   (SI)(R10*2), AX
	VMOVD     AX, X10
	VCVTPH2PS X10, X10
	VFMADD231SS X10, X8, X4
	MOVWLZX   (SI)(R11*1), AX
	VMOVD     AX, X10
	VCVTPH2PS X10, X10
	VFMADD231SS X10, X8, X6
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f16r4loop1

f16r4store:
	VMOVSS X0, (BX)
	VMOVSS X2, 4(BX)
	VMOVSS X4, 8(BX)
	VMOVSS X6, 12(BX)
	ADDQ   $16, BX
	LEAQ   (R12)(R10*4), R12
	DECQ   R13
	JNZ    f16r4group
	VZEROUPPER
	RET


// func dotBF16Rows4AVX2(w *byte, x *float32, n, groups, rs int, out *float32)
TEXT ·dotBF16Rows4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R12
	MOVQ rs+32(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ out+40(FP), BX
	MOVQ groups+24(FP), R13

bf16r4group:
	MOVQ   R12, SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

bf16r4loop32:
	CMPQ        CX, $32
	JLT         bf16r4loop16
	PREFETCHT0  1024(SI)
	PREFETCHT0  1024(SI)(R10*1)
	PREFETCHT0  1024(SI)(R10*2)
	PREFETCHT0  1024(SI)(R11*1)
	VMOVUPS     0(DI), Y8
	VMOVUPS     32(DI), Y9
	VPMOVZXWD 0(SI), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 16(SI), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y9, Y1
	VPMOVZXWD 0(SI)(R10*1), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 16(SI)(R10*1), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y3
	VPMOVZXWD 0(SI)(R10*2), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 16(SI)(R10*2), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y4
	VFMADD231PS Y11, Y9, Y5
	VPMOVZXWD 0(SI)(R11*1), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 16(SI)(R11*1), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y6
	VFMADD231PS Y11, Y9, Y7
	VMOVUPS     64(DI), Y8
	VMOVUPS     96(DI), Y9
	VPMOVZXWD 32(SI), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 48(SI), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y9, Y1
	VPMOVZXWD 32(SI)(R10*1), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 48(SI)(R10*1), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y3
	VPMOVZXWD 32(SI)(R10*2), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 48(SI)(R10*2), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y4
	VFMADD231PS Y11, Y9, Y5
	VPMOVZXWD 32(SI)(R11*1), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 48(SI)(R11*1), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y6
	VFMADD231PS Y11, Y9, Y7
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         bf16r4loop32

bf16r4loop16:
	CMPQ        CX, $16
	JLT         bf16r4loop8
	VMOVUPS     (DI), Y8
	VMOVUPS     32(DI), Y9
	VPMOVZXWD 0(SI), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 16(SI), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y9, Y1
	VPMOVZXWD (SI)(R10*1), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 16(SI)(R10*1), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y11, Y9, Y3
	VPMOVZXWD (SI)(R10*2), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 16(SI)(R10*2), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y4
	VFMADD231PS Y11, Y9, Y5
	VPMOVZXWD (SI)(R11*1), Y10
	VPSLLD    $16, Y10, Y10
	VPMOVZXWD 16(SI)(R11*1), Y11
	VPSLLD    $16, Y11, Y11
	VFMADD231PS Y10, Y8, Y6
	VFMADD231PS Y11, Y9, Y7
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         bf16r4loop16

bf16r4loop8:
	CMPQ        CX, $8
	JLT         bf16r4sum
	VMOVUPS     (DI), Y8
	VPMOVZXWD (SI), Y10
	VPSLLD    $16, Y10, Y10
	VFMADD231PS Y10, Y8, Y0
	VPMOVZXWD (SI)(R10*1), Y10
	VPSLLD    $16, Y10, Y10
	VFMADD231PS Y10, Y8, Y2
	VPMOVZXWD (SI)(R10*2), Y10
	VPSLLD    $16, Y10, Y10
	VFMADD231PS Y10, Y8, Y4
	VPMOVZXWD (SI)(R11*1), Y10
	VPSLLD    $16, Y10, Y10
	VFMADD231PS Y10, Y8, Y6
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

bf16r4sum:
	VADDPS Y1, Y0, Y0
	HSUMR(Y0, X0, X12)
	VADDPS Y3, Y2, Y2
	HSUMR(Y2, X2, X12)
	VADDPS Y5, Y4, Y4
	HSUMR(Y4, X4, X12)
	VADDPS Y7, Y6, Y6
	HSUMR(Y6, X6, X12)
	TESTQ CX, CX
	JZ    bf16r4store

bf16r4loop1:
	VMOVSS (DI), X8
	MOVWLZX (SI), AX
	SHLL    $16, AX
	VMOVD   AX, X10
	VFMADD231SS X10, X8, X0
	MOVWLZX (SI)(R10*1), AX
	SHLL    $16, AX
	VMOVD   AX, X10
	VFMADD231SS X10, X8, X2
	MOVWLZX (SI)(R10*2), AX
	SHLL    $16, AX
	VMOVD   AX, X10
	VFMADD231SS X10, X8, X4
	MOVWLZX (SI)(R11*1), AX
	SHLL    $16, AX
	VMOVD   AX, X10
	VFMADD231SS X10, X8, X6
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         bf16r4loop1

bf16r4store:
	VMOVSS X0, (BX)
	VMOVSS X2, 4(BX)
	VMOVSS X4, 8(BX)
	VMOVSS X6, 12(BX)
	ADDQ   $16, BX
	LEAQ   (R12)(R10*4), R12
	DECQ   R13
	JNZ    bf16r4group
	VZEROUPPER
	RET


// func quantizeQ32AVX2(x *float32, q *int8, d *float32, nb int)
TEXT ·quantizeQ32AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	BCAST($0x7fffffff, X15, Y15)
	BCAST($0x42fe0000, X13, X13) // 127.0
	VXORPS  X14, X14, X14
	VMOVDQU permQ32<>(SB), Y11

qloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS  Y15, Y0, Y4
	VANDPS  Y15, Y1, Y5
	VANDPS  Y15, Y2, Y6
	VANDPS  Y15, Y3, Y7
	VMAXPS  Y5, Y4, Y4
	VMAXPS  Y7, Y6, Y6
	VMAXPS  Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS  X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS  X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXSS  X5, X4, X4
	VDIVSS  X13, X4, X5      // d = amax / 127
	VCVTPS2PH $0, X5, X5     // rounded to FP16 (to nearest, ties to even)
	VCVTPH2PS X5, X5
	VMOVSS  X5, (DX)
	VDIVSS  X4, X13, X6      // id = 127 / amax
	VCMPSS  $4, X14, X4, X7  // amax != 0
	VANDPS  X7, X6, X6
	VBROADCASTSS X6, Y6
	VMULPS  Y6, Y0, Y0
	VMULPS  Y6, Y1, Y1
	VMULPS  Y6, Y2, Y2
	VMULPS  Y6, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y11, Y0
	VMOVDQU   Y0, (DI)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  qloop
	VZEROUPPER
	RET

// The four-vector kernels: one weight row against four activation vectors
// (prefill), decoding each weight block once. Per vector they compute
// exactly what the one-vector kernels compute (even blocks into Y0-Y3,
// odd blocks into Y4-Y7, the same scale product and reduction), so a
// vector's result does not depend on how it was grouped. x points at
// vector 0; vector t is xs*t bytes further. d4 holds the four vectors'
// scales interleaved: block b's are d4[4b..4b+3].

// W16SCALE(off): Y10 = 8 x fp16(off(SI)).
#define W16SCALE(off) \
	MOVWLZX      off(SI), AX \
	VMOVD        AX, X10     \
	VCVTPH2PS    X10, X10    \
	VBROADCASTSS X10, Y10

// W8PREP(off): Y8 = the Q8_0 block's quants at SI+off, Y9 = |Y8|, Y10 its scale.
#define W8PREP(off) \
	W16SCALE(off)                          \
	VMOVDQU     (off+2)(SI), X8            \
	VINSERTI128 $1, (off+18)(SI), Y8, Y8   \
	VPSIGNB     Y8, Y8, Y9

// TOK(xaddr, poff, ACC): ACC += (product at poff(SP)) * lanes(Y8 · x).
#define TOK(xaddr, poff, ACC) \
	VMOVDQU      xaddr, Y11     \
	VPSIGNB      Y8, Y11, Y11   \
	VPMADDUBSW   Y11, Y9, Y11   \
	VPMADDWD     Y15, Y11, Y11  \
	VCVTDQ2PS    Y11, Y11       \
	VBROADCASTSS poff(SP), Y12  \
	VFMADD231PS  Y11, Y12, ACC

// TOK4(xo, do, A0, A1, A2, A3): the four vectors' blocks at x+xo; their
// four scales are at DX+do (interleaved by vector), multiplied by the
// weight scale in one VMULPS and read back broadcast from the stack.
#define TOK4(xo, do, A0, A1, A2, A3) \
	VMULPS  do(DX), X10, X12      \
	VMOVUPS X12, 0(SP)            \
	TOK(xo(DI), 0, A0)            \
	TOK(xo(DI)(R8*1), 4, A1)      \
	TOK(xo(DI)(R8*2), 8, A2)      \
	TOK(xo(DI)(R9*1), 12, A3)

// X4SETUP expects SI, DI, DX, CX and R8 (xs) loaded.
#define X4SETUP \
	LEAQ     (R8)(R8*2), R9     \
	VPCMPEQW Y15, Y15, Y15      \
	VPSRLW   $15, Y15, Y15      \
	VXORPS   Y0, Y0, Y0         \
	VXORPS   Y1, Y1, Y1         \
	VXORPS   Y2, Y2, Y2         \
	VXORPS   Y3, Y3, Y3         \
	VXORPS   Y4, Y4, Y4         \
	VXORPS   Y5, Y5, Y5         \
	VXORPS   Y6, Y6, Y6         \
	VXORPS   Y7, Y7, Y7

// X4FINISH stores the four sums at BX.
#define X4FINISH \
	VADDPS Y4, Y0, Y0       \
	VADDPS Y5, Y1, Y1       \
	VADDPS Y6, Y2, Y2       \
	VADDPS Y7, Y3, Y3       \
	HSUMR(Y0, X0, X12)      \
	HSUMR(Y1, X1, X12)      \
	HSUMR(Y2, X2, X12)      \
	HSUMR(Y3, X3, X12)      \
	VMOVSS X0, (BX)         \
	VMOVSS X1, 4(BX)        \
	VMOVSS X2, 8(BX)        \
	VMOVSS X3, 12(BX)       \
	VZEROUPPER

// func dotQ8_0x4AVX2(w *byte, x *int8, d4 *float32, nb, xs int, out *float32)
TEXT ·dotQ8_0x4AVX2(SB), NOSPLIT, $16-48
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d4+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVQ xs+32(FP), R8
	X4SETUP

q80x4loop2:
	CMPQ CX, $2
	JLT  q80x4tail
	W8PREP(0)
	TOK4(0, 0, Y0, Y1, Y2, Y3)
	W8PREP(34)
	TOK4(32, 16, Y4, Y5, Y6, Y7)
	ADDQ $68, SI
	ADDQ $64, DI
	ADDQ $32, DX
	SUBQ $2, CX
	JMP  q80x4loop2

q80x4tail:
	TESTQ CX, CX
	JZ    q80x4done
	W8PREP(0)
	TOK4(0, 0, Y0, Y1, Y2, Y3)

q80x4done:
	MOVQ out+40(FP), BX
	X4FINISH
	RET


// func axpyAVX2(dst *float32, alpha float32, x *float32, n int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS alpha+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

axpy32:
	CMPQ        CX, $32
	JLT         axpy8
	VMOVUPS     (DI), Y1
	VMOVUPS     32(DI), Y2
	VMOVUPS     64(DI), Y3
	VMOVUPS     96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         axpy32

axpy8:
	CMPQ        CX, $8
	JLT         axpy1
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         axpy8

axpy1:
	TESTQ       CX, CX
	JZ          axpydone
	VMOVSS      (DI), X1
	VFMADD231SS (SI), X0, X1
	VMOVSS      X1, (DI)
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         axpy1

axpydone:
	VZEROUPPER
	RET

// The multi-row forms of the one-vector Q8_0 and Q4_0 kernels: rows rows
// rs bytes apart, out[r] = the one-vector dot of row r (decode calls them
// once per chunk of rows instead of once per row).

// func dotQ8_0RowsAVX2(w *byte, x *int8, d *float32, nb, rows, rs int, out *float32)
TEXT ·dotQ8_0RowsAVX2(SB), NOSPLIT, $32-56
	MOVQ w+0(FP), R13
	MOVQ rows+32(FP), R12
	MOVQ out+48(FP), BX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15

q80rrow:
	MOVQ R13, SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	VXORPS   Y0, Y0, Y0
	VXORPS   Y1, Y1, Y1

	CMPQ CX, $8
	JLT  q80rloop2
	SCALES8X(34, 0, 0)

q80rloop8:
	VMOVAPS Y4, Y7
	CMPQ    CX, $16
	JLT     q80rcur8
	SCALES8X(34, 272, 32)

q80rcur8:
	PREFETCHT0 (4096)(SI)
	PREFETCHT0 (4160)(SI)
	PREFETCHT0 (4224)(SI)
	PREFETCHT0 (4288)(SI)
	PREFETCHT0 (4352)(SI)
	VMOVDQU      bcastIdx<>+0(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      2(SI), X3
	VINSERTI128  $1, 18(SI), Y3, Y3
	Q8DOT(0, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+32(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      36(SI), X3
	VINSERTI128  $1, 52(SI), Y3, Y3
	Q8DOT(32, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+64(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      70(SI), X3
	VINSERTI128  $1, 86(SI), Y3, Y3
	Q8DOT(64, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+96(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      104(SI), X3
	VINSERTI128  $1, 120(SI), Y3, Y3
	Q8DOT(96, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+128(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      138(SI), X3
	VINSERTI128  $1, 154(SI), Y3, Y3
	Q8DOT(128, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+160(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      172(SI), X3
	VINSERTI128  $1, 188(SI), Y3, Y3
	Q8DOT(160, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+192(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      206(SI), X3
	VINSERTI128  $1, 222(SI), Y3, Y3
	Q8DOT(192, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+224(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      240(SI), X3
	VINSERTI128  $1, 256(SI), Y3, Y3
	Q8DOT(224, Y3, Y1, Y2)
	ADDQ $272, SI
	ADDQ $256, DI
	ADDQ $32, DX
	SUBQ $8, CX
	CMPQ CX, $8
	JGE  q80rloop8
	JMP  q80rloop2

q80rloop2:
	CMPQ    CX, $2
	JLT     q80rtail
	SCALE16(0, X2, Y2)
	// Two 16-byte loads: a 32-byte load that crosses a cache line (most
	// do, blocks being 34 bytes) costs several times more on some CPUs.
	VMOVDQU 2(SI), X3
	VINSERTI128 $1, 18(SI), Y3, Y3
	Q8DOT(0, Y3, Y0, Y2)
	ADDQ    $4, DX
	SCALE16(34, X4, Y4)
	VMOVDQU 36(SI), X3
	VINSERTI128 $1, 52(SI), Y3, Y3
	Q8DOT(32, Y3, Y1, Y4)
	ADDQ    $4, DX
	ADDQ    $68, SI
	ADDQ    $64, DI
	SUBQ    $2, CX
	JMP     q80rloop2

q80rtail:
	TESTQ   CX, CX
	JZ      q80rdone
	SCALE16(0, X2, Y2)
	VMOVDQU 2(SI), X3
	VINSERTI128 $1, 18(SI), Y3, Y3
	Q8DOT(0, Y3, Y0, Y2)

q80rdone:
	VADDPS Y1, Y0, Y0
	HSUM8
	MOVSS  X0, (BX)
	ADDQ   $4, BX
	ADDQ   rs+40(FP), R13
	DECQ   R12
	JNZ    q80rrow
	VZEROUPPER
	RET

// func dotQ4_0RowsAVX2(w *byte, x *int8, d, s8 *float32, nb, rows, rs int, out *float32)
TEXT ·dotQ4_0RowsAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R13
	MOVQ out+56(FP), BX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15
	BCAST($0x0f0f0f0f, X14, Y14)

q40rrow:
	MOVQ R13, SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ s8+24(FP), R12
	MOVQ nb+32(FP), CX
	VXORPS   Y0, Y0, Y0
	VXORPS   Y1, Y1, Y1
	VXORPS   Y8, Y8, Y8 // corrections, lane b%8
	VXORPS   X9, X9, X9 // corrections of the blocks after the last group of 8
	CMPQ     CX, $8
	JLT      q40rtail
	SCALES8X(18, 0, 0)

q40rloop8:
	VMOVAPS Y4, Y7
	CMPQ    CX, $16
	JLT     q40rcur8
	SCALES8X(18, 144, 32)

q40rcur8:
	PREFETCHT0  4096(SI)
	PREFETCHT0  4160(SI)
	PREFETCHT0  4224(SI)
	VFMADD231PS (R12), Y7, Y8
	VMOVDQU     pairIdx<>+0(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIR(0, 0, Y2, Y0)
	VMOVDQU     pairIdx<>+32(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIR(36, 64, Y2, Y1)
	VMOVDQU     pairIdx<>+64(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIR(72, 128, Y2, Y0)
	VMOVDQU     pairIdx<>+96(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIR(108, 192, Y2, Y1)
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $32, DX
	ADDQ $32, R12
	SUBQ $8, CX
	CMPQ CX, $8
	JGE  q40rloop8

q40rtail:
	// Up to 7 blocks: pairs alternate Y0, Y1, Y0, then a lone block.
	CMPQ CX, $2
	JLT  q40rlone0
	TPAIR(Y0)
	CMPQ CX, $2
	JLT  q40rlone1
	TPAIR(Y1)
	CMPQ CX, $2
	JLT  q40rlone0
	TPAIR(Y0)

q40rlone1:
	TESTQ CX, CX
	JZ    q40rdone
	S1(0, 0, X2)
	VFMADD231SS  (R12), X2, X9
	VBROADCASTSS X2, Y2
	VMOVDQU      2(SI), X3
	VPSRLW       $4, Y3, Y5
	VPAND        Y14, Y3, Y3
	VPAND        Y14, Y5, Y5
	VPMADDUBSW   (DI), Y3, Y3
	VPMADDUBSW   32(DI), Y5, Y5
	VPADDW       Y5, Y3, Y3
	VPMADDWD     Y15, Y3, Y3
	VCVTDQ2PS    Y3, Y3
	VFMADD231PS  Y3, Y2, Y1
	JMP          q40rdone

q40rlone0:
	TESTQ CX, CX
	JZ    q40rdone
	S1(0, 0, X2)
	VFMADD231SS  (R12), X2, X9
	VBROADCASTSS X2, Y2
	VMOVDQU      2(SI), X3
	VPSRLW       $4, Y3, Y5
	VPAND        Y14, Y3, Y3
	VPAND        Y14, Y5, Y5
	VPMADDUBSW   (DI), Y3, Y3
	VPMADDUBSW   32(DI), Y5, Y5
	VPADDW       Y5, Y3, Y3
	VPMADDWD     Y15, Y3, Y3
	VCVTDQ2PS    Y3, Y3
	VFMADD231PS  Y3, Y2, Y0

q40rdone:
	VADDPS Y1, Y0, Y0
	HSUM8
	HSUMR(Y8, X8, X12)
	VADDSS X9, X8, X8
	VSUBSS X8, X0, X0
	MOVSS  X0, (BX)
	ADDQ   $4, BX
	ADDQ   rs+48(FP), R13
	DECQ   rows+40(FP)
	JNZ    q40rrow
	VZEROUPPER
	RET

// The four-vector float dots (prefill): each 8 weights are converted once
// for four vectors x, x+xs, x+2xs, x+3xs (xs in bytes), two accumulators
// per vector: the float order (see the one-row kernels), so each result
// is the bits the one-row and four-row kernels give.

// func dotF32x4AVX2(w *byte, x *float32, xs, n int, out *float32)
TEXT ·dotF32x4AVX2(SB), NOSPLIT, $0-40
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   xs+16(FP), R8
	LEAQ   (R8)(R8*2), R9
	MOVQ   n+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f32x4loop16:
	CMPQ        CX, $16
	JLT         f32x4loop8
	VMOVUPS 0(SI), Y8
	VMOVUPS 32(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R8*1), Y8, Y1
	VFMADD231PS (DI)(R8*2), Y8, Y2
	VFMADD231PS (DI)(R9*1), Y8, Y3
	VFMADD231PS 32(DI), Y9, Y4
	VFMADD231PS 32(DI)(R8*1), Y9, Y5
	VFMADD231PS 32(DI)(R8*2), Y9, Y6
	VFMADD231PS 32(DI)(R9*1), Y9, Y7
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         f32x4loop16

f32x4loop8:
	CMPQ        CX, $8
	JLT         f32x4sum
	VMOVUPS 0(SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R8*1), Y8, Y1
	VFMADD231PS (DI)(R8*2), Y8, Y2
	VFMADD231PS (DI)(R9*1), Y8, Y3
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

f32x4sum:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	HSUMR(Y0, X0, X12)
	HSUMR(Y1, X1, X12)
	HSUMR(Y2, X2, X12)
	HSUMR(Y3, X3, X12)
	TESTQ CX, CX
	JZ    f32x4done

f32x4loop1:
	VMOVSS (SI), X8
	VFMADD231SS (DI), X8, X0
	VFMADD231SS (DI)(R8*1), X8, X1
	VFMADD231SS (DI)(R8*2), X8, X2
	VFMADD231SS (DI)(R9*1), X8, X3
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f32x4loop1

f32x4done:
	MOVQ   out+32(FP), BX
	VMOVSS X0, (BX)
	VMOVSS X1, 4(BX)
	VMOVSS X2, 8(BX)
	VMOVSS X3, 12(BX)
	VZEROUPPER
	RET

// func dotF16x4AVX2(w *byte, x *float32, xs, n int, out *float32)
TEXT ·dotF16x4AVX2(SB), NOSPLIT, $0-40
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   xs+16(FP), R8
	LEAQ   (R8)(R8*2), R9
	MOVQ   n+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f16x4loop16:
	CMPQ        CX, $16
	JLT         f16x4loop8
	VCVTPH2PS 0(SI), Y8
	VCVTPH2PS 16(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R8*1), Y8, Y1
	VFMADD231PS (DI)(R8*2), Y8, Y2
	VFMADD231PS (DI)(R9*1), Y8, Y3
	VFMADD231PS 32(DI), Y9, Y4
	VFMADD231PS 32(DI)(R8*1), Y9, Y5
	VFMADD231PS 32(DI)(R8*2), Y9, Y6
	VFMADD231PS 32(DI)(R9*1), Y9, Y7
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         f16x4loop16

f16x4loop8:
	CMPQ        CX, $8
	JLT         f16x4sum
	VCVTPH2PS 0(SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R8*1), Y8, Y1
	VFMADD231PS (DI)(R8*2), Y8, Y2
	VFMADD231PS (DI)(R9*1), Y8, Y3
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

f16x4sum:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	HSUMR(Y0, X0, X12)
	HSUMR(Y1, X1, X12)
	HSUMR(Y2, X2, X12)
	HSUMR(Y3, X3, X12)
	TESTQ CX, CX
	JZ    f16x4done

f16x4loop1:
	MOVWLZX   (SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VFMADD231SS (DI), X8, X0
	VFMADD231SS (DI)(R8*1), X8, X1
	VFMADD231SS (DI)(R8*2), X8, X2
	VFMADD231SS (DI)(R9*1), X8, X3
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f16x4loop1

f16x4done:
	MOVQ   out+32(FP), BX
	VMOVSS X0, (BX)
	VMOVSS X1, 4(BX)
	VMOVSS X2, 8(BX)
	VMOVSS X3, 12(BX)
	VZEROUPPER
	RET

// func dotBF16x4AVX2(w *byte, x *float32, xs, n int, out *float32)
TEXT ·dotBF16x4AVX2(SB), NOSPLIT, $0-40
	MOVQ   w+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   xs+16(FP), R8
	LEAQ   (R8)(R8*2), R9
	MOVQ   n+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

bf16x4loop16:
	CMPQ        CX, $16
	JLT         bf16x4loop8
	VPMOVZXWD 0(SI), Y8
	VPSLLD    $16, Y8, Y8
	VPMOVZXWD 16(SI), Y9
	VPSLLD    $16, Y9, Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R8*1), Y8, Y1
	VFMADD231PS (DI)(R8*2), Y8, Y2
	VFMADD231PS (DI)(R9*1), Y8, Y3
	VFMADD231PS 32(DI), Y9, Y4
	VFMADD231PS 32(DI)(R8*1), Y9, Y5
	VFMADD231PS 32(DI)(R8*2), Y9, Y6
	VFMADD231PS 32(DI)(R9*1), Y9, Y7
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         bf16x4loop16

bf16x4loop8:
	CMPQ        CX, $8
	JLT         bf16x4sum
	VPMOVZXWD 0(SI), Y8
	VPSLLD    $16, Y8, Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R8*1), Y8, Y1
	VFMADD231PS (DI)(R8*2), Y8, Y2
	VFMADD231PS (DI)(R9*1), Y8, Y3
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX

bf16x4sum:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	HSUMR(Y0, X0, X12)
	HSUMR(Y1, X1, X12)
	HSUMR(Y2, X2, X12)
	HSUMR(Y3, X3, X12)
	TESTQ CX, CX
	JZ    bf16x4done

bf16x4loop1:
	MOVWLZX (SI), AX
	SHLL    $16, AX
	VMOVD   AX, X8
	VFMADD231SS (DI), X8, X0
	VFMADD231SS (DI)(R8*1), X8, X1
	VFMADD231SS (DI)(R8*2), X8, X2
	VFMADD231SS (DI)(R9*1), X8, X3
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         bf16x4loop1

bf16x4done:
	MOVQ   out+32(FP), BX
	VMOVSS X0, (BX)
	VMOVSS X1, 4(BX)
	VMOVSS X2, 8(BX)
	VMOVSS X3, 12(BX)
	VZEROUPPER
	RET


// The four-vector Q4_K kernel (prefill): per super-block the scales, mins
// and nibbles are unpacked once for four vectors; per vector the same
// arithmetic as dotQ4_KAVX2. Vector t's quants are at x + t*xs, its scales
// at d + t*ds and its 16-sums at bsums + t*bs (byte strides).
// Frame: 0 scales (8 x int16), 16 mins (8 x int16), 32 d, 36 dmin of the
// weights, 48 the four mins accumulators.

// func dotQ4_Kx4AVX2(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)
TEXT ·dotQ4_Kx4AVX2(SB), NOSPLIT, $64-72
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ xs+40(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ ds+48(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ bs+56(FP), R12
	LEAQ (R12)(R12*2), R13
	BCAST($0x0f0f0f0f, X14, Y14)
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS X8, X8, X8
	VMOVDQU X8, 48(SP)

q4kx4loop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	MOVWLZX   (SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 32(SP)
	MOVWLZX   2(SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 36(SP)
	VMOVAPS   Y7, Y9 // KSCALES clobbers X7 (and R8-R13: reload the strides)
	KSCALES
	VMOVAPS   Y9, Y7
	VMOVDQU   X8, 16(SP)
	MOVQ      xs+40(FP), R8
	LEAQ      (R8)(R8*2), R9
	MOVQ      ds+48(FP), R10
	LEAQ      (R10)(R10*2), R11
	MOVQ      bs+56(FP), R12
	LEAQ      (R12)(R12*2), R13
	VPXOR     Y0, Y0, Y0
	VPXOR     Y1, Y1, Y1
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	K4X4PAIR(0)
	K4X4PAIR(1)
	K4X4PAIR(2)
	K4X4PAIR(3)
	K4X4FIN(Y0, X0, X4, (DX), (BX), 48)
	K4X4FIN(Y1, X1, X5, (DX)(R10*1), (BX)(R12*1), 52)
	K4X4FIN(Y2, X2, X6, (DX)(R10*2), (BX)(R12*2), 56)
	K4X4FIN(Y3, X3, X7, (DX)(R11*1), (BX)(R13*1), 60)
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q4kx4loop

	MOVQ out+64(FP), BX
	VSUBSS  48(SP), X4, X0
	VMOVSS  X0, (BX)
	VSUBSS  52(SP), X5, X0
	VMOVSS  X0, 4(BX)
	VSUBSS  56(SP), X6, X0
	VMOVSS  X0, 8(BX)
	VSUBSS  60(SP), X7, X0
	VMOVSS  X0, 12(BX)
	VZEROUPPER
	RET

// func dotQ6_Kx4AVX2(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)
//
// The four-vector Q6_K kernel (prefill): per quarter the 6-bit quants and
// the scale vector are built once for four vectors (quants x + t*xs,
// scales d + t*ds, byte strides); per vector the same arithmetic as
// dotQ6_KAVX2. Frame: 0 the 16 scales as int16, 32 the four accumulators.
TEXT ·dotQ6_Kx4AVX2(SB), NOSPLIT, $160-56
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVQ xs+32(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ ds+40(FP), R10
	LEAQ (R10)(R10*2), R11
	BCAST($0x0f0f0f0f, X14, Y14)
	BCAST($0x03030303, X13, Y13)
	BCAST($0x20202020, X12, Y12)
	BCAST($0x01000100, X11, X11)
	BCAST($0x03020302, X10, X10)
	VINSERTI128 $1, X10, Y11, Y11
	VXORPS  Y9, Y9, Y9
	VMOVUPS Y9, 32(SP)
	VMOVUPS Y9, 64(SP)
	VMOVUPS Y9, 96(SP)
	VMOVUPS Y9, 128(SP)

q6kx4loop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	PREFETCHT0 4288(SI)
	VPMOVSXBW 192(SI), Y9
	VMOVDQU   Y9, 0(SP)
	VPXOR     Y0, Y0, Y0
	VPXOR     Y1, Y1, Y1
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	VMOVDQU     0(SI), X4
	VINSERTI128 $1, 16(SI), Y4, Y4
	VMOVDQU     32(SI), X5
	VINSERTI128 $1, 48(SI), Y5, Y5
	VMOVDQU     128(SI), X6
	VINSERTI128 $1, 144(SI), Y6, Y6
	VPAND   Y14, Y4, Y7
	VPAND   Y13, Y6, Y8
	VPSLLW  $4, Y8, Y8
	VPOR    Y8, Y7, Y7
	VPBROADCASTD 0(SP), Y8
	VPSHUFB      Y11, Y8, Y8
	VPMADDUBSW   0(DI), Y7, Y9
	VPMADDUBSW   0(DI), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDUBSW   0(DI)(R8*1), Y7, Y9
	VPMADDUBSW   0(DI)(R8*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDUBSW   0(DI)(R8*2), Y7, Y9
	VPMADDUBSW   0(DI)(R8*2), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDUBSW   0(DI)(R9*1), Y7, Y9
	VPMADDUBSW   0(DI)(R9*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y3, Y3
	VPAND   Y14, Y5, Y7
	VPSRLW  $2, Y6, Y8
	VPAND   Y13, Y8, Y8
	VPSLLW  $4, Y8, Y8
	VPOR    Y8, Y7, Y7
	VPBROADCASTD 4(SP), Y8
	VPSHUFB      Y11, Y8, Y8
	VPMADDUBSW   32(DI), Y7, Y9
	VPMADDUBSW   32(DI), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDUBSW   32(DI)(R8*1), Y7, Y9
	VPMADDUBSW   32(DI)(R8*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDUBSW   32(DI)(R8*2), Y7, Y9
	VPMADDUBSW   32(DI)(R8*2), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDUBSW   32(DI)(R9*1), Y7, Y9
	VPMADDUBSW   32(DI)(R9*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y3, Y3
	VPSRLW  $4, Y4, Y7
	VPAND   Y14, Y7, Y7
	VPSRLW  $4, Y6, Y8
	VPAND   Y13, Y8, Y8
	VPSLLW  $4, Y8, Y8
	VPOR    Y8, Y7, Y7
	VPBROADCASTD 8(SP), Y8
	VPSHUFB      Y11, Y8, Y8
	VPMADDUBSW   64(DI), Y7, Y9
	VPMADDUBSW   64(DI), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDUBSW   64(DI)(R8*1), Y7, Y9
	VPMADDUBSW   64(DI)(R8*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDUBSW   64(DI)(R8*2), Y7, Y9
	VPMADDUBSW   64(DI)(R8*2), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDUBSW   64(DI)(R9*1), Y7, Y9
	VPMADDUBSW   64(DI)(R9*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y3, Y3
	VPSRLW  $4, Y5, Y7
	VPAND   Y14, Y7, Y7
	VPSRLW  $6, Y6, Y8
	VPAND   Y13, Y8, Y8
	VPSLLW  $4, Y8, Y8
	VPOR    Y8, Y7, Y7
	VPBROADCASTD 12(SP), Y8
	VPSHUFB      Y11, Y8, Y8
	VPMADDUBSW   96(DI), Y7, Y9
	VPMADDUBSW   96(DI), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDUBSW   96(DI)(R8*1), Y7, Y9
	VPMADDUBSW   96(DI)(R8*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDUBSW   96(DI)(R8*2), Y7, Y9
	VPMADDUBSW   96(DI)(R8*2), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDUBSW   96(DI)(R9*1), Y7, Y9
	VPMADDUBSW   96(DI)(R9*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y3, Y3
	VMOVDQU     64(SI), X4
	VINSERTI128 $1, 80(SI), Y4, Y4
	VMOVDQU     96(SI), X5
	VINSERTI128 $1, 112(SI), Y5, Y5
	VMOVDQU     160(SI), X6
	VINSERTI128 $1, 176(SI), Y6, Y6
	VPAND   Y14, Y4, Y7
	VPAND   Y13, Y6, Y8
	VPSLLW  $4, Y8, Y8
	VPOR    Y8, Y7, Y7
	VPBROADCASTD 16(SP), Y8
	VPSHUFB      Y11, Y8, Y8
	VPMADDUBSW   128(DI), Y7, Y9
	VPMADDUBSW   128(DI), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDUBSW   128(DI)(R8*1), Y7, Y9
	VPMADDUBSW   128(DI)(R8*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDUBSW   128(DI)(R8*2), Y7, Y9
	VPMADDUBSW   128(DI)(R8*2), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDUBSW   128(DI)(R9*1), Y7, Y9
	VPMADDUBSW   128(DI)(R9*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y3, Y3
	VPAND   Y14, Y5, Y7
	VPSRLW  $2, Y6, Y8
	VPAND   Y13, Y8, Y8
	VPSLLW  $4, Y8, Y8
	VPOR    Y8, Y7, Y7
	VPBROADCASTD 20(SP), Y8
	VPSHUFB      Y11, Y8, Y8
	VPMADDUBSW   160(DI), Y7, Y9
	VPMADDUBSW   160(DI), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDUBSW   160(DI)(R8*1), Y7, Y9
	VPMADDUBSW   160(DI)(R8*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDUBSW   160(DI)(R8*2), Y7, Y9
	VPMADDUBSW   160(DI)(R8*2), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDUBSW   160(DI)(R9*1), Y7, Y9
	VPMADDUBSW   160(DI)(R9*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y3, Y3
	VPSRLW  $4, Y4, Y7
	VPAND   Y14, Y7, Y7
	VPSRLW  $4, Y6, Y8
	VPAND   Y13, Y8, Y8
	VPSLLW  $4, Y8, Y8
	VPOR    Y8, Y7, Y7
	VPBROADCASTD 24(SP), Y8
	VPSHUFB      Y11, Y8, Y8
	VPMADDUBSW   192(DI), Y7, Y9
	VPMADDUBSW   192(DI), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDUBSW   192(DI)(R8*1), Y7, Y9
	VPMADDUBSW   192(DI)(R8*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDUBSW   192(DI)(R8*2), Y7, Y9
	VPMADDUBSW   192(DI)(R8*2), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDUBSW   192(DI)(R9*1), Y7, Y9
	VPMADDUBSW   192(DI)(R9*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y3, Y3
	VPSRLW  $4, Y5, Y7
	VPAND   Y14, Y7, Y7
	VPSRLW  $6, Y6, Y8
	VPAND   Y13, Y8, Y8
	VPSLLW  $4, Y8, Y8
	VPOR    Y8, Y7, Y7
	VPBROADCASTD 28(SP), Y8
	VPSHUFB      Y11, Y8, Y8
	VPMADDUBSW   224(DI), Y7, Y9
	VPMADDUBSW   224(DI), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPMADDUBSW   224(DI)(R8*1), Y7, Y9
	VPMADDUBSW   224(DI)(R8*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y1, Y1
	VPMADDUBSW   224(DI)(R8*2), Y7, Y9
	VPMADDUBSW   224(DI)(R8*2), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPMADDUBSW   224(DI)(R9*1), Y7, Y9
	VPMADDUBSW   224(DI)(R9*1), Y12, Y10
	VPSUBW       Y10, Y9, Y9
	VPMADDWD     Y8, Y9, Y9
	VPADDD       Y9, Y3, Y3
	MOVWLZX   208(SI), AX
	VMOVD     AX, X4
	VCVTPH2PS X4, X4
	VMULSS       (DX), X4, X5
	VBROADCASTSS X5, Y5
	IRED8(Y0, X0, X6)
	VCVTDQ2PS    X0, X0
	VMOVSS       32(SP), X6
	VFMADD231SS  X0, X5, X6
	VMOVSS       X6, 32(SP)
	VMULSS       (DX)(R10*1), X4, X5
	VBROADCASTSS X5, Y5
	IRED8(Y1, X1, X6)
	VCVTDQ2PS    X1, X1
	VMOVSS       64(SP), X6
	VFMADD231SS  X1, X5, X6
	VMOVSS       X6, 64(SP)
	VMULSS       (DX)(R10*2), X4, X5
	VBROADCASTSS X5, Y5
	IRED8(Y2, X2, X6)
	VCVTDQ2PS    X2, X2
	VMOVSS       96(SP), X6
	VFMADD231SS  X2, X5, X6
	VMOVSS       X6, 96(SP)
	VMULSS       (DX)(R11*1), X4, X5
	VBROADCASTSS X5, Y5
	IRED8(Y3, X3, X6)
	VCVTDQ2PS    X3, X3
	VMOVSS       128(SP), X6
	VFMADD231SS  X3, X5, X6
	VMOVSS       X6, 128(SP)
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q6kx4loop

	MOVQ out+48(FP), BX
	VMOVSS  32(SP), X0
	VMOVSS  X0, 0(BX)
	VMOVSS  64(SP), X0
	VMOVSS  X0, 4(BX)
	VMOVSS  96(SP), X0
	VMOVSS  X0, 8(BX)
	VMOVSS  128(SP), X0
	VMOVSS  X0, 12(BX)
	VZEROUPPER
	RET

// func swigluAVX2(out, gate, up *float32, n int)
//
// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i] for n (a multiple of 8)
// elements, with a float32 exp (Cephes expf: range reduction by ln 2, a
// degree-5 polynomial; about 2 ulp), inputs clamped to ±88.376.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	BCAST($0x42b0c0a5, X15, Y15) // 88.3762626647949
	BCAST($0x3fb8aa3b, X14, Y14) // log2(e)
	BCAST($0x3f000000, X13, Y13) // 0.5
	BCAST($0x3f318000, X12, Y12) // C1 = 0.693359375
	BCAST($0xb95e8083, X11, Y11) // C2 = -2.12194440e-4
	BCAST($0x3f800000, X10, Y10) // 1.0

swloop:
	VMOVUPS (SI), Y0           // g
	VXORPS  Y1, Y1, Y1
	VSUBPS  Y0, Y1, Y1         // x = -g
	VMINPS  Y15, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VSUBPS  Y15, Y2, Y2        // -88.376
	VMAXPS  Y2, Y1, Y1
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
	VMULPS  Y2, Y4, Y4         // exp(-g)
	VADDPS  Y10, Y4, Y4        // 1 + exp(-g)
	VDIVPS  Y4, Y0, Y0         // g / (1 + exp(-g))
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ  swloop
	VZEROUPPER
	RET

// The AVX-VNNI forms of the Q4_K and Q5_K kernels (useAVXVNNI: CPUs with
// the VEX-encoded VNNI but not AVX-512): VPDPWSSD (in bytes:
// vnni_amd64.h) multiplies the int16 pair sums by the scales and
// accumulates, one instruction for VPMADDWD and VPADDD.

// K4MULV(g): K4MUL with VPDPWSSD.
#define K4MULV(g) \
	VPMADDUBSW   (64*g)(DI), Y10, Y10    \
	VPMADDUBSW   (64*g+32)(DI), Y11, Y11 \
	VPBROADCASTW (4*g)(SP), Y12          \
	VPDPWSSDV(10, 12, 1)                 \
	VPBROADCASTW (4*g+2)(SP), Y12        \
	VPDPWSSDV(11, 12, 1)

// K4X4PAIRV(g): K4X4PAIR with VPDPWSSD.
#define K4X4PAIRV(g) \
	VMOVDQU      (16+32*g)(SI), X10                 \
	VINSERTI128  $1, (32+32*g)(SI), Y10, Y10        \
	VPSRLW       $4, Y10, Y11                       \
	VPAND        Y14, Y10, Y10                      \
	VPAND        Y14, Y11, Y11                      \
	VPBROADCASTW (4*g)(SP), Y12                     \
	VPBROADCASTW (4*g+2)(SP), Y13                   \
	VPMADDUBSW   (64*g)(DI), Y10, Y8                \
	VPMADDUBSW   (64*g+32)(DI), Y11, Y9             \
	VPDPWSSDV(8, 12, 0)                             \
	VPDPWSSDV(9, 13, 0)                             \
	VPMADDUBSW   (64*g)(DI)(R8*1), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R8*1), Y11, Y9       \
	VPDPWSSDV(8, 12, 1)                             \
	VPDPWSSDV(9, 13, 1)                             \
	VPMADDUBSW   (64*g)(DI)(R8*2), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R8*2), Y11, Y9       \
	VPDPWSSDV(8, 12, 2)                             \
	VPDPWSSDV(9, 13, 2)                             \
	VPMADDUBSW   (64*g)(DI)(R9*1), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R9*1), Y11, Y9       \
	VPDPWSSDV(8, 12, 3)                             \
	VPDPWSSDV(9, 13, 3)

// func dotQ4_KVNNI(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
//
// dotQ4_KVNNI is dotQ4_KAVX2 with AVX-VNNI: VPDPWSSD scales and adds the
// pair sums in one instruction.
TEXT ·dotQ4_KVNNI(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	BCAST($0x0f0f0f0f, X14, Y14)
	VXORPS Y0, Y0, Y0
	VXORPS X5, X5, X5

q4kvloop:
	K4SUPER(K4MULV)
	DECQ CX
	JNZ  q4kvloop

	VSUBSS X5, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// func dotQ4_KRowsVNNI(w *byte, x *int8, d *float32, bsums *int16, nb, rows, rs int, out *float32)
//
// dotQ4_KVNNI of rows > 0 rows (rs bytes apart from w) with one vector,
// each row's result to out[r]: the same instructions a row, no call a
// row. Frame: 0 the scales (KSCALES), 32 the row's start, 40 where its
// result goes, 48 the rows left (KSCALES takes R8-R13).
TEXT ·dotQ4_KRowsVNNI(SB), NOSPLIT, $56-64
	MOVQ w+0(FP), AX
	MOVQ AX, 32(SP)
	MOVQ out+56(FP), AX
	MOVQ AX, 40(SP)
	MOVQ rows+40(FP), AX
	MOVQ AX, 48(SP)
	BCAST($0x0f0f0f0f, X14, Y14)

q4krvrow:
	MOVQ   32(SP), SI
	MOVQ   x+8(FP), DI
	MOVQ   d+16(FP), DX
	MOVQ   bsums+24(FP), BX
	MOVQ   nb+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS X5, X5, X5

q4krvloop:
	K4SUPER(K4MULV)
	DECQ CX
	JNZ  q4krvloop

	VSUBSS X5, X0, X0
	MOVQ   40(SP), AX
	MOVSS  X0, (AX)
	ADDQ   $4, 40(SP)
	MOVQ   rs+48(FP), AX
	ADDQ   AX, 32(SP)
	DECQ   48(SP)
	JNZ    q4krvrow
	VZEROUPPER
	RET

// func dotQ4_Kx4VNNI(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)
//
// dotQ4_Kx4VNNI is dotQ4_Kx4AVX2 with AVX-VNNI (VPDPWSSD).
TEXT ·dotQ4_Kx4VNNI(SB), NOSPLIT, $64-72
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ xs+40(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ ds+48(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ bs+56(FP), R12
	LEAQ (R12)(R12*2), R13
	BCAST($0x0f0f0f0f, X14, Y14)
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS X8, X8, X8
	VMOVDQU X8, 48(SP)

q4kx4vloop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	MOVWLZX   (SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 32(SP)
	MOVWLZX   2(SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 36(SP)
	VMOVAPS   Y7, Y9 // KSCALES clobbers X7 (and R8-R13: reload the strides)
	KSCALES
	VMOVAPS   Y9, Y7
	VMOVDQU   X8, 16(SP)
	MOVQ      xs+40(FP), R8
	LEAQ      (R8)(R8*2), R9
	MOVQ      ds+48(FP), R10
	LEAQ      (R10)(R10*2), R11
	MOVQ      bs+56(FP), R12
	LEAQ      (R12)(R12*2), R13
	VPXOR     Y0, Y0, Y0
	VPXOR     Y1, Y1, Y1
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	K4X4PAIRV(0)
	K4X4PAIRV(1)
	K4X4PAIRV(2)
	K4X4PAIRV(3)
	K4X4FIN(Y0, X0, X4, (DX), (BX), 48)
	K4X4FIN(Y1, X1, X5, (DX)(R10*1), (BX)(R12*1), 52)
	K4X4FIN(Y2, X2, X6, (DX)(R10*2), (BX)(R12*2), 56)
	K4X4FIN(Y3, X3, X7, (DX)(R11*1), (BX)(R13*1), 60)
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q4kx4vloop

	MOVQ out+64(FP), BX
	VSUBSS  48(SP), X4, X0
	VMOVSS  X0, (BX)
	VSUBSS  52(SP), X5, X0
	VMOVSS  X0, 4(BX)
	VSUBSS  56(SP), X6, X0
	VMOVSS  X0, 8(BX)
	VSUBSS  60(SP), X7, X0
	VMOVSS  X0, 12(BX)
	VZEROUPPER
	RET

// K5X4PAIRV(g): K4X4PAIRV for Q5_K: the quants of sub-blocks 2g, 2g+1 at
// SI+48+32g, and their fifth bits, bits 2g and 2g+1 of the qh bytes at
// SI+16, moved to bit 4 (a word shift keeps each byte's low bits its own
// for shifts up to 6; Y15 = 0x10 bytes).
#define K5X4PAIRV(g) \
	VMOVDQU      (48+32*g)(SI), X10                 \
	VINSERTI128  $1, (64+32*g)(SI), Y10, Y10        \
	VPSRLW       $4, Y10, Y11                       \
	VPAND        Y14, Y10, Y10                      \
	VPAND        Y14, Y11, Y11                      \
	VMOVDQU      16(SI), X8                         \
	VINSERTI128  $1, 32(SI), Y8, Y8                 \
	VPSRLW       $(2*g), Y8, Y8                     \
	VPSLLW       $4, Y8, Y9                         \
	VPAND        Y15, Y9, Y9                        \
	VPOR         Y9, Y10, Y10                       \
	VPSLLW       $3, Y8, Y9                         \
	VPAND        Y15, Y9, Y9                        \
	VPOR         Y9, Y11, Y11                       \
	VPBROADCASTW (4*g)(SP), Y12                     \
	VPBROADCASTW (4*g+2)(SP), Y13                   \
	VPMADDUBSW   (64*g)(DI), Y10, Y8                \
	VPMADDUBSW   (64*g+32)(DI), Y11, Y9             \
	VPDPWSSDV(8, 12, 0)                             \
	VPDPWSSDV(9, 13, 0)                             \
	VPMADDUBSW   (64*g)(DI)(R8*1), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R8*1), Y11, Y9       \
	VPDPWSSDV(8, 12, 1)                             \
	VPDPWSSDV(9, 13, 1)                             \
	VPMADDUBSW   (64*g)(DI)(R8*2), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R8*2), Y11, Y9       \
	VPDPWSSDV(8, 12, 2)                             \
	VPDPWSSDV(9, 13, 2)                             \
	VPMADDUBSW   (64*g)(DI)(R9*1), Y10, Y8          \
	VPMADDUBSW   (64*g+32)(DI)(R9*1), Y11, Y9       \
	VPDPWSSDV(8, 12, 3)                             \
	VPDPWSSDV(9, 13, 3)

// func dotQ5_Kx4VNNI(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)
//
// dotQ5_Kx4VNNI is dotQ4_Kx4VNNI for Q5_K rows, the fifth bits added by
// K5X4PAIRV (no AVX2 twin; per vector it computes exactly what
// dotQ5_KVNNI computes).
TEXT ·dotQ5_Kx4VNNI(SB), NOSPLIT, $64-72
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ xs+40(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ ds+48(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ bs+56(FP), R12
	LEAQ (R12)(R12*2), R13
	BCAST($0x0f0f0f0f, X14, Y14)
	BCAST($0x10101010, X15, Y15)
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS X8, X8, X8
	VMOVDQU X8, 48(SP)

q5kx4vloop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	MOVWLZX   (SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 32(SP)
	MOVWLZX   2(SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 36(SP)
	VMOVAPS   Y7, Y9 // KSCALES clobbers X7 (and R8-R13: reload the strides)
	KSCALES
	VMOVAPS   Y9, Y7
	VMOVDQU   X8, 16(SP)
	MOVQ      xs+40(FP), R8
	LEAQ      (R8)(R8*2), R9
	MOVQ      ds+48(FP), R10
	LEAQ      (R10)(R10*2), R11
	MOVQ      bs+56(FP), R12
	LEAQ      (R12)(R12*2), R13
	VPXOR     Y0, Y0, Y0
	VPXOR     Y1, Y1, Y1
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	K5X4PAIRV(0)
	K5X4PAIRV(1)
	K5X4PAIRV(2)
	K5X4PAIRV(3)
	K4X4FIN(Y0, X0, X4, (DX), (BX), 48)
	K4X4FIN(Y1, X1, X5, (DX)(R10*1), (BX)(R12*1), 52)
	K4X4FIN(Y2, X2, X6, (DX)(R10*2), (BX)(R12*2), 56)
	K4X4FIN(Y3, X3, X7, (DX)(R11*1), (BX)(R13*1), 60)
	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q5kx4vloop

	MOVQ out+64(FP), BX
	VSUBSS  48(SP), X4, X0
	VMOVSS  X0, (BX)
	VSUBSS  52(SP), X5, X0
	VMOVSS  X0, 4(BX)
	VSUBSS  56(SP), X6, X0
	VMOVSS  X0, 8(BX)
	VSUBSS  60(SP), X7, X0
	VMOVSS  X0, 12(BX)
	VZEROUPPER
	RET

// func dotQ5_KVNNI(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
//
// dotQ5_KVNNI is dotQ5_KAVX2 with AVX-VNNI (VPDPWSSD), as dotQ4_KVNNI.
TEXT ·dotQ5_KVNNI(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	BCAST($0x0f0f0f0f, X14, Y14)
	BCAST($0x01010101, X15, Y15)
	VXORPS Y0, Y0, Y0
	VXORPS X5, X5, X5

q5kvloop:
	PREFETCHT0 (4096)(SI)
	PREFETCHT0 (4160)(SI)
	PREFETCHT0 (4224)(SI)
	KDSCALES
	KSCALES
	KMINS
	VPXOR   Y1, Y1, Y1
	VMOVDQU     16(SI), X13
	VINSERTI128 $1, 32(SI), Y13, Y13
	K4LOAD(48)
	K5BITS
	K4MULV(0)
	K4LOAD(80)
	K5BITS
	K4MULV(1)
	K4LOAD(112)
	K5BITS
	K4MULV(2)
	K4LOAD(144)
	K5BITS
	K4MULV(3)
	IRED8(Y1, X1, X3)
	VCVTDQ2PS   X1, X1
	VFMADD231SS X1, X2, X0
	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q5kvloop

	VSUBSS X5, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// The VNNI kernels of Q8_0 (one vector, many rows, four vectors), Q4_0
// (one vector, many rows) and Q6_K (one vector, four): one body (dot_vnni_amd64.h) assembled with the VEX instructions
// (*VNNI, "avxvnni") and with the EVEX ones (*AVX512, "avx512"), in
// 32-byte registers like the other AVX-512 kernels (dot_avx512_amd64.s
// says why). VNNIB and VNNIW name the byte and word dot products; the
// macros below are the AVX2 ones with them.

// Q8DOTN(xoff, W, ACC, S): Q8DOT with VPDPBUSD: |W| (unsigned) against x
// with W's signs, so -128 weights count as 128 * -x (W must be Y3;
// clobbers Y3, Y5, Y6).
#define Q8DOTN(xoff, W, ACC, S) \
	VMOVDQU     xoff(DI), Y5 \
	VPSIGNB     W, Y5, Y5    \
	VPABSB      W, W         \
	VPXOR       Y6, Y6, Y6   \
	VNNIB(5, 3, 6)           \
	VCVTDQ2PS   Y6, Y6       \
	VFMADD231PS Y6, S, ACC

// Q4NIB(W): the nibbles of the 32 quant bytes in Y3 (two blocks' 16
// each, or one block's and zeros) times the paired activations at W and
// W+32 into Y6, as int32 lanes (Y14 = 0x0f bytes; clobbers Y3, Y5,
// Y10, Y11).
#define Q4NIB(W) \
	VPSRLW      $4, Y3, Y5     \
	VPAND       Y14, Y3, Y3    \
	VPAND       Y14, Y5, Y5    \
	VMOVDQU     (W)(DI), Y10   \
	VMOVDQU     (W+32)(DI), Y11 \
	VPXOR       Y6, Y6, Y6     \
	VNNIB(10, 3, 6)            \
	VNNIB(11, 5, 6)

// Q4PAIRN(wo, xo, S, ACC): Q4PAIR with VPDPBUSD.
#define Q4PAIRN(wo, xo, S, ACC) \
	VMOVDQU     (wo+2)(SI), X3             \
	VINSERTI128 $1, (wo+20)(SI), Y3, Y3    \
	Q4NIB(xo)                              \
	VCVTDQ2PS   Y6, Y6                     \
	VFMADD231PS Y6, S, ACC

// Q4LONEN(ACC): the lone last block (scale in Y2) with its zero partner.
#define Q4LONEN(ACC) \
	VMOVDQU     2(SI), X3   \
	Q4NIB(0)                \
	VCVTDQ2PS   Y6, Y6      \
	VFMADD231PS Y6, Y2, ACC

// TPAIRN(ACC): TPAIR with Q4PAIRN.
#define TPAIRN(ACC) \
	S1(0, 0, X2)                  \
	VFMADD231SS  (R12), X2, X9    \
	S1(18, 4, X4)                 \
	VFMADD231SS  4(R12), X4, X9   \
	VBROADCASTSS X2, X2           \
	VBROADCASTSS X4, X4           \
	VINSERTF128  $1, X4, Y2, Y2   \
	Q4PAIRN(0, 0, Y2, ACC)        \
	ADDQ         $36, SI          \
	ADDQ         $64, DI          \
	ADDQ         $8, DX           \
	ADDQ         $8, R12          \
	SUBQ         $2, CX

// K6QN(m, Q): K6Q with VPDPWSSD: Y1 += scales · (Q·x) and Y9 += scales ·
// (32·x), the caller taking Y9 from Y1 once per block (Q must be Y7;
// clobbers Y7, Y10, Y15).
#define K6QN(m, Q) \
	VPMADDUBSW   (32*(m))(DI), Q, Q     \
	VPMADDUBSW   (32*(m))(DI), Y12, Y10 \
	VPBROADCASTD (4*(m))(SP), Y15       \
	VPSHUFB      Y11, Y15, Y15          \
	VNNIW(7, 15, 1)                     \
	VNNIW(10, 15, 9)

// K6HALFN(h): K6HALF with K6QN.
#define K6HALFN(h) \
	VMOVDQU     (64*(h))(SI), X4                 \
	VINSERTI128 $1, (64*(h)+16)(SI), Y4, Y4      \
	VMOVDQU     (64*(h)+32)(SI), X5              \
	VINSERTI128 $1, (64*(h)+48)(SI), Y5, Y5      \
	VMOVDQU     (128+32*(h))(SI), X6             \
	VINSERTI128 $1, (128+32*(h)+16)(SI), Y6, Y6  \
	VPAND   Y14, Y4, Y7           \
	VPAND   Y13, Y6, Y8           \
	VPSLLW  $4, Y8, Y8            \
	VPOR    Y8, Y7, Y7            \
	K6QN(4*h, Y7)                 \
	VPAND   Y14, Y5, Y7           \
	VPSRLW  $2, Y6, Y8            \
	VPAND   Y13, Y8, Y8           \
	VPSLLW  $4, Y8, Y8            \
	VPOR    Y8, Y7, Y7            \
	K6QN(4*h+1, Y7)               \
	VPSRLW  $4, Y4, Y7            \
	VPAND   Y14, Y7, Y7           \
	VPSRLW  $4, Y6, Y8            \
	VPAND   Y13, Y8, Y8           \
	VPSLLW  $4, Y8, Y8            \
	VPOR    Y8, Y7, Y7            \
	K6QN(4*h+2, Y7)               \
	VPSRLW  $4, Y5, Y7            \
	VPAND   Y14, Y7, Y7           \
	VPSRLW  $6, Y6, Y8            \
	VPAND   Y13, Y8, Y8           \
	VPSLLW  $4, Y8, Y8            \
	VPOR    Y8, Y7, Y7            \
	K6QN(4*h+3, Y7)

// TOKN(xaddr, poff, ACC): TOK with VPDPBUSD (|Y8| in Y9 against x with
// Y8's signs; clobbers Y11-Y13).
#define TOKN(xaddr, poff, ACC) \
	VMOVDQU      xaddr, Y11     \
	VPSIGNB      Y8, Y11, Y11   \
	VPXOR        Y13, Y13, Y13  \
	VNNIB(11, 9, 13)            \
	VCVTDQ2PS    Y13, Y13       \
	VBROADCASTSS poff(SP), Y12  \
	VFMADD231PS  Y13, Y12, ACC

// TOK4N(xo, do, A0, A1, A2, A3): TOK4 with TOKN.
#define TOK4N(xo, do, A0, A1, A2, A3) \
	VMULPS  do(DX), X10, X12      \
	VMOVUPS X12, 0(SP)            \
	TOKN(xo(DI), 0, A0)           \
	TOKN(xo(DI)(R8*1), 4, A1)     \
	TOKN(xo(DI)(R8*2), 8, A2)     \
	TOKN(xo(DI)(R9*1), 12, A3)

// X4SETUPN: X4SETUP without the int16 ones (VPDPBUSD needs none).
#define X4SETUPN \
	LEAQ     (R8)(R8*2), R9     \
	VXORPS   Y0, Y0, Y0         \
	VXORPS   Y1, Y1, Y1         \
	VXORPS   Y2, Y2, Y2         \
	VXORPS   Y3, Y3, Y3         \
	VXORPS   Y4, Y4, Y4         \
	VXORPS   Y5, Y5, Y5         \
	VXORPS   Y6, Y6, Y6         \
	VXORPS   Y7, Y7, Y7

#define VNNIB(src2, src1, dst) VPDPBUSDV(src2, src1, dst)
#define VNNIW(src2, src1, dst) VPDPWSSDV(src2, src1, dst)
#define FN_Q80 ·dotQ8_0VNNI
#define FN_Q80ROWS ·dotQ8_0RowsVNNI
#define FN_Q40 ·dotQ4_0VNNI
#define FN_Q40ROWS ·dotQ4_0RowsVNNI
#define FN_Q6K ·dotQ6_KVNNI
#define FN_Q80X4 ·dotQ8_0x4VNNI
#define FN_Q6KX4 ·dotQ6_Kx4VNNI
#include "dot_vnni_amd64.h"
#undef VNNIB
#undef VNNIW
#undef FN_Q80
#undef FN_Q80ROWS
#undef FN_Q40
#undef FN_Q40ROWS
#undef FN_Q6K
#undef FN_Q80X4
#undef FN_Q6KX4

#define VNNIB(src2, src1, dst) VPDPBUSDE(src2, src1, dst)
#define VNNIW(src2, src1, dst) VPDPWSSDE(src2, src1, dst)
#define FN_Q80 ·dotQ8_0AVX512
#define FN_Q80ROWS ·dotQ8_0RowsAVX512
#define FN_Q40 ·dotQ4_0AVX512
#define FN_Q40ROWS ·dotQ4_0RowsAVX512
#define FN_Q6K ·dotQ6_KAVX512
#define FN_Q80X4 ·dotQ8_0x4AVX512
#define FN_Q6KX4 ·dotQ6_Kx4AVX512
#include "dot_vnni_amd64.h"

// The four-vector Q8_0 kernel in 64-byte registers (AVX-512 F, BW and
// VNNI), for CPUs whose vector units take 64 bytes at the rate they take
// 32 (AMD's Zen 4 and 5; on Intel a 64-byte instruction shuts a port,
// see dot_avx512_amd64.s): two blocks a step, block b (even) in the low
// half of each register and b+1 in the high half. Those halves are the
// 32-byte kernel's two accumulator sets (even and odd blocks), so every
// lane sees the same fused multiply-adds in the same order: the same
// bits as dotQ8_0x4AVX512. Signs: VPMOVB2M takes the weights' sign bits
// to K1 once a step and each vector's x is negated under it (VPSIGNB has
// no 64-byte form); |w| is unsigned for VPDPBUSD, as in Q8DOTN.

// Q8ZTOK(xaddr, IDX, ACC): ACC += [scale of b x8, of b+1 x8] * lanes(w · x),
// the scales picked by IDX out of Z12. Clobbers Z11, Z13, Z14.
#define Q8ZTOK(xaddr, IDX, ACC) \
	VMOVDQU64   xaddr, Z11         \
	VPSUBB      Z11, Z31, K1, Z11  \
	VPXORD      Z13, Z13, Z13      \
	VPDPBUSD    Z11, Z9, Z13       \
	VCVTDQ2PS   Z13, Z13           \
	VPERMPS     Z12, IDX, Z14      \
	VFMADD231PS Z13, Z14, ACC

// The VPERMPS indices of Q8ZTOK, vector t's: t eight times, then t+4
// (its product for block b, then for b+1); and [0 x4, 1 x4], which makes
// [fp16 d of b x4, of b+1 x4].
DATA q8zIdx<>+0(SB)/8, $0x0000000000000000
DATA q8zIdx<>+8(SB)/8, $0x0000000000000000
DATA q8zIdx<>+16(SB)/8, $0x0000000000000000
DATA q8zIdx<>+24(SB)/8, $0x0000000000000000
DATA q8zIdx<>+32(SB)/8, $0x0000000400000004
DATA q8zIdx<>+40(SB)/8, $0x0000000400000004
DATA q8zIdx<>+48(SB)/8, $0x0000000400000004
DATA q8zIdx<>+56(SB)/8, $0x0000000400000004
DATA q8zIdx<>+64(SB)/8, $0x0000000100000001
DATA q8zIdx<>+72(SB)/8, $0x0000000100000001
DATA q8zIdx<>+80(SB)/8, $0x0000000100000001
DATA q8zIdx<>+88(SB)/8, $0x0000000100000001
DATA q8zIdx<>+96(SB)/8, $0x0000000500000005
DATA q8zIdx<>+104(SB)/8, $0x0000000500000005
DATA q8zIdx<>+112(SB)/8, $0x0000000500000005
DATA q8zIdx<>+120(SB)/8, $0x0000000500000005
DATA q8zIdx<>+128(SB)/8, $0x0000000200000002
DATA q8zIdx<>+136(SB)/8, $0x0000000200000002
DATA q8zIdx<>+144(SB)/8, $0x0000000200000002
DATA q8zIdx<>+152(SB)/8, $0x0000000200000002
DATA q8zIdx<>+160(SB)/8, $0x0000000600000006
DATA q8zIdx<>+168(SB)/8, $0x0000000600000006
DATA q8zIdx<>+176(SB)/8, $0x0000000600000006
DATA q8zIdx<>+184(SB)/8, $0x0000000600000006
DATA q8zIdx<>+192(SB)/8, $0x0000000300000003
DATA q8zIdx<>+200(SB)/8, $0x0000000300000003
DATA q8zIdx<>+208(SB)/8, $0x0000000300000003
DATA q8zIdx<>+216(SB)/8, $0x0000000300000003
DATA q8zIdx<>+224(SB)/8, $0x0000000700000007
DATA q8zIdx<>+232(SB)/8, $0x0000000700000007
DATA q8zIdx<>+240(SB)/8, $0x0000000700000007
DATA q8zIdx<>+248(SB)/8, $0x0000000700000007
DATA q8zIdx<>+256(SB)/8, $0x0000000000000000
DATA q8zIdx<>+264(SB)/8, $0x0000000000000000
DATA q8zIdx<>+272(SB)/8, $0x0000000100000001
DATA q8zIdx<>+280(SB)/8, $0x0000000100000001
GLOBL q8zIdx<>(SB), RODATA|NOPTR, $288

// The VPERMPS indices of dotQ8_0x8Z's second four (vectors 4-7: their
// products sit in Z12's high half): 8+u eight times, then 12+u.
DATA q8zIdx8<>+0(SB)/8, $0x0000000800000008
DATA q8zIdx8<>+8(SB)/8, $0x0000000800000008
DATA q8zIdx8<>+16(SB)/8, $0x0000000800000008
DATA q8zIdx8<>+24(SB)/8, $0x0000000800000008
DATA q8zIdx8<>+32(SB)/8, $0x0000000c0000000c
DATA q8zIdx8<>+40(SB)/8, $0x0000000c0000000c
DATA q8zIdx8<>+48(SB)/8, $0x0000000c0000000c
DATA q8zIdx8<>+56(SB)/8, $0x0000000c0000000c
DATA q8zIdx8<>+64(SB)/8, $0x0000000900000009
DATA q8zIdx8<>+72(SB)/8, $0x0000000900000009
DATA q8zIdx8<>+80(SB)/8, $0x0000000900000009
DATA q8zIdx8<>+88(SB)/8, $0x0000000900000009
DATA q8zIdx8<>+96(SB)/8, $0x0000000d0000000d
DATA q8zIdx8<>+104(SB)/8, $0x0000000d0000000d
DATA q8zIdx8<>+112(SB)/8, $0x0000000d0000000d
DATA q8zIdx8<>+120(SB)/8, $0x0000000d0000000d
DATA q8zIdx8<>+128(SB)/8, $0x0000000a0000000a
DATA q8zIdx8<>+136(SB)/8, $0x0000000a0000000a
DATA q8zIdx8<>+144(SB)/8, $0x0000000a0000000a
DATA q8zIdx8<>+152(SB)/8, $0x0000000a0000000a
DATA q8zIdx8<>+160(SB)/8, $0x0000000e0000000e
DATA q8zIdx8<>+168(SB)/8, $0x0000000e0000000e
DATA q8zIdx8<>+176(SB)/8, $0x0000000e0000000e
DATA q8zIdx8<>+184(SB)/8, $0x0000000e0000000e
DATA q8zIdx8<>+192(SB)/8, $0x0000000b0000000b
DATA q8zIdx8<>+200(SB)/8, $0x0000000b0000000b
DATA q8zIdx8<>+208(SB)/8, $0x0000000b0000000b
DATA q8zIdx8<>+216(SB)/8, $0x0000000b0000000b
DATA q8zIdx8<>+224(SB)/8, $0x0000000f0000000f
DATA q8zIdx8<>+232(SB)/8, $0x0000000f0000000f
DATA q8zIdx8<>+240(SB)/8, $0x0000000f0000000f
DATA q8zIdx8<>+248(SB)/8, $0x0000000f0000000f
GLOBL q8zIdx8<>(SB), RODATA|NOPTR, $256

// Q8ZPAIRW: the step's blocks at SI and SI+34: Y10 = [fp16 d of b x4, of
// b+1 x4] (for the products with the vectors' scales at DX), Z8 their
// quants (b low, b+1 high), K1 the quants' sign bits, Z9 |quants|.
// Y24 = q8zIdx's last index. Clobbers AX, BX.
#define Q8ZPAIRW \
	MOVWLZX      0(SI), AX          \
	MOVWLZX      34(SI), BX         \
	VMOVD        AX, X10            \
	VPINSRW      $1, BX, X10, X10   \
	VCVTPH2PS    X10, X10           \
	VPERMPS      Y10, Y24, Y10      \
	VMOVDQU      2(SI), Y8          \
	VINSERTI64X4 $1, 36(SI), Z8, Z8 \
	VPMOVB2M     Z8, K1             \
	VPABSB       Z8, Z9

// Q8ZLONEW: Q8ZPAIRW for a lone last block (X10 = its fp16 d x4, Z8's
// high half zero) and K2 = the low half's lanes, for Q8ZLONE.
#define Q8ZLONEW \
	MOVL         $0xff, AX  \
	KMOVW        AX, K2     \
	MOVWLZX      0(SI), AX  \
	VMOVD        AX, X10    \
	VCVTPH2PS    X10, X10   \
	VBROADCASTSS X10, X10   \
	VMOVDQU      2(SI), Y8  \
	VPMOVB2M     Z8, K1     \
	VPABSB       Z8, Z9

// Q8ZLONE(xaddr, IDX, ACC): Q8ZTOK for a lone last block: 32 bytes of x
// (the next 32 may not be there), the low half of ACC only (K2).
#define Q8ZLONE(xaddr, IDX, ACC) \
	VMOVDQU     xaddr, Y11         \
	VPSUBB      Z11, Z31, K1, Z11  \
	VPXORD      Z13, Z13, Z13      \
	VPDPBUSD    Z11, Z9, Z13       \
	VCVTDQ2PS   Z13, Z13           \
	VPERMPS     Z12, IDX, Z14      \
	VFMADD231PS Z13, Z14, K2, ACC

// Q8ZFIN(Z, Y, X, off): the even and odd halves of Z added, summed by
// HSUMR's tree and stored at off(BX): X4FINISH's steps for one vector.
#define Q8ZFIN(Z, Y, X, off) \
	VEXTRACTF64X4 $1, Z, Y15 \
	VADDPS        Y15, Y, Y  \
	HSUMR(Y, X, X15)         \
	VMOVSS        X, off(BX)

// func dotQ8_0x8Z(w *byte, x *int8, d4 *float32, nb, xs, ds int, out *float32)
//
// dotQ8_0x4Z for eight vectors in one pass over the row: vectors 0-3 at
// x, x+xs, ... with their interleaved scales at d4 (as dotQ8_0x4Z's),
// vectors 4-7 at x+4xs, ... with theirs ds bytes further; out[0..7].
// Each vector's lanes see dotQ8_0x4Z's steps, so the bits are the same.
TEXT ·dotQ8_0x8Z(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d4+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVQ xs+32(FP), R8
	MOVQ ds+40(FP), R10
	LEAQ (R8)(R8*2), R9
	LEAQ (DI)(R8*4), R12
	VPXORD    Z0, Z0, Z0
	VPXORD    Z1, Z1, Z1
	VPXORD    Z2, Z2, Z2
	VPXORD    Z3, Z3, Z3
	VPXORD    Z4, Z4, Z4
	VPXORD    Z5, Z5, Z5
	VPXORD    Z6, Z6, Z6
	VPXORD    Z7, Z7, Z7
	VMOVDQU64 q8zIdx<>+0(SB), Z16
	VMOVDQU64 q8zIdx<>+64(SB), Z17
	VMOVDQU64 q8zIdx<>+128(SB), Z18
	VMOVDQU64 q8zIdx<>+192(SB), Z19
	VMOVDQU64 q8zIdx8<>+0(SB), Z20
	VMOVDQU64 q8zIdx8<>+64(SB), Z21
	VMOVDQU64 q8zIdx8<>+128(SB), Z22
	VMOVDQU64 q8zIdx8<>+192(SB), Z23
	VMOVDQU64 q8zIdx<>+256(SB), Y24
	VPXORD    Z31, Z31, Z31

q8z8loop:
	CMPQ CX, $2
	JLT  q8z8tail
	Q8ZPAIRW
	VMULPS       (DX), Y10, Y12
	VMULPS       (DX)(R10*1), Y10, Y15
	VINSERTF64X4 $1, Y15, Z12, Z12
	Q8ZTOK((DI), Z16, Z0)
	Q8ZTOK((DI)(R8*1), Z17, Z1)
	Q8ZTOK((DI)(R8*2), Z18, Z2)
	Q8ZTOK((DI)(R9*1), Z19, Z3)
	Q8ZTOK((R12), Z20, Z4)
	Q8ZTOK((R12)(R8*1), Z21, Z5)
	Q8ZTOK((R12)(R8*2), Z22, Z6)
	Q8ZTOK((R12)(R9*1), Z23, Z7)
	ADDQ $68, SI
	ADDQ $64, DI
	ADDQ $64, R12
	ADDQ $32, DX
	SUBQ $2, CX
	JMP  q8z8loop

q8z8tail:
	TESTQ CX, CX
	JZ    q8z8done
	Q8ZLONEW
	VMULPS       (DX), X10, X12
	VMULPS       (DX)(R10*1), X10, X15
	VINSERTF64X4 $1, Y15, Z12, Z12
	Q8ZLONE((DI), Z16, Z0)
	Q8ZLONE((DI)(R8*1), Z17, Z1)
	Q8ZLONE((DI)(R8*2), Z18, Z2)
	Q8ZLONE((DI)(R9*1), Z19, Z3)
	Q8ZLONE((R12), Z20, Z4)
	Q8ZLONE((R12)(R8*1), Z21, Z5)
	Q8ZLONE((R12)(R8*2), Z22, Z6)
	Q8ZLONE((R12)(R9*1), Z23, Z7)

q8z8done:
	MOVQ out+48(FP), BX
	Q8ZFIN(Z0, Y0, X0, 0)
	Q8ZFIN(Z1, Y1, X1, 4)
	Q8ZFIN(Z2, Y2, X2, 8)
	Q8ZFIN(Z3, Y3, X3, 12)
	Q8ZFIN(Z4, Y4, X4, 16)
	Q8ZFIN(Z5, Y5, X5, 20)
	Q8ZFIN(Z6, Y6, X6, 24)
	Q8ZFIN(Z7, Y7, X7, 28)
	VZEROUPPER
	RET

// func cpuidVendor() (b, c, d uint32)
TEXT ·cpuidVendor(SB), NOSPLIT, $0-12
	XORL AX, AX
	XORL CX, CX
	CPUID
	MOVL BX, b+0(FP)
	MOVL CX, c+4(FP)
	MOVL DX, d+8(FP)
	RET

// func dotQ8_0x4Z(w *byte, x *int8, d4 *float32, nb, xs int, out *float32)
//
// dotQ8_0x4AVX512 two blocks a step in 64-byte registers; a lone last
// block in the low halves only (Q8ZLONE).
TEXT ·dotQ8_0x4Z(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d4+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVQ xs+32(FP), R8
	X4SETUPN
	VMOVDQU64 q8zIdx<>+0(SB), Z20
	VMOVDQU64 q8zIdx<>+64(SB), Z21
	VMOVDQU64 q8zIdx<>+128(SB), Z22
	VMOVDQU64 q8zIdx<>+192(SB), Z23
	VMOVDQU64 q8zIdx<>+256(SB), Y24
	VPXORD    Z31, Z31, Z31

q8zloop:
	CMPQ CX, $2
	JLT  q8ztail
	Q8ZPAIRW
	VMULPS       (DX), Y10, Y12
	Q8ZTOK((DI), Z20, Z0)
	Q8ZTOK((DI)(R8*1), Z21, Z1)
	Q8ZTOK((DI)(R8*2), Z22, Z2)
	Q8ZTOK((DI)(R9*1), Z23, Z3)
	ADDQ $68, SI
	ADDQ $64, DI
	ADDQ $32, DX
	SUBQ $2, CX
	JMP  q8zloop

q8ztail:
	TESTQ CX, CX
	JZ    q8zdone
	Q8ZLONEW
	VMULPS       (DX), X10, X12
	Q8ZLONE((DI), Z20, Z0)
	Q8ZLONE((DI)(R8*1), Z21, Z1)
	Q8ZLONE((DI)(R8*2), Z22, Z2)
	Q8ZLONE((DI)(R9*1), Z23, Z3)

q8zdone:
	MOVQ out+40(FP), BX
	Q8ZFIN(Z0, Y0, X0, 0)
	Q8ZFIN(Z1, Y1, X1, 4)
	Q8ZFIN(Z2, Y2, X2, 8)
	Q8ZFIN(Z3, Y3, X3, 12)
	VZEROUPPER
	RET

// func dotF32Rows4x2AVX512(w *byte, x *float32, xs, n, groups, rs int, out0, out1 *float32)
// dotF32Rows4AVX2 for two vectors (x and x+xs bytes) against the same rows,
// each weight chunk loaded once for both: every sum in dotF32Rows4AVX2's
// order (two 8-lane chains over 16 floats, one more chunk of 8 on the
// first, HSUMR, then the tail one float at a time). AVX-512VL for the
// registers past Y15.
TEXT ·dotF32Rows4x2AVX512(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R12
	MOVQ xs+16(FP), R9
	MOVQ groups+32(FP), R13
	MOVQ rs+40(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ out0+48(FP), BX
	MOVQ out1+56(FP), DX

f32r4x2group:
	MOVQ   R12, SI
	MOVQ   x+8(FP), DI
	MOVQ   n+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

f32r4x2loop16:
	CMPQ    CX, $16
	JLT     f32r4x2loop8
	VMOVUPS (DI), Y16
	VMOVUPS 32(DI), Y17
	VMOVUPS (DI)(R9*1), Y18
	VMOVUPS 32(DI)(R9*1), Y19
	VMOVUPS     (SI), Y20
	VMOVUPS     32(SI), Y21
	VFMADD231PS Y20, Y16, Y0
	VFMADD231PS Y21, Y17, Y1
	VFMADD231PS Y20, Y18, Y8
	VFMADD231PS Y21, Y19, Y9
	VMOVUPS     (SI)(R10*1), Y20
	VMOVUPS     32(SI)(R10*1), Y21
	VFMADD231PS Y20, Y16, Y2
	VFMADD231PS Y21, Y17, Y3
	VFMADD231PS Y20, Y18, Y10
	VFMADD231PS Y21, Y19, Y11
	VMOVUPS     (SI)(R10*2), Y20
	VMOVUPS     32(SI)(R10*2), Y21
	VFMADD231PS Y20, Y16, Y4
	VFMADD231PS Y21, Y17, Y5
	VFMADD231PS Y20, Y18, Y12
	VFMADD231PS Y21, Y19, Y13
	VMOVUPS     (SI)(R11*1), Y20
	VMOVUPS     32(SI)(R11*1), Y21
	VFMADD231PS Y20, Y16, Y6
	VFMADD231PS Y21, Y17, Y7
	VFMADD231PS Y20, Y18, Y14
	VFMADD231PS Y21, Y19, Y15
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     f32r4x2loop16

f32r4x2loop8:
	CMPQ    CX, $8
	JLT     f32r4x2sum
	VMOVUPS (DI), Y16
	VMOVUPS (DI)(R9*1), Y18
	VMOVUPS     (SI), Y20
	VFMADD231PS Y20, Y16, Y0
	VFMADD231PS Y20, Y18, Y8
	VMOVUPS     (SI)(R10*1), Y20
	VFMADD231PS Y20, Y16, Y2
	VFMADD231PS Y20, Y18, Y10
	VMOVUPS     (SI)(R10*2), Y20
	VFMADD231PS Y20, Y16, Y4
	VFMADD231PS Y20, Y18, Y12
	VMOVUPS     (SI)(R11*1), Y20
	VFMADD231PS Y20, Y16, Y6
	VFMADD231PS Y20, Y18, Y14
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX

f32r4x2sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VADDPS Y9, Y8, Y8
	VADDPS Y11, Y10, Y10
	VADDPS Y13, Y12, Y12
	VADDPS Y15, Y14, Y14
	TESTQ  CX, CX
	JNZ    f32r4x2tail
	// No tail: all eight sums at once (the tail adds to HSUMR's sums,
	// one float at a time, so it keeps the one-row form).
	HSUM4(Y0, Y2, Y4, Y6, Y1, Y3, Y5, X1, X5, (BX))
	HSUM4(Y8, Y10, Y12, Y14, Y9, Y11, Y13, X9, X13, (DX))
	JMP    f32r4x2next

f32r4x2tail:
	HSUMR(Y0, X0, X1)
	HSUMR(Y2, X2, X3)
	HSUMR(Y4, X4, X5)
	HSUMR(Y6, X6, X7)
	HSUMR(Y8, X8, X9)
	HSUMR(Y10, X10, X11)
	HSUMR(Y12, X12, X13)
	HSUMR(Y14, X14, X15)

f32r4x2loop1:
	VMOVSS (DI), X1
	VMOVSS (DI)(R9*1), X3
	VMOVSS      (SI), X5
	VFMADD231SS X5, X1, X0
	VFMADD231SS X5, X3, X8
	VMOVSS      (SI)(R10*1), X5
	VFMADD231SS X5, X1, X2
	VFMADD231SS X5, X3, X10
	VMOVSS      (SI)(R10*2), X5
	VFMADD231SS X5, X1, X4
	VFMADD231SS X5, X3, X12
	VMOVSS      (SI)(R11*1), X5
	VFMADD231SS X5, X1, X6
	VFMADD231SS X5, X3, X14
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ  f32r4x2loop1

f32r4x2store:
	VMOVSS X0, 0(BX)
	VMOVSS X2, 4(BX)
	VMOVSS X4, 8(BX)
	VMOVSS X6, 12(BX)
	VMOVSS X8, 0(DX)
	VMOVSS X10, 4(DX)
	VMOVSS X12, 8(DX)
	VMOVSS X14, 12(DX)

f32r4x2next:
	ADDQ $16, BX
	ADDQ $16, DX
	LEAQ (R12)(R10*4), R12
	DECQ R13
	JNZ  f32r4x2group
	VZEROUPPER
	RET

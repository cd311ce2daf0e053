//go:build !purego

#include "textflag.h"
#include "ired_amd64.h"

// AVX-512 kernels (F, BW, VL and VNNI). Each computes exactly what its
// generic namesake in dot_generic.go computes: the integer lane sums are
// exact however they are formed, so only the float steps must follow the
// reference: here (Q4_K, Q5_K) the row-sequential ones, a super-block's
// integer lanes reduced exactly (IRED8) and added by one scalar FMA, as
// the AVX2 kernels. What changes is how the integer
// sums are formed: VPDPWSSD (multiply int16 pairs and accumulate: one
// instruction where AVX2 needs VPMADDWD and VPADDD, with the scale
// broadcast from memory inside it) and VPDPBUSD (bytes straight to int32
// lanes). They work in 32-byte registers: on Intel a 64-byte instruction
// in flight shuts the vector ALUs of port 1, and these loops are bound by
// vector instructions per cycle, so 64-byte registers measured no faster
// (Sapphire Rapids, Q4_K: one vector the same as AVX2, four 1.24x, against
// 1.5x and more for the 32-byte form). The exception is the one-vector
// Q4_K pair loop (K4YPAIR), rewritten for 64-byte registers with fewer
// instructions as well (2026-12-07: 1.2x on AMD's Zen 5 class; not
// measured on Intel).

// K4YCONST: Y14 = 0x0f bytes, X15 = 0x3f bytes, X12 = 0x03 bytes, X11 =
// the dword shifts [0, 4, 0, 0] of the scale unpacking.
#define K4YCONST \
	MOVL         $0x0f0f0f0f, AX \
	VMOVD        AX, X14         \
	VPBROADCASTD X14, Y14        \
	MOVL         $0x3f3f3f3f, AX \
	VMOVD        AX, X15         \
	VPBROADCASTD X15, X15        \
	MOVL         $0x03030303, AX \
	VMOVD        AX, X12         \
	VPBROADCASTD X12, X12        \
	MOVQ         $0x0000000400000000, AX \
	VMOVQ        AX, X11

// K4YSCALES unpacks the 12 scale bytes of the Q4_K/Q5_K block at SI+4
// with ggml's kmask arithmetic on their three dwords a, b, c (scales 0-3
// = a&0x3f, 4-7 = c&15 | (a>>6&3)<<4; mins 0-3 = b&0x3f, 4-7 = c>>4&15 |
// (b>>6&3)<<4), in vector registers: scale j as the int16 pair
// (sc_j, sc_j) at 4j(SP) (for VPDPWSSD's broadcast), and Y13 = the 16
// int16 [m0, m0, m1, m1, ..., m7, m7] (for the pairs of 16-sums).
// Clobbers X6, X7.
#define K4YSCALES \
	VMOVDQU    4(SI), X6         \
	VPAND      X15, X6, X13      \
	VPSHUFD    $0xaa, X6, X7     \
	VPSRLVD    X11, X7, X7       \
	VPAND      X14, X7, X7       \
	VPSRLD     $6, X6, X6        \
	VPAND      X12, X6, X6       \
	VPSLLD     $4, X6, X6        \
	VPOR       X6, X7, X7        \
	VPUNPCKLDQ X7, X13, X13      \
	VPMOVZXBD  X13, Y7           \
	VPSLLD     $16, Y7, Y6       \
	VPOR       Y6, Y7, Y7        \
	VMOVDQU    Y7, 0(SP)         \
	VPSHUFD    $0xee, X13, X13   \
	VPMOVZXBD  X13, Y13          \
	VPSLLD     $16, Y13, Y6      \
	VPOR       Y6, Y13, Y13

// K4YW(qoff): the 32 quant bytes at SI+qoff as nibbles: low (sub-block
// 2g) in Y4, high (2g+1) in Y5.
#define K4YW(qoff) \
	VMOVDQU qoff(SI), Y4 \
	VPSRLW  $4, Y4, Y5   \
	VPAND   Y14, Y4, Y4  \
	VPAND   Y14, Y5, Y5

// K4YMUL(X, W, j, ACC): ACC += scale j * lanes(W · X), W nibbles. The pair
// sums of VPMADDUBSW cannot saturate (15 * 128 * 2 < 32768).
#define K4YMUL(X, W, j, ACC) \
	VPMADDUBSW    X, W, Y6          \
	VPDPWSSD.BCST (4*(j))(SP), Y6, ACC

// K4YMINS(B, P): P = the 8 products mins · 16-sums at B (pairs summed).
#define K4YMINS(B, P) \
	VPMADDWD B, Y13, P


// K4YMULO(X, W, off, ACC): K4YMUL with the scale pair at off(SP).
#define K4YMULO(X, W, off, ACC) \
	VPMADDUBSW    X, W, Y6       \
	VPDPWSSD.BCST off(SP), Y6, ACC

// The shuffles of the paired one-vector Q5_K loop (per 16-byte half, from
// [scales 0-7, mins 0-7] bytes): scales 0-3 and 4-7 as int16 pairs, and
// the mins as int16.
DATA k4scLo<>+0(SB)/1, $0
DATA k4scLo<>+1(SB)/1, $128
DATA k4scLo<>+2(SB)/1, $0
DATA k4scLo<>+3(SB)/1, $128
DATA k4scLo<>+4(SB)/1, $1
DATA k4scLo<>+5(SB)/1, $128
DATA k4scLo<>+6(SB)/1, $1
DATA k4scLo<>+7(SB)/1, $128
DATA k4scLo<>+8(SB)/1, $2
DATA k4scLo<>+9(SB)/1, $128
DATA k4scLo<>+10(SB)/1, $2
DATA k4scLo<>+11(SB)/1, $128
DATA k4scLo<>+12(SB)/1, $3
DATA k4scLo<>+13(SB)/1, $128
DATA k4scLo<>+14(SB)/1, $3
DATA k4scLo<>+15(SB)/1, $128
DATA k4scLo<>+16(SB)/1, $0
DATA k4scLo<>+17(SB)/1, $128
DATA k4scLo<>+18(SB)/1, $0
DATA k4scLo<>+19(SB)/1, $128
DATA k4scLo<>+20(SB)/1, $1
DATA k4scLo<>+21(SB)/1, $128
DATA k4scLo<>+22(SB)/1, $1
DATA k4scLo<>+23(SB)/1, $128
DATA k4scLo<>+24(SB)/1, $2
DATA k4scLo<>+25(SB)/1, $128
DATA k4scLo<>+26(SB)/1, $2
DATA k4scLo<>+27(SB)/1, $128
DATA k4scLo<>+28(SB)/1, $3
DATA k4scLo<>+29(SB)/1, $128
DATA k4scLo<>+30(SB)/1, $3
DATA k4scLo<>+31(SB)/1, $128
GLOBL k4scLo<>(SB), RODATA|NOPTR, $32

DATA k4scHi<>+0(SB)/1, $4
DATA k4scHi<>+1(SB)/1, $128
DATA k4scHi<>+2(SB)/1, $4
DATA k4scHi<>+3(SB)/1, $128
DATA k4scHi<>+4(SB)/1, $5
DATA k4scHi<>+5(SB)/1, $128
DATA k4scHi<>+6(SB)/1, $5
DATA k4scHi<>+7(SB)/1, $128
DATA k4scHi<>+8(SB)/1, $6
DATA k4scHi<>+9(SB)/1, $128
DATA k4scHi<>+10(SB)/1, $6
DATA k4scHi<>+11(SB)/1, $128
DATA k4scHi<>+12(SB)/1, $7
DATA k4scHi<>+13(SB)/1, $128
DATA k4scHi<>+14(SB)/1, $7
DATA k4scHi<>+15(SB)/1, $128
DATA k4scHi<>+16(SB)/1, $4
DATA k4scHi<>+17(SB)/1, $128
DATA k4scHi<>+18(SB)/1, $4
DATA k4scHi<>+19(SB)/1, $128
DATA k4scHi<>+20(SB)/1, $5
DATA k4scHi<>+21(SB)/1, $128
DATA k4scHi<>+22(SB)/1, $5
DATA k4scHi<>+23(SB)/1, $128
DATA k4scHi<>+24(SB)/1, $6
DATA k4scHi<>+25(SB)/1, $128
DATA k4scHi<>+26(SB)/1, $6
DATA k4scHi<>+27(SB)/1, $128
DATA k4scHi<>+28(SB)/1, $7
DATA k4scHi<>+29(SB)/1, $128
DATA k4scHi<>+30(SB)/1, $7
DATA k4scHi<>+31(SB)/1, $128
GLOBL k4scHi<>(SB), RODATA|NOPTR, $32

DATA k4minW<>+0(SB)/1, $8
DATA k4minW<>+1(SB)/1, $128
DATA k4minW<>+2(SB)/1, $9
DATA k4minW<>+3(SB)/1, $128
DATA k4minW<>+4(SB)/1, $10
DATA k4minW<>+5(SB)/1, $128
DATA k4minW<>+6(SB)/1, $11
DATA k4minW<>+7(SB)/1, $128
DATA k4minW<>+8(SB)/1, $12
DATA k4minW<>+9(SB)/1, $128
DATA k4minW<>+10(SB)/1, $13
DATA k4minW<>+11(SB)/1, $128
DATA k4minW<>+12(SB)/1, $14
DATA k4minW<>+13(SB)/1, $128
DATA k4minW<>+14(SB)/1, $15
DATA k4minW<>+15(SB)/1, $128
DATA k4minW<>+16(SB)/1, $8
DATA k4minW<>+17(SB)/1, $128
DATA k4minW<>+18(SB)/1, $9
DATA k4minW<>+19(SB)/1, $128
DATA k4minW<>+20(SB)/1, $10
DATA k4minW<>+21(SB)/1, $128
DATA k4minW<>+22(SB)/1, $11
DATA k4minW<>+23(SB)/1, $128
DATA k4minW<>+24(SB)/1, $12
DATA k4minW<>+25(SB)/1, $128
DATA k4minW<>+26(SB)/1, $13
DATA k4minW<>+27(SB)/1, $128
DATA k4minW<>+28(SB)/1, $14
DATA k4minW<>+29(SB)/1, $128
DATA k4minW<>+30(SB)/1, $15
DATA k4minW<>+31(SB)/1, $128
GLOBL k4minW<>(SB), RODATA|NOPTR, $32

// K4ZCH(qoff, xoff, SC, ACC): a 32-byte chunk of quants (qoff(SI): two
// sub-blocks, low and high nibbles) against their 64 bytes of x
// (xoff(DI)) in a 64-byte register: the chunk in both halves, the upper
// one shifted 4 bits (Z30), so that lanes 0-7 take the first sub-block
// and 8-15 the second, each scaled by its own scale: the words of Z5
// (the pair's scales and mins, K4YPAIR) that SC's indices pick. Z31 =
// 0x0f bytes.
#define K4ZCH(qoff, xoff, SC, ACC) \
	VBROADCASTI64X4 qoff(SI), Z4      \
	VPSRLVW         Z30, Z4, Z4       \
	VPANDD          Z31, Z4, Z4       \
	VPMADDUBSW      xoff(DI), Z4, Z6  \
	VPERMW          Z5, SC, Z7        \
	VPDPWSSD        Z7, Z6, ACC

// K4ZSETUP: the constants of K4ZCH and K4YPAIR (Z16-Z23, Z26, Z30, Z31,
// K1), loaded rather than built: dotQ4_KAVX512 sets them up a row.
#define K4ZSETUP \
	MOVL         $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z31         \
	MOVW         $0xff00, AX     \
	KMOVW        AX, K1          \
	VPXORD       Z30, Z30, Z30   \
	MOVL         $0x00040004, AX \
	VPBROADCASTD AX, K1, Z30     \
	VMOVDQU64    k4minZ<>(SB), Z26 \
	VMOVDQU64    k4scZ<>+0(SB), Z16   \
	VMOVDQU64    k4scZ<>+64(SB), Z17  \
	VMOVDQU64    k4scZ<>+128(SB), Z18 \
	VMOVDQU64    k4scZ<>+192(SB), Z19 \
	VMOVDQU64    k4scZ<>+256(SB), Z20 \
	VMOVDQU64    k4scZ<>+320(SB), Z21 \
	VMOVDQU64    k4scZ<>+384(SB), Z22 \
	VMOVDQU64    k4scZ<>+448(SB), Z23

// k4scZ: VPERMW's indices of K4ZCH, a register a chunk: the scale words
// of its two sub-blocks (2p and 2p+1 of b, then 16+2p and 17+2p of b+1),
// the first in the lower half, the second in the upper.
DATA k4scZ<>+0(SB)/8, $0x0000000000000000
DATA k4scZ<>+8(SB)/8, $0x0000000000000000
DATA k4scZ<>+16(SB)/8, $0x0000000000000000
DATA k4scZ<>+24(SB)/8, $0x0000000000000000
DATA k4scZ<>+32(SB)/8, $0x0001000100010001
DATA k4scZ<>+40(SB)/8, $0x0001000100010001
DATA k4scZ<>+48(SB)/8, $0x0001000100010001
DATA k4scZ<>+56(SB)/8, $0x0001000100010001
DATA k4scZ<>+64(SB)/8, $0x0002000200020002
DATA k4scZ<>+72(SB)/8, $0x0002000200020002
DATA k4scZ<>+80(SB)/8, $0x0002000200020002
DATA k4scZ<>+88(SB)/8, $0x0002000200020002
DATA k4scZ<>+96(SB)/8, $0x0003000300030003
DATA k4scZ<>+104(SB)/8, $0x0003000300030003
DATA k4scZ<>+112(SB)/8, $0x0003000300030003
DATA k4scZ<>+120(SB)/8, $0x0003000300030003
DATA k4scZ<>+128(SB)/8, $0x0004000400040004
DATA k4scZ<>+136(SB)/8, $0x0004000400040004
DATA k4scZ<>+144(SB)/8, $0x0004000400040004
DATA k4scZ<>+152(SB)/8, $0x0004000400040004
DATA k4scZ<>+160(SB)/8, $0x0005000500050005
DATA k4scZ<>+168(SB)/8, $0x0005000500050005
DATA k4scZ<>+176(SB)/8, $0x0005000500050005
DATA k4scZ<>+184(SB)/8, $0x0005000500050005
DATA k4scZ<>+192(SB)/8, $0x0006000600060006
DATA k4scZ<>+200(SB)/8, $0x0006000600060006
DATA k4scZ<>+208(SB)/8, $0x0006000600060006
DATA k4scZ<>+216(SB)/8, $0x0006000600060006
DATA k4scZ<>+224(SB)/8, $0x0007000700070007
DATA k4scZ<>+232(SB)/8, $0x0007000700070007
DATA k4scZ<>+240(SB)/8, $0x0007000700070007
DATA k4scZ<>+248(SB)/8, $0x0007000700070007
DATA k4scZ<>+256(SB)/8, $0x0010001000100010
DATA k4scZ<>+264(SB)/8, $0x0010001000100010
DATA k4scZ<>+272(SB)/8, $0x0010001000100010
DATA k4scZ<>+280(SB)/8, $0x0010001000100010
DATA k4scZ<>+288(SB)/8, $0x0011001100110011
DATA k4scZ<>+296(SB)/8, $0x0011001100110011
DATA k4scZ<>+304(SB)/8, $0x0011001100110011
DATA k4scZ<>+312(SB)/8, $0x0011001100110011
DATA k4scZ<>+320(SB)/8, $0x0012001200120012
DATA k4scZ<>+328(SB)/8, $0x0012001200120012
DATA k4scZ<>+336(SB)/8, $0x0012001200120012
DATA k4scZ<>+344(SB)/8, $0x0012001200120012
DATA k4scZ<>+352(SB)/8, $0x0013001300130013
DATA k4scZ<>+360(SB)/8, $0x0013001300130013
DATA k4scZ<>+368(SB)/8, $0x0013001300130013
DATA k4scZ<>+376(SB)/8, $0x0013001300130013
DATA k4scZ<>+384(SB)/8, $0x0014001400140014
DATA k4scZ<>+392(SB)/8, $0x0014001400140014
DATA k4scZ<>+400(SB)/8, $0x0014001400140014
DATA k4scZ<>+408(SB)/8, $0x0014001400140014
DATA k4scZ<>+416(SB)/8, $0x0015001500150015
DATA k4scZ<>+424(SB)/8, $0x0015001500150015
DATA k4scZ<>+432(SB)/8, $0x0015001500150015
DATA k4scZ<>+440(SB)/8, $0x0015001500150015
DATA k4scZ<>+448(SB)/8, $0x0016001600160016
DATA k4scZ<>+456(SB)/8, $0x0016001600160016
DATA k4scZ<>+464(SB)/8, $0x0016001600160016
DATA k4scZ<>+472(SB)/8, $0x0016001600160016
DATA k4scZ<>+480(SB)/8, $0x0017001700170017
DATA k4scZ<>+488(SB)/8, $0x0017001700170017
DATA k4scZ<>+496(SB)/8, $0x0017001700170017
DATA k4scZ<>+504(SB)/8, $0x0017001700170017
GLOBL k4scZ<>(SB), RODATA|NOPTR, $512

// k4minZ: VPERMW's indices from the unpacked scales of a pair of
// super-blocks (words 8-15: the mins of the first, 24-31 of the second) to
// each min twice, against the pairs of 16-sums of its sub-block.
DATA k4minZ<>+0(SB)/2, $8
DATA k4minZ<>+2(SB)/2, $8
DATA k4minZ<>+4(SB)/2, $9
DATA k4minZ<>+6(SB)/2, $9
DATA k4minZ<>+8(SB)/2, $10
DATA k4minZ<>+10(SB)/2, $10
DATA k4minZ<>+12(SB)/2, $11
DATA k4minZ<>+14(SB)/2, $11
DATA k4minZ<>+16(SB)/2, $12
DATA k4minZ<>+18(SB)/2, $12
DATA k4minZ<>+20(SB)/2, $13
DATA k4minZ<>+22(SB)/2, $13
DATA k4minZ<>+24(SB)/2, $14
DATA k4minZ<>+26(SB)/2, $14
DATA k4minZ<>+28(SB)/2, $15
DATA k4minZ<>+30(SB)/2, $15
DATA k4minZ<>+32(SB)/2, $24
DATA k4minZ<>+34(SB)/2, $24
DATA k4minZ<>+36(SB)/2, $25
DATA k4minZ<>+38(SB)/2, $25
DATA k4minZ<>+40(SB)/2, $26
DATA k4minZ<>+42(SB)/2, $26
DATA k4minZ<>+44(SB)/2, $27
DATA k4minZ<>+46(SB)/2, $27
DATA k4minZ<>+48(SB)/2, $28
DATA k4minZ<>+50(SB)/2, $28
DATA k4minZ<>+52(SB)/2, $29
DATA k4minZ<>+54(SB)/2, $29
DATA k4minZ<>+56(SB)/2, $30
DATA k4minZ<>+58(SB)/2, $30
DATA k4minZ<>+60(SB)/2, $31
DATA k4minZ<>+62(SB)/2, $31
GLOBL k4minZ<>(SB), RODATA|NOPTR, $64

// K4YPAIR: one step of the paired loop of dotQ4_KAVX512 (super-blocks b
// at SI, b+1 at SI+144): the scale unpacking (K4YSCALES on the two
// halves of Y13, then as words in Z5: b's scales 0-7 and mins 8-15, b+1's
// at 16-31), the products of both in 64-byte registers (K4ZCH; b into
// Z0, b+1 into Z1), the mins terms (the 16-sums of b and b+1 against each
// min twice, VPMADDWD), the four integer sums reduced together (b's sum,
// b+1's, b's mins term, b+1's, in the four lanes of Z6) and their float
// steps in block order (X8: the sum, X9: the mins terms); then SI, DI,
// DX, BX on to the next pair and CX two fewer. The products [d*d,
// d*dmin] of b, then of b+1, go to 64(SP).
#define K4YPAIR \
	PREFETCHT0 (4096)(SI) \
	PREFETCHT0 (4160)(SI) \
	PREFETCHT0 (4224)(SI) \
	PREFETCHT0 (4288)(SI) \
	PREFETCHT0 (4352)(SI) \
	VMOVDQU     4(SI), X6 \
	VINSERTI128 $1, 148(SI), Y6, Y6 \
	VPAND       Y15, Y6, Y13 \
	VPSHUFD     $0xaa, Y6, Y7 \
	VPSRLVD     Y11, Y7, Y7 \
	VPAND       Y14, Y7, Y7 \
	VPSRLD      $6, Y6, Y6 \
	VPAND       Y12, Y6, Y6 \
	VPSLLD      $4, Y6, Y6 \
	VPOR        Y6, Y7, Y7 \
	VPUNPCKLDQ  Y7, Y13, Y13 \
	VPMOVZXBW   Y13, Z5 \
	MOVL         (SI), AX \
	VMOVD        AX, X2 \
	VPINSRD      $1, 144(SI), X2, X2 \
	VCVTPH2PS    X2, X2 \
	VMOVSD       (DX), X3 \
	VPERMILPS    $0x50, X3, X3 \
	VMULPS       X3, X2, X2 \
	VMOVUPS      X2, 64(SP) \
	VPXOR Y0, Y0, Y0 \
	VPXOR Y1, Y1, Y1 \
	K4ZCH(16, 0, Z16, Z0) \
	K4ZCH(160, 256, Z20, Z1) \
	K4ZCH(48, 64, Z17, Z0) \
	K4ZCH(192, 320, Z21, Z1) \
	K4ZCH(80, 128, Z18, Z0) \
	K4ZCH(224, 384, Z22, Z1) \
	K4ZCH(112, 192, Z19, Z0) \
	K4ZCH(256, 448, Z23, Z1) \
	VSHUFI64X2    $0x44, Z1, Z0, Z6 \
	VSHUFI64X2    $0xee, Z1, Z0, Z7 \
	VPADDD        Z7, Z6, Z6 \
	VPERMW        Z5, Z26, Z5 \
	VPMADDWD      (BX), Z5, Z5 \
	VSHUFI64X2    $0x88, Z5, Z6, Z7 \
	VSHUFI64X2    $0xdd, Z5, Z6, Z6 \
	VPADDD        Z7, Z6, Z6 \
	VPSHUFD       $0x4e, Z6, Z7 \
	VPADDD        Z7, Z6, Z6 \
	VPSHUFD       $0xb1, Z6, Z7 \
	VPADDD        Z7, Z6, Z6 \
	VCVTDQ2PS     Z6, Z6 \
	VFMADD231SS   64(SP), X6, X8 \
	VEXTRACTF32X4 $1, Z6, X7 \
	VFMADD231SS   72(SP), X7, X8 \
	VEXTRACTF32X4 $2, Z6, X7 \
	VFMADD231SS   68(SP), X7, X9 \
	VEXTRACTF32X4 $3, Z6, X7 \
	VFMADD231SS   76(SP), X7, X9 \
	ADDQ $288, SI \
	ADDQ $512, DI \
	ADDQ $8, DX \
	ADDQ $64, BX \
	SUBQ $2, CX

// K4YONE: the last odd super-block at SI alone (X8, X9 as K4YPAIR; X2 =
// d * fp16 d, X3 = d * fp16 dmin; the mins term, sum_j min j * (16-sum 2j
// + 16-sum 2j+1), as a scalar).
#define K4YONE \
	K4YSCALES \
	VPXOR Y0, Y0, Y0 \
	K4YW(16) \
	K4YMUL((DI), Y4, 0, Y0) \
	K4YMUL(32(DI), Y5, 1, Y0) \
	K4YW(48) \
	K4YMUL(64(DI), Y4, 2, Y0) \
	K4YMUL(96(DI), Y5, 3, Y0) \
	K4YW(80) \
	K4YMUL(128(DI), Y4, 4, Y0) \
	K4YMUL(160(DI), Y5, 5, Y0) \
	K4YW(112) \
	K4YMUL(192(DI), Y4, 6, Y0) \
	K4YMUL(224(DI), Y5, 7, Y0) \
	MOVL         (SI), AX \
	VMOVD        AX, X2 \
	VCVTPH2PS    X2, X2 \
	VMULPS.BCST  (DX), X2, X2 \
	VMOVSHDUP    X2, X3 \
	K4YMINS((BX), Y4) \
	VEXTRACTI128 $1, Y4, X5 \
	VPADDD       X5, X4, X4 \
	VPSHUFD      $0x4e, X4, X5 \
	VPADDD       X5, X4, X4 \
	VPSHUFD      $0xb1, X4, X5 \
	VPADDD       X5, X4, X4 \
	VCVTDQ2PS    X4, X4 \
	VFMADD231SS  X3, X4, X9 \
	IRED8(Y0, X0, X1) \
	VCVTDQ2PS    X0, X0 \
	VFMADD231SS  X2, X0, X8

// K4YSETUP loads the constants of K4YPAIR and K4YONE (Y11, Y12, Y14, Y15
// and K4ZSETUP's).
#define K4YSETUP \
	K4ZSETUP \
	K4YCONST \
	VPBROADCASTQ X15, Y15 \
	VPBROADCASTQ X12, Y12 \
	VPBROADCASTQ X11, Y11

// func dotQ4_KAVX512(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
//
// Super-blocks go in pairs (K4YPAIR), a last odd one alone (K4YONE).
// Frame: 0 the scales of a lone super-block as int16 pairs (K4YSCALES),
// 64 the products [d*d, d*dmin] of b, then of b+1 (K4YPAIR).
TEXT ·dotQ4_KAVX512(SB), NOSPLIT, $96-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	K4YSETUP
	VXORPS Y8, Y8, Y8
	VXORPS X9, X9, X9
	CMPQ   CX, $2
	JLT    q4kyone

q4kypair:
	K4YPAIR
	CMPQ CX, $2
	JGE  q4kypair

q4kyone:
	TESTQ CX, CX
	JZ    q4kydone
	K4YONE

q4kydone:
	VSUBSS X9, X8, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// func dotQ4_KRowsAVX512(w *byte, x *int8, d *float32, bsums *int16, nb, rows, rs int, out *float32)
//
// dotQ4_KAVX512 of rows > 0 rows (rs bytes apart from w) with one vector,
// each row's result to out[r]: the same instructions a row, the
// constants loaded once and no call a row. Frame as dotQ4_KAVX512's.
TEXT ·dotQ4_KRowsAVX512(SB), NOSPLIT, $96-64
	MOVQ w+0(FP), R11
	MOVQ nb+32(FP), R12
	MOVQ rows+40(FP), R8
	MOVQ rs+48(FP), R9
	MOVQ out+56(FP), R10
	K4YSETUP

q4krrow:
	MOVQ   R11, SI
	MOVQ   x+8(FP), DI
	MOVQ   d+16(FP), DX
	MOVQ   bsums+24(FP), BX
	MOVQ   R12, CX
	VXORPS Y8, Y8, Y8
	VXORPS X9, X9, X9
	CMPQ   CX, $2
	JLT    q4krone

q4krpair:
	K4YPAIR
	CMPQ CX, $2
	JGE  q4krpair

q4krone:
	TESTQ CX, CX
	JZ    q4krdone
	K4YONE

q4krdone:
	VSUBSS X9, X8, X0
	MOVSS  X0, (R10)
	ADDQ   $4, R10
	ADDQ   R9, R11
	DECQ   R8
	JNZ    q4krrow
	VZEROUPPER
	RET

// K4Y4(qoff, g): sub-blocks 2g and 2g+1 against the four vectors.
#define K4Y4(qoff, g) \
	K4YW(qoff) \
	K4Y4M(g)

// K4Y4M(g): the nibbles in Y4, Y5 (sub-blocks 2g, 2g+1) against the four
// vectors.
#define K4Y4M(g) \
	K4YMUL((64*g)(DI), Y4, 2*g, Y0)            \
	K4YMUL((64*g+32)(DI), Y5, 2*g+1, Y0)       \
	K4YMUL((64*g)(DI)(R8*1), Y4, 2*g, Y1)      \
	K4YMUL((64*g+32)(DI)(R8*1), Y5, 2*g+1, Y1) \
	K4YMUL((64*g)(DI)(R8*2), Y4, 2*g, Y2)      \
	K4YMUL((64*g+32)(DI)(R8*2), Y5, 2*g+1, Y2) \
	K4YMUL((64*g)(DI)(R11*1), Y4, 2*g, Y3)     \
	K4YMUL((64*g+32)(DI)(R11*1), Y5, 2*g+1, Y3)

// K4Y4OUT stores the four vectors' acc - accm at BX: the accs in lane 0
// of X8, X10, X16, X17, the accms in the four lanes of X9.
#define K4Y4OUT \
	VSUBSS    X9, X8, X0      \
	VMOVSS    X0, (BX)        \
	VMOVSHDUP X9, X2          \
	VSUBSS    X2, X10, X0     \
	VMOVSS    X0, 4(BX)       \
	VMOVAPS   X16, X10        \
	VMOVHLPS  X9, X9, X2      \
	VSUBSS    X2, X10, X0     \
	VMOVSS    X0, 8(BX)       \
	VMOVAPS   X17, X10        \
	VPSHUFD   $0xff, X9, X2   \
	VSUBSS    X2, X10, X0     \
	VMOVSS    X0, 12(BX)

// K4YFOLDS(S, XS, XF, DD): the row-sequential fold of a super-block
// (dotQ4_KSeq): lane 0 of XF = fma(float(sum of S's lanes), dd, XF), the
// integer sum exact. Clobbers Y5.
#define K4YFOLDS(S, XS, XF, DD) \
	IRED8(S, XS, X5)   \
	VCVTDQ2PS   XS, XS \
	VFMADD231SS DD, XS, XF

// The four-vector Q4_K kernel (prefill): per super-block the nibbles,
// scales and mins are unpacked once for four vectors (quants x + t*xs,
// scales d + t*ds, 16-sums bsums + t*bs; byte strides); per vector the
// same arithmetic as dotQ4_KAVX512. The four mins terms are reduced side
// by side in the four lanes of X9. Frame: 0 the 8 scales as int16 pairs,
// 32 the four d[t] * fp16 d.
//
// func dotQ4_Kx4AVX512(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)
TEXT ·dotQ4_Kx4AVX512(SB), NOSPLIT, $48-72
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
	K4YCONST
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VXORPS X9, X9, X9

q4ky4loop:
	K4YSCALES
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	K4Y4(16, 0)
	K4Y4(48, 1)
	K4Y4(80, 2)
	K4Y4(112, 3)
	// 32(SP) = the four d[t] * fp16 d, X6 = the four d[t] * fp16 dmin.
	MOVL         (SI), AX
	VMOVD        AX, X6
	VCVTPH2PS    X6, X6
	VBROADCASTSS X6, X7
	VMOVSHDUP    X6, X6
	VBROADCASTSS X6, X6
	VMOVSS       (DX), X4
	VINSERTPS    $0x10, (DX)(R9*1), X4, X4
	VINSERTPS    $0x20, (DX)(R9*2), X4, X4
	VINSERTPS    $0x30, (DX)(R12*1), X4, X4
	VMULPS       X4, X6, X6
	VMULPS       X4, X7, X7
	VMOVUPS      X7, 32(SP)
	// The mins terms of the four vectors, reduced side by side.
	K4YMINS((BX), Y4)
	K4YMINS((BX)(R10*1), Y5)
	VPHADDD      Y5, Y4, Y4
	K4YMINS((BX)(R10*2), Y5)
	K4YMINS((BX)(R13*1), Y7)
	VPHADDD      Y7, Y5, Y5
	VPHADDD      Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VCVTDQ2PS    X4, X4
	VFMADD231PS  X6, X4, X9
	K4YFOLDS(Y0, X0, X8, 32(SP))
	K4YFOLDS(Y1, X1, X10, 36(SP))
	K4YFOLDS(Y2, X2, X16, 40(SP))
	K4YFOLDS(Y3, X3, X17, 44(SP))
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q4ky4loop

	MOVQ out+64(FP), BX
	K4Y4OUT
	VZEROUPPER
	RET

// The Q5_K kernels: the Q4_K kernels with the fifth bits (32 bytes at
// SI+16, in Y24: bit j of byte k is element k of sub-block j) moved to
// bit 4 by one shift and merged by one VPTERNLOGD (Y26 = 0x10 bytes).

// K5YCONST: Y26 = 0x10 bytes.
#define K5YCONST \
	MOVL         $0x10101010, AX \
	VPBROADCASTD AX, Y26

// K5BIT(SH, n, W): W |= (Y24 shifted by n) & 0x10. Clobbers Y25.
#define K5BIT(SH, n, W) \
	SH         $n, Y24, Y25 \
	VPTERNLOGD $0xf8, Y26, Y25, W

// K5YWQ(qoff, QH, ...): K5YW with the fifth bits in QH.
#define K5YWQ(qoff, QH, SH0, N0, SH1, N1) \
	K4YW(qoff)                     \
	SH0        $N0, QH, Y25        \
	VPTERNLOGD $0xf8, Y26, Y25, Y4 \
	SH1        $N1, QH, Y25        \
	VPTERNLOGD $0xf8, Y26, Y25, Y5

// K5YW(qoff, ...): K4YW plus the fifth bits of sub-blocks 2g (shift SH0
// by N0) and 2g+1 (SH1 by N1).
#define K5YW(qoff, SH0, N0, SH1, N1) \
	K4YW(qoff)           \
	K5BIT(SH0, N0, Y4)   \
	K5BIT(SH1, N1, Y5)

// func dotQ5_KAVX512(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
//
// dotQ5_KAVX512 is dotQ4_KAVX512 for Q5_K rows (the fifth bits of b in
// Y24, of b+1 in Y23), in 32-byte registers. Frame: 0 the scales of b
// and b+1 as int16 pairs, 64 the products [d*d, d*dmin] of b, then of b+1.
TEXT ·dotQ5_KAVX512(SB), NOSPLIT, $96-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	K4YCONST
	K5YCONST
	VPBROADCASTQ X15, Y15
	VPBROADCASTQ X12, Y12
	VPBROADCASTQ X11, Y11
	VMOVDQU64    k4scLo<>(SB), Y27
	VMOVDQU64    k4scHi<>(SB), Y28
	VMOVDQU64    k4minW<>(SB), Y29
	VXORPS Y8, Y8, Y8
	VXORPS X9, X9, X9
	CMPQ   CX, $2
	JLT    q5kyone

q5kypair:
	VMOVDQU64 16(SI), Y24
	VMOVDQU64 192(SI), Y23
	PREFETCHT0 (4096)(SI)
	PREFETCHT0 (4160)(SI)
	PREFETCHT0 (4224)(SI)
	PREFETCHT0 (4288)(SI)
	PREFETCHT0 (4352)(SI)
	PREFETCHT0 (4416)(SI)
	// The scales and mins of both (K4YSCALES on the two halves).
	VMOVDQU     4(SI), X6
	VINSERTI128 $1, 180(SI), Y6, Y6
	VPAND       Y15, Y6, Y13
	VPSHUFD     $0xaa, Y6, Y7
	VPSRLVD     Y11, Y7, Y7
	VPAND       Y14, Y7, Y7
	VPSRLD      $6, Y6, Y6
	VPAND       Y12, Y6, Y6
	VPSLLD      $4, Y6, Y6
	VPOR        Y6, Y7, Y7
	VPUNPCKLDQ  Y7, Y13, Y13
	VPSHUFB     Y27, Y13, Y6
	VMOVDQU     Y6, 0(SP)
	VPSHUFB     Y28, Y13, Y6
	VMOVDQU     Y6, 32(SP)
	// 64(SP) = [d*d, d*dmin] of b, then of b+1.
	MOVL         (SI), AX
	VMOVD        AX, X2
	VPINSRD      $1, 176(SI), X2, X2
	VCVTPH2PS    X2, X2
	VMOVSD       (DX), X3
	VPERMILPS    $0x50, X3, X3
	VMULPS       X3, X2, X2
	VMOVUPS      X2, 64(SP)
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	K5YWQ(48, Y24, VPSLLW, 4, VPSLLW, 3)
	K4YMULO((DI), Y4, 0, Y0)
	K4YMULO(32(DI), Y5, 4, Y0)
	K5YWQ(224, Y23, VPSLLW, 4, VPSLLW, 3)
	K4YMULO(256(DI), Y4, 16, Y1)
	K4YMULO(288(DI), Y5, 20, Y1)
	K5YWQ(80, Y24, VPSLLW, 2, VPSLLW, 1)
	K4YMULO(64(DI), Y4, 8, Y0)
	K4YMULO(96(DI), Y5, 12, Y0)
	K5YWQ(256, Y23, VPSLLW, 2, VPSLLW, 1)
	K4YMULO(320(DI), Y4, 24, Y1)
	K4YMULO(352(DI), Y5, 28, Y1)
	K5YWQ(112, Y24, VPSLLW, 0, VPSRLW, 1)
	K4YMULO(128(DI), Y4, 32, Y0)
	K4YMULO(160(DI), Y5, 36, Y0)
	K5YWQ(288, Y23, VPSLLW, 0, VPSRLW, 1)
	K4YMULO(384(DI), Y4, 48, Y1)
	K4YMULO(416(DI), Y5, 52, Y1)
	K5YWQ(144, Y24, VPSRLW, 2, VPSRLW, 3)
	K4YMULO(192(DI), Y4, 40, Y0)
	K4YMULO(224(DI), Y5, 44, Y0)
	K5YWQ(320, Y23, VPSRLW, 2, VPSRLW, 3)
	K4YMULO(448(DI), Y4, 56, Y1)
	K4YMULO(480(DI), Y5, 60, Y1)
	// The mins terms: the sub-block sums (pairs of 16-sums) of b in the
	// low half, of b+1 in the high, against the mins as int16.
	VMOVDQU      (BX), Y4
	VPHADDW      32(BX), Y4, Y4
	VPERMQ       $0xd8, Y4, Y4
	VPSHUFB      Y29, Y13, Y5
	VPMADDWD     Y5, Y4, Y4
	VPSHUFD      $0x4e, Y4, Y5
	VPADDD       Y5, Y4, Y4
	VPSHUFD      $0xb1, Y4, Y5
	VPADDD       Y5, Y4, Y4
	VCVTDQ2PS    Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VFMADD231SS  68(SP), X4, X9
	VFMADD231SS  76(SP), X5, X9
	IRED8(Y0, X0, X2)
	IRED8(Y1, X1, X2)
	VCVTDQ2PS    X0, X0
	VCVTDQ2PS    X1, X1
	VFMADD231SS  64(SP), X0, X8
	VFMADD231SS  72(SP), X1, X8
	ADDQ $352, SI
	ADDQ $512, DI
	ADDQ $8, DX
	ADDQ $64, BX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q5kypair

q5kyone:
	TESTQ CX, CX
	JZ    q5kydone
	VMOVDQU64 16(SI), Y24
	K4YSCALES
	VPXOR Y0, Y0, Y0
	K5YWQ(48, Y24, VPSLLW, 4, VPSLLW, 3)
	K4YMUL((DI), Y4, 0, Y0)
	K4YMUL(32(DI), Y5, 1, Y0)
	K5YWQ(80, Y24, VPSLLW, 2, VPSLLW, 1)
	K4YMUL(64(DI), Y4, 2, Y0)
	K4YMUL(96(DI), Y5, 3, Y0)
	K5YWQ(112, Y24, VPSLLW, 0, VPSRLW, 1)
	K4YMUL(128(DI), Y4, 4, Y0)
	K4YMUL(160(DI), Y5, 5, Y0)
	K5YWQ(144, Y24, VPSRLW, 2, VPSRLW, 3)
	K4YMUL(192(DI), Y4, 6, Y0)
	K4YMUL(224(DI), Y5, 7, Y0)
	// X2 = d * fp16 d, X3 = d * fp16 dmin (lane 0).
	MOVL         (SI), AX
	VMOVD        AX, X2
	VCVTPH2PS    X2, X2
	VMULPS.BCST  (DX), X2, X2
	VMOVSHDUP    X2, X3
	// The mins term: sum_j min j * (16-sum 2j + 16-sum 2j+1), as a scalar.
	K4YMINS((BX), Y4)
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VPSHUFD      $0x4e, X4, X5
	VPADDD       X5, X4, X4
	VPSHUFD      $0xb1, X4, X5
	VPADDD       X5, X4, X4
	VCVTDQ2PS    X4, X4
	VFMADD231SS  X3, X4, X9
	IRED8(Y0, X0, X1)
	VCVTDQ2PS    X0, X0
	VFMADD231SS  X2, X0, X8

q5kydone:
	VSUBSS X9, X8, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

TEXT ·dotQ5_Kx4AVX512(SB), NOSPLIT, $48-72
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
	K4YCONST
	K5YCONST
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VXORPS X9, X9, X9

q5ky4loop:
	VMOVDQU64 16(SI), Y24
	K4YSCALES
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	K5YW(48, VPSLLW, 4, VPSLLW, 3)
	K4Y4M(0)
	K5YW(80, VPSLLW, 2, VPSLLW, 1)
	K4Y4M(1)
	K5YW(112, VPSLLW, 0, VPSRLW, 1)
	K4Y4M(2)
	K5YW(144, VPSRLW, 2, VPSRLW, 3)
	K4Y4M(3)
	// 32(SP) = the four d[t] * fp16 d, X6 = the four d[t] * fp16 dmin.
	MOVL         (SI), AX
	VMOVD        AX, X6
	VCVTPH2PS    X6, X6
	VBROADCASTSS X6, X7
	VMOVSHDUP    X6, X6
	VBROADCASTSS X6, X6
	VMOVSS       (DX), X4
	VINSERTPS    $0x10, (DX)(R9*1), X4, X4
	VINSERTPS    $0x20, (DX)(R9*2), X4, X4
	VINSERTPS    $0x30, (DX)(R12*1), X4, X4
	VMULPS       X4, X6, X6
	VMULPS       X4, X7, X7
	VMOVUPS      X7, 32(SP)
	// The mins terms of the four vectors, reduced side by side.
	K4YMINS((BX), Y4)
	K4YMINS((BX)(R10*1), Y5)
	VPHADDD      Y5, Y4, Y4
	K4YMINS((BX)(R10*2), Y5)
	K4YMINS((BX)(R13*1), Y7)
	VPHADDD      Y7, Y5, Y5
	VPHADDD      Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VCVTDQ2PS    X4, X4
	VFMADD231PS  X6, X4, X9
	K4YFOLDS(Y0, X0, X8, 32(SP))
	K4YFOLDS(Y1, X1, X10, 36(SP))
	K4YFOLDS(Y2, X2, X16, 40(SP))
	K4YFOLDS(Y3, X3, X17, 44(SP))
	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q5ky4loop

	MOVQ out+64(FP), BX
	K4Y4OUT
	VZEROUPPER
	RET

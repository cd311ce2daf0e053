//go:build !purego

#include "textflag.h"
#include "vnni_amd64.h"

// AVX2 dots of Q2_K, Q3_K and IQ4_XS rows with Q8_K activations, one
// vector and four vectors. Each computes exactly what its generic
// namesake in dot_low.go computes: per 32-element group the weights are
// rebuilt as bytes in element order (low 128-bit lane: elements 0-15,
// high lane: 16-31), VPMADDUBSW and VPMADDWD give lane l the sum over
// elements 4l..4l+3 times the sub-block scale, added exactly in int32;
// then one VCVTDQ2PS and VFMADD231PS per super-block, and the same final
// reduction (LHSUM8) as hsum8.

// iq4nl<>: the 16 IQ4_NL levels as signed bytes, in both 128-bit lanes
// (a VPSHUFB table).
DATA iq4nl<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4nl<>+8(SB)/8, $0x7159453526190d01
DATA iq4nl<>+16(SB)/8, $0xf6eaddcfbfad9881
DATA iq4nl<>+24(SB)/8, $0x7159453526190d01
GLOBL iq4nl<>(SB), RODATA|NOPTR, $32

// four<>: 32 bytes of 4 (Q3_K's quant offset, and the mask of bit 2).
DATA four<>+0(SB)/8, $0x0404040404040404
DATA four<>+8(SB)/8, $0x0404040404040404
DATA four<>+16(SB)/8, $0x0404040404040404
DATA four<>+24(SB)/8, $0x0404040404040404
GLOBL four<>(SB), RODATA|NOPTR, $32

// c32w<>: 16 words of 32 (the 6-bit scales' offset).
DATA c32w<>+0(SB)/8, $0x0020002000200020
DATA c32w<>+8(SB)/8, $0x0020002000200020
DATA c32w<>+16(SB)/8, $0x0020002000200020
DATA c32w<>+24(SB)/8, $0x0020002000200020
GLOBL c32w<>(SB), RODATA|NOPTR, $32

// LBCAST(val, X, Y) broadcasts a 32-bit constant into Y (clobbers AX).
#define LBCAST(val, X, Y) \
	MOVL         val, AX \
	VMOVD        AX, X   \
	VPBROADCASTD X, Y

// LSHUF: Y11 = the VPSHUFB pattern that spreads a dword of two int16
// scales [a, b] as 8 x a in the low lane and 8 x b in the high lane.
#define LSHUF \
	LBCAST($0x01000100, X11, X11) \
	LBCAST($0x03020302, X10, X10) \
	VINSERTI128 $1, X10, Y11, Y11

// LHSUM8(Y, X, T): X[0] = hsum8 of Y's lanes, ((a0+a4)+(a2+a6)) +
// ((a1+a5)+(a3+a7)); T is clobbered.
#define LHSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T \
	VADDPS       T, X, X  \
	VMOVHLPS     X, X, T  \
	VADDPS       T, X, X  \
	VMOVSHDUP    X, T     \
	VADDSS       T, X, X

// LSCALE(off, X, Y): Y = 8 x (fp16 at SI+off) * d[0] (DX).
#define LSCALE(off, X, Y) \
	MOVWLZX      off(SI), AX \
	VMOVD        AX, X       \
	VCVTPH2PS    X, X        \
	VMULSS       (DX), X, X  \
	VBROADCASTSS X, Y

// LHADDI(Y, X, T): the int32 sum of Y's 8 lanes into AX (T clobbered).
#define LHADDI(Y, X, T) \
	VEXTRACTI128 $1, Y, T  \
	VPADDD       T, X, X   \
	VPSHUFD      $0x4e, X, T \
	VPADDD       T, X, X   \
	VPSHUFD      $0xb1, X, T \
	VPADDD       T, X, X   \
	VMOVD        X, AX

// The scale of a 32-element group c of a K-quant with 16-element
// sub-blocks: the two int16 scales at 4c(SP) spread by LSHUF into Y10.
#define LGSCALE(c) \
	VPBROADCASTD (4*(c))(SP), Y10 \
	VPSHUFB      Y11, Y10, Y10

// Q2SCALES: the 16 scales (low nibbles at SI) as int16 at 0(SP); the mins
// term X5 += float(sum_s m[s]*bsums[s]) * X6 (dmin*dx), bsums at BX.
// Y13 = 0x0f bytes. Clobbers X3, X4, AX.
#define Q2SCALES \
	VMOVDQU     (SI), X3       \
	VPAND       X13, X3, X4    \
	VPMOVZXBW   X4, Y4         \
	VMOVDQU     Y4, 0(SP)      \
	VPSRLW      $4, X3, X3     \
	VPAND       X13, X3, X3    \
	VPMOVZXBW   X3, Y3         \
	VPMADDWD    (BX), Y3, Y3   \
	LHADDI(Y3, X3, X4)         \
	VCVTSI2SSL  AX, X4, X4     \
	VFMADD231SS X4, X6, X5

// Q2GROUP(c, s): group c's 2-bit quants ((Y12 >> s) & 3) against the
// activations at DI+32c, times the group's scales, into Y1.
#define Q2GROUP(c, s) \
	VPSRLW     $(s), Y12, Y9       \
	VPAND      Y15, Y9, Y9         \
	VPMADDUBSW (32*(c))(DI), Y9, Y9 \
	LGSCALE(c)                     \
	VPMADDWD   Y10, Y9, Y9         \
	VPADDD     Y9, Y1, Y1

// Q2X4GROUP(c, s): group c's quants (built once in Y14) against the four
// vectors (x + t*xs: DI, R8, R9 = 3*xs) into Y0-Y3.
#define Q2X4GROUP(c, s) \
	VPSRLW     $(s), Y12, Y14                \
	VPAND      Y15, Y14, Y14                 \
	LGSCALE(c)                               \
	VPMADDUBSW (32*(c))(DI), Y14, Y8         \
	VPMADDWD   Y10, Y8, Y8                   \
	VPADDD     Y8, Y0, Y0                    \
	VPMADDUBSW (32*(c))(DI)(R8*1), Y14, Y8   \
	VPMADDWD   Y10, Y8, Y8                   \
	VPADDD     Y8, Y1, Y1                    \
	VPMADDUBSW (32*(c))(DI)(R8*2), Y14, Y8   \
	VPMADDWD   Y10, Y8, Y8                   \
	VPADDD     Y8, Y2, Y2                    \
	VPMADDUBSW (32*(c))(DI)(R9*1), Y14, Y8   \
	VPMADDWD   Y10, Y8, Y8                   \
	VPADDD     Y8, Y3, Y3

// Q2X4FIN(S, A, DADDR, BADDR, MOFF): A = fma(float(S), d_t*d, A) and the
// mins term of vector t (16-sums at BADDR) into the accumulator at
// MOFF(SP) with d_t*dmin. Clobbers X8-X10, AX.
#define Q2X4FIN(S, A, DADDR, BADDR, MOFF) \
	VMOVSS       DADDR, X9         \
	VMULSS       64(SP), X9, X10   \
	VBROADCASTSS X10, Y10          \
	VCVTDQ2PS    S, S              \
	VFMADD231PS  S, Y10, A         \
	VMULSS       68(SP), X9, X9    \
	VMOVDQU      32(SP), Y8        \
	VPMADDWD     BADDR, Y8, Y8     \
	LHADDI(Y8, X8, X10)            \
	VCVTSI2SSL   AX, X10, X10      \
	VMOVSS       MOFF(SP), X8      \
	VFMADD231SS  X10, X9, X8       \
	VMOVSS       X8, MOFF(SP)

// Q3SCALES(R, S): the 16 scales of the block at SI (12 bytes at SI+96),
// minus 32, as int16 at 0(SP): scale j's low 4 bits are nibble j/8 of
// byte j%8, its top 2 bits bits 2(j/4) of byte 8+j%4. Clobbers R, S, X3.
#define Q3SCALES(R, S) \
	MOVL      104(SI), R          \
	SHLL      $4, R               \
	ANDL      $0x30303030, R      \
	MOVL      96(SI), S           \
	ANDL      $0x0f0f0f0f, S      \
	ORL       S, R                \
	VMOVD     R, X3               \
	MOVL      104(SI), R          \
	SHLL      $2, R               \
	ANDL      $0x30303030, R      \
	MOVL      100(SI), S          \
	ANDL      $0x0f0f0f0f, S      \
	ORL       S, R                \
	VPINSRD   $1, R, X3, X3       \
	MOVL      104(SI), R          \
	ANDL      $0x30303030, R      \
	MOVL      96(SI), S           \
	SHRL      $4, S               \
	ANDL      $0x0f0f0f0f, S      \
	ORL       S, R                \
	VPINSRD   $2, R, X3, X3       \
	MOVL      104(SI), R          \
	SHRL      $2, R               \
	ANDL      $0x30303030, R      \
	MOVL      100(SI), S          \
	SHRL      $4, S               \
	ANDL      $0x0f0f0f0f, S      \
	ORL       S, R                \
	VPINSRD   $3, R, X3, X3       \
	VPMOVZXBW X3, Y3              \
	VPSUBW    c32w<>(SB), Y3, Y3  \
	VMOVDQU   Y3, 0(SP)

// Q3QUANT(s, HOP, hs, Q, H): Q = group's quants q-4 as signed bytes:
// (Y12 >> s) & 3, plus 4 where bit c of the hmask bytes in Y8 is set
// (HOP $hs moves bit c to bit 2), minus 4. H is clobbered.
#define Q3QUANT(s, HOP, hs, Q, H) \
	VPSRLW $(s), Y12, Q        \
	VPAND  Y15, Q, Q           \
	HOP    $(hs), Y8, H        \
	VPAND  four<>(SB), H, H    \
	VPOR   H, Q, Q             \
	VPSUBB four<>(SB), Q, Q

// Q3GROUP(c, s, HOP, hs): group c against the activations at DI+32c,
// signed quants times signed bytes as |q| * (x with q's sign), into Y1.
#define Q3GROUP(c, s, HOP, hs) \
	Q3QUANT(s, HOP, hs, Y9, Y14)  \
	VPSIGNB    Y9, Y9, Y14        \
	VMOVDQU    (32*(c))(DI), Y10  \
	VPSIGNB    Y9, Y10, Y10       \
	VPMADDUBSW Y10, Y14, Y14      \
	LGSCALE(c)                    \
	VPMADDWD   Y10, Y14, Y14      \
	VPADDD     Y14, Y1, Y1

// LX4DOT(Q, A, S, XOFF, ACC): ACC += S * lanes(A · (x at XOFF with Q's
// signs)), A = |Q|: signed weights times signed activations without
// saturation (|q| <= 127, |x| <= 127). Clobbers Y9.
#define LX4DOT(Q, A, S, XOFF, ACC) \
	VMOVDQU    XOFF, Y9   \
	VPSIGNB    Q, Y9, Y9  \
	VPMADDUBSW Y9, A, Y9  \
	VPMADDWD   S, Y9, Y9  \
	VPADDD     Y9, ACC, ACC

// Q3X4GROUP(c, s, HOP, hs): group c's signed quants (Y13, |q| in Y14,
// built once) against the four vectors into Y0-Y3.
#define Q3X4GROUP(c, s, HOP, hs) \
	Q3QUANT(s, HOP, hs, Y13, Y9)                          \
	VPSIGNB Y13, Y13, Y14                                 \
	LGSCALE(c)                                            \
	LX4DOT(Y13, Y14, Y10, (32*(c))(DI), Y0)               \
	LX4DOT(Y13, Y14, Y10, (32*(c))(DI)(R8*1), Y1)         \
	LX4DOT(Y13, Y14, Y10, (32*(c))(DI)(R8*2), Y2)         \
	LX4DOT(Y13, Y14, Y10, (32*(c))(DI)(R9*1), Y3)

// LX4FIN(S, A, DADDR, WOFF): A = fma(float(S), d_t * (weight scale at
// WOFF(SP)), A). Clobbers X9.
#define LX4FIN(S, A, DADDR, WOFF) \
	VMOVSS       DADDR, X9       \
	VMULSS       WOFF(SP), X9, X9 \
	VBROADCASTSS X9, Y9          \
	VCVTDQ2PS    S, S            \
	VFMADD231PS  S, Y9, A

// LX4OUT stores hsum8 of Y4-Y7 to out[0..3] (BX = out).
#define LX4OUT \
	LHSUM8(Y4, X4, X8) \
	VMOVSS X4, (BX)    \
	LHSUM8(Y5, X5, X8) \
	VMOVSS X5, 4(BX)   \
	LHSUM8(Y6, X6, X8) \
	VMOVSS X6, 8(BX)   \
	LHSUM8(Y7, X7, X8) \
	VMOVSS X7, 12(BX)

// IQ4SCALES(R, S): the 8 6-bit scales of the block at SI, minus 32, as
// int16 at 0(SP). The high bits (scales_h at SI+2, 2 bits per sub-block)
// are spread to one byte each by three shift-or-mask steps; the low
// nibbles (scales_l at SI+4) are interleaved low, high per byte.
// Y15 = 0x0f bytes. Clobbers R, S, X8-X10.
#define IQ4SCALES(R, S) \
	MOVWLZX    2(SI), R                 \
	MOVQ       R, S                     \
	SHLQ       $24, S                   \
	ORQ        S, R                     \
	MOVQ       $0x000000ff000000ff, S   \
	ANDQ       S, R                     \
	MOVQ       R, S                     \
	SHLQ       $12, S                   \
	ORQ        S, R                     \
	MOVQ       $0x000f000f000f000f, S   \
	ANDQ       S, R                     \
	MOVQ       R, S                     \
	SHLQ       $6, S                    \
	ORQ        S, R                     \
	MOVQ       $0x0303030303030303, S   \
	ANDQ       S, R                     \
	VMOVQ      R, X8                    \
	VPSLLW     $4, X8, X8               \
	MOVL       4(SI), R                 \
	VMOVD      R, X9                    \
	VPSRLW     $4, X9, X10              \
	VPUNPCKLBW X10, X9, X9              \
	VPAND      X15, X9, X9              \
	VPOR       X8, X9, X9               \
	VPMOVZXBW  X9, X9                   \
	VPSUBW     c32w<>(SB), X9, X9       \
	VMOVDQU    X9, 0(SP)

// IQ4LEVELS(j): Y13 = the 32 levels of sub-block j as signed bytes in
// element order (low nibbles, then high nibbles; Y14 = the level table,
// Y15 = 0x0f bytes). Clobbers X9.
#define IQ4LEVELS(j) \
	VMOVDQU     (8+16*(j))(SI), X13 \
	VPSRLW      $4, X13, X9         \
	VINSERTI128 $1, X9, Y13, Y13    \
	VPAND       Y15, Y13, Y13       \
	VPSHUFB     Y13, Y14, Y13

// IQ4SUB(j): sub-block j against the activations at DI+32j, times its
// scale, into Y1.
#define IQ4SUB(j) \
	IQ4LEVELS(j)              \
	VPSIGNB      Y13, Y13, Y8      \
	VMOVDQU      (32*(j))(DI), Y9  \
	VPSIGNB      Y13, Y9, Y9       \
	VPMADDUBSW   Y9, Y8, Y8        \
	VPBROADCASTW (2*(j))(SP), Y10  \
	VPMADDWD     Y10, Y8, Y8       \
	VPADDD       Y8, Y1, Y1

// IQ4X4SUB(j): sub-block j's levels (Y13, magnitudes Y12, built once)
// against the four vectors into Y0-Y3.
#define IQ4X4SUB(j) \
	IQ4LEVELS(j)                               \
	VPSIGNB      Y13, Y13, Y12                      \
	VPBROADCASTW (2*(j))(SP), Y10                   \
	LX4DOT(Y13, Y12, Y10, (32*(j))(DI), Y0)         \
	LX4DOT(Y13, Y12, Y10, (32*(j))(DI)(R8*1), Y1)   \
	LX4DOT(Y13, Y12, Y10, (32*(j))(DI)(R8*2), Y2)   \
	LX4DOT(Y13, Y12, Y10, (32*(j))(DI)(R9*1), Y3)

// ---- Q2_K ----

// func dotQ2_KAVX2(w *byte, x *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ2_KAVX2(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	LBCAST($0x03030303, X15, Y15)
	LBCAST($0x0f0f0f0f, X13, Y13)
	LSHUF
	VXORPS Y0, Y0, Y0
	VXORPS X5, X5, X5

q2kloop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	LSCALE(80, X2, Y2)
	MOVWLZX    82(SI), AX
	VMOVD      AX, X6
	VCVTPH2PS  X6, X6
	VMULSS     (DX), X6, X6
	Q2SCALES
	VPXOR      Y1, Y1, Y1
	VMOVDQU    16(SI), Y12
	Q2GROUP(0, 0)
	Q2GROUP(1, 2)
	Q2GROUP(2, 4)
	Q2GROUP(3, 6)
	VMOVDQU    48(SI), Y12
	Q2GROUP(4, 0)
	Q2GROUP(5, 2)
	Q2GROUP(6, 4)
	Q2GROUP(7, 6)
	VCVTDQ2PS   Y1, Y1
	VFMADD231PS Y1, Y2, Y0
	ADDQ $84, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q2kloop

	LHSUM8(Y0, X0, X1)
	VSUBSS X5, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// func dotQ2_Kx4AVX2(w *byte, x *int8, d *float32, bsums *int16, nb, xs, ds, bs int, out *float32)
//
// Frame: 0 the 16 scales, 32 the 16 mins (int16), 64 d, 68 dmin of the
// weights, 80 the four mins accumulators.
TEXT ·dotQ2_Kx4AVX2(SB), NOSPLIT, $96-72
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
	LBCAST($0x03030303, X15, Y15)
	LBCAST($0x0f0f0f0f, X13, Y13)
	LSHUF
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	VMOVDQU X4, 80(SP)

q2kx4loop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	MOVWLZX   80(SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 64(SP)
	MOVWLZX   82(SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 68(SP)
	VMOVDQU   (SI), X8
	VPAND     X13, X8, X9
	VPMOVZXBW X9, Y9
	VMOVDQU   Y9, 0(SP)
	VPSRLW    $4, X8, X8
	VPAND     X13, X8, X8
	VPMOVZXBW X8, Y8
	VMOVDQU   Y8, 32(SP)
	VPXOR     Y0, Y0, Y0
	VPXOR     Y1, Y1, Y1
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	VMOVDQU   16(SI), Y12
	Q2X4GROUP(0, 0)
	Q2X4GROUP(1, 2)
	Q2X4GROUP(2, 4)
	Q2X4GROUP(3, 6)
	VMOVDQU   48(SI), Y12
	Q2X4GROUP(4, 0)
	Q2X4GROUP(5, 2)
	Q2X4GROUP(6, 4)
	Q2X4GROUP(7, 6)
	Q2X4FIN(Y0, Y4, (DX), (BX), 80)
	Q2X4FIN(Y1, Y5, (DX)(R10*1), (BX)(R12*1), 84)
	Q2X4FIN(Y2, Y6, (DX)(R10*2), (BX)(R12*2), 88)
	Q2X4FIN(Y3, Y7, (DX)(R11*1), (BX)(R13*1), 92)
	ADDQ $84, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q2kx4loop

	MOVQ out+64(FP), BX
	LHSUM8(Y4, X4, X8)
	VSUBSS 80(SP), X4, X4
	VMOVSS X4, (BX)
	LHSUM8(Y5, X5, X8)
	VSUBSS 84(SP), X5, X5
	VMOVSS X5, 4(BX)
	LHSUM8(Y6, X6, X8)
	VSUBSS 88(SP), X6, X6
	VMOVSS X6, 8(BX)
	LHSUM8(Y7, X7, X8)
	VSUBSS 92(SP), X7, X7
	VMOVSS X7, 12(BX)
	VZEROUPPER
	RET

// ---- Q3_K ----

// func dotQ3_KAVX2(w *byte, x *int8, d *float32, nb int) float32
TEXT ·dotQ3_KAVX2(SB), NOSPLIT, $32-36
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	LBCAST($0x03030303, X15, Y15)
	LSHUF
	VXORPS Y0, Y0, Y0

q3kloop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	LSCALE(108, X2, Y2)
	Q3SCALES(AX, R8)
	VMOVDQU (SI), Y8
	VPXOR   Y1, Y1, Y1
	VMOVDQU 32(SI), Y12
	Q3GROUP(0, 0, VPSLLW, 2)
	Q3GROUP(1, 2, VPSLLW, 1)
	Q3GROUP(2, 4, VPSRLW, 0)
	Q3GROUP(3, 6, VPSRLW, 1)
	VMOVDQU 64(SI), Y12
	Q3GROUP(4, 0, VPSRLW, 2)
	Q3GROUP(5, 2, VPSRLW, 3)
	Q3GROUP(6, 4, VPSRLW, 4)
	Q3GROUP(7, 6, VPSRLW, 5)
	VCVTDQ2PS   Y1, Y1
	VFMADD231PS Y1, Y2, Y0
	ADDQ $110, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q3kloop

	LHSUM8(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// func dotQ3_Kx4AVX2(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)
//
// Frame: 0 the 16 scales (int16, minus 32), 32 the weight super-scale.
TEXT ·dotQ3_Kx4AVX2(SB), NOSPLIT, $48-56
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVQ xs+32(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ ds+40(FP), R10
	LEAQ (R10)(R10*2), R11
	LBCAST($0x03030303, X15, Y15)
	LSHUF
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

q3kx4loop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	MOVWLZX   108(SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 32(SP)
	Q3SCALES(AX, BX)
	VMOVDQU   (SI), Y8
	VPXOR     Y0, Y0, Y0
	VPXOR     Y1, Y1, Y1
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	VMOVDQU   32(SI), Y12
	Q3X4GROUP(0, 0, VPSLLW, 2)
	Q3X4GROUP(1, 2, VPSLLW, 1)
	Q3X4GROUP(2, 4, VPSRLW, 0)
	Q3X4GROUP(3, 6, VPSRLW, 1)
	VMOVDQU   64(SI), Y12
	Q3X4GROUP(4, 0, VPSRLW, 2)
	Q3X4GROUP(5, 2, VPSRLW, 3)
	Q3X4GROUP(6, 4, VPSRLW, 4)
	Q3X4GROUP(7, 6, VPSRLW, 5)
	LX4FIN(Y0, Y4, (DX), 32)
	LX4FIN(Y1, Y5, (DX)(R10*1), 32)
	LX4FIN(Y2, Y6, (DX)(R10*2), 32)
	LX4FIN(Y3, Y7, (DX)(R11*1), 32)
	ADDQ $110, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q3kx4loop

	MOVQ out+48(FP), BX
	LX4OUT
	VZEROUPPER
	RET

// ---- IQ4_XS ----

// func dotIQ4_XSAVX2(w *byte, x *int8, d *float32, nb int) float32
TEXT ·dotIQ4_XSAVX2(SB), NOSPLIT, $16-36
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	LBCAST($0x0f0f0f0f, X15, Y15)
	VMOVDQU iq4nl<>(SB), Y14
	VXORPS  Y0, Y0, Y0

iq4xsloop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	LSCALE(0, X2, Y2)
	IQ4SCALES(AX, R8)
	VPXOR Y1, Y1, Y1
	IQ4SUB(0)
	IQ4SUB(1)
	IQ4SUB(2)
	IQ4SUB(3)
	IQ4SUB(4)
	IQ4SUB(5)
	IQ4SUB(6)
	IQ4SUB(7)
	VCVTDQ2PS   Y1, Y1
	VFMADD231PS Y1, Y2, Y0
	ADDQ $136, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  iq4xsloop

	LHSUM8(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// func dotIQ4_XSx4AVX2(w *byte, x *int8, d *float32, nb, xs, ds int, out *float32)
//
// Frame: 0 the 8 scales (int16, minus 32), 16 the weight super-scale.
TEXT ·dotIQ4_XSx4AVX2(SB), NOSPLIT, $32-56
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVQ xs+32(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ ds+40(FP), R10
	LEAQ (R10)(R10*2), R11
	LBCAST($0x0f0f0f0f, X15, Y15)
	VMOVDQU iq4nl<>(SB), Y14
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7

iq4xsx4loop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	MOVWLZX   (SI), AX
	VMOVD     AX, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, 16(SP)
	IQ4SCALES(AX, BX)
	VPXOR     Y0, Y0, Y0
	VPXOR     Y1, Y1, Y1
	VPXOR     Y2, Y2, Y2
	VPXOR     Y3, Y3, Y3
	IQ4X4SUB(0)
	IQ4X4SUB(1)
	IQ4X4SUB(2)
	IQ4X4SUB(3)
	IQ4X4SUB(4)
	IQ4X4SUB(5)
	IQ4X4SUB(6)
	IQ4X4SUB(7)
	LX4FIN(Y0, Y4, (DX), 16)
	LX4FIN(Y1, Y5, (DX)(R10*1), 16)
	LX4FIN(Y2, Y6, (DX)(R10*2), 16)
	LX4FIN(Y3, Y7, (DX)(R11*1), 16)
	ADDQ $136, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  iq4xsx4loop

	MOVQ out+48(FP), BX
	LX4OUT
	VZEROUPPER
	RET

// The VNNI forms of the kernels above: one body (dot_low_vnni_amd64.h)
// assembled with the VEX VPDPWSSD (*VNNI, "avxvnni") and the EVEX one
// (*AVX512, "avx512"). VNNIW names it; the macros below are the AVX2 ones
// with it.

// Q2GROUPN(c, s): Q2GROUP with VPDPWSSD.
#define Q2GROUPN(c, s) \
	VPSRLW     $(s), Y12, Y9        \
	VPAND      Y15, Y9, Y9          \
	VPMADDUBSW (32*(c))(DI), Y9, Y9 \
	LGSCALE(c)                      \
	VNNIW(9, 10, 1)

// Q2X4GROUPN(c, s): Q2X4GROUP with VPDPWSSD.
#define Q2X4GROUPN(c, s) \
	VPSRLW     $(s), Y12, Y14              \
	VPAND      Y15, Y14, Y14               \
	LGSCALE(c)                             \
	VPMADDUBSW (32*(c))(DI), Y14, Y8       \
	VNNIW(8, 10, 0)                        \
	VPMADDUBSW (32*(c))(DI)(R8*1), Y14, Y8 \
	VNNIW(8, 10, 1)                        \
	VPMADDUBSW (32*(c))(DI)(R8*2), Y14, Y8 \
	VNNIW(8, 10, 2)                        \
	VPMADDUBSW (32*(c))(DI)(R9*1), Y14, Y8 \
	VNNIW(8, 10, 3)

// Q3GROUPN(c, s, HOP, hs): Q3GROUP with VPDPWSSD.
#define Q3GROUPN(c, s, HOP, hs) \
	Q3QUANT(s, HOP, hs, Y9, Y14)  \
	VPSIGNB    Y9, Y9, Y14        \
	VMOVDQU    (32*(c))(DI), Y10  \
	VPSIGNB    Y9, Y10, Y10       \
	VPMADDUBSW Y10, Y14, Y14      \
	LGSCALE(c)                    \
	VNNIW(14, 10, 1)

// LX4DOTN(Q, A, XOFF, acc): LX4DOT with VPDPWSSD, the scales in Y10 and
// the accumulator Y(acc).
#define LX4DOTN(Q, A, XOFF, acc) \
	VMOVDQU    XOFF, Y9   \
	VPSIGNB    Q, Y9, Y9  \
	VPMADDUBSW Y9, A, Y9  \
	VNNIW(9, 10, acc)

// Q3X4GROUPN(c, s, HOP, hs): Q3X4GROUP with VPDPWSSD.
#define Q3X4GROUPN(c, s, HOP, hs) \
	Q3QUANT(s, HOP, hs, Y13, Y9)                 \
	VPSIGNB Y13, Y13, Y14                        \
	LGSCALE(c)                                   \
	LX4DOTN(Y13, Y14, (32*(c))(DI), 0)           \
	LX4DOTN(Y13, Y14, (32*(c))(DI)(R8*1), 1)     \
	LX4DOTN(Y13, Y14, (32*(c))(DI)(R8*2), 2)     \
	LX4DOTN(Y13, Y14, (32*(c))(DI)(R9*1), 3)

// IQ4SUBN(j): IQ4SUB with VPDPWSSD.
#define IQ4SUBN(j) \
	IQ4LEVELS(j)                   \
	VPSIGNB      Y13, Y13, Y8      \
	VMOVDQU      (32*(j))(DI), Y9  \
	VPSIGNB      Y13, Y9, Y9       \
	VPMADDUBSW   Y9, Y8, Y8        \
	VPBROADCASTW (2*(j))(SP), Y10  \
	VNNIW(8, 10, 1)

// IQ4X4SUBN(j): IQ4X4SUB with VPDPWSSD.
#define IQ4X4SUBN(j) \
	IQ4LEVELS(j)                            \
	VPSIGNB      Y13, Y13, Y12              \
	VPBROADCASTW (2*(j))(SP), Y10           \
	LX4DOTN(Y13, Y12, (32*(j))(DI), 0)      \
	LX4DOTN(Y13, Y12, (32*(j))(DI)(R8*1), 1) \
	LX4DOTN(Y13, Y12, (32*(j))(DI)(R8*2), 2) \
	LX4DOTN(Y13, Y12, (32*(j))(DI)(R9*1), 3)

#define VNNIW(src2, src1, dst) VPDPWSSDV(src2, src1, dst)
#define FN_Q2K ·dotQ2_KVNNI
#define FN_Q2KX4 ·dotQ2_Kx4VNNI
#define FN_Q3K ·dotQ3_KVNNI
#define FN_Q3KX4 ·dotQ3_Kx4VNNI
#define FN_IQ4XS ·dotIQ4_XSVNNI
#define FN_IQ4XSX4 ·dotIQ4_XSx4VNNI
#include "dot_low_vnni_amd64.h"
#undef VNNIW
#undef FN_Q2K
#undef FN_Q2KX4
#undef FN_Q3K
#undef FN_Q3KX4
#undef FN_IQ4XS
#undef FN_IQ4XSX4

#define VNNIW(src2, src1, dst) VPDPWSSDE(src2, src1, dst)
#define FN_Q2K ·dotQ2_KAVX512
#define FN_Q2KX4 ·dotQ2_Kx4AVX512
#define FN_Q3K ·dotQ3_KAVX512
#define FN_Q3KX4 ·dotQ3_Kx4AVX512
#define FN_IQ4XS ·dotIQ4_XSAVX512
#define FN_IQ4XSX4 ·dotIQ4_XSx4AVX512
#include "dot_low_vnni_amd64.h"

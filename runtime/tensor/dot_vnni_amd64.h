// The bodies of the VNNI one-vector kernels of dot_amd64.s, included
// twice there: with VNNIB/VNNIW the VEX forms (FN_* named *VNNI, for
// "avxvnni") and with the EVEX forms (*AVX512, for "avx512"). Each is its
// AVX2 namesake with the integer dot products on VPDPBUSD (bytes straight
// to int32 lanes: one instruction for VPMADDUBSW, VPMADDWD and, where
// there was one, VPADDW) or VPDPWSSD (int16 pairs times the scales, added:
// one for VPMADDWD and VPADDD); the float steps are unchanged, so each
// computes exactly what its generic namesake computes. The helper macros
// (Q8DOTN, Q4PAIRN, TPAIRN, Q4LONEN, K6HALFN) are in dot_amd64.s.

// FN_Q80: dotQ8_0AVX2 with VNNI.
TEXT FN_Q80(SB), NOSPLIT, $32-36
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
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
	Q8DOTN(0, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+32(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      36(SI), X3
	VINSERTI128  $1, 52(SI), Y3, Y3
	Q8DOTN(32, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+64(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      70(SI), X3
	VINSERTI128  $1, 86(SI), Y3, Y3
	Q8DOTN(64, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+96(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      104(SI), X3
	VINSERTI128  $1, 120(SI), Y3, Y3
	Q8DOTN(96, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+128(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      138(SI), X3
	VINSERTI128  $1, 154(SI), Y3, Y3
	Q8DOTN(128, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+160(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      172(SI), X3
	VINSERTI128  $1, 188(SI), Y3, Y3
	Q8DOTN(160, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+192(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      206(SI), X3
	VINSERTI128  $1, 222(SI), Y3, Y3
	Q8DOTN(192, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+224(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      240(SI), X3
	VINSERTI128  $1, 256(SI), Y3, Y3
	Q8DOTN(224, Y3, Y1, Y2)
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
	Q8DOTN(0, Y3, Y0, Y2)
	ADDQ    $4, DX
	SCALE16(34, X4, Y4)
	VMOVDQU 36(SI), X3
	VINSERTI128 $1, 52(SI), Y3, Y3
	Q8DOTN(32, Y3, Y1, Y4)
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
	Q8DOTN(0, Y3, Y0, Y2)

q80done:
	VADDPS Y1, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS  X0, ret+32(FP)
	RET

// FN_Q80ROWS: dotQ8_0RowsAVX2 with VNNI.
TEXT FN_Q80ROWS(SB), NOSPLIT, $32-56
	MOVQ w+0(FP), R13
	MOVQ rows+32(FP), R12
	MOVQ out+48(FP), BX

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
	Q8DOTN(0, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+32(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      36(SI), X3
	VINSERTI128  $1, 52(SI), Y3, Y3
	Q8DOTN(32, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+64(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      70(SI), X3
	VINSERTI128  $1, 86(SI), Y3, Y3
	Q8DOTN(64, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+96(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      104(SI), X3
	VINSERTI128  $1, 120(SI), Y3, Y3
	Q8DOTN(96, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+128(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      138(SI), X3
	VINSERTI128  $1, 154(SI), Y3, Y3
	Q8DOTN(128, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+160(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      172(SI), X3
	VINSERTI128  $1, 188(SI), Y3, Y3
	Q8DOTN(160, Y3, Y1, Y2)
	VMOVDQU      bcastIdx<>+192(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      206(SI), X3
	VINSERTI128  $1, 222(SI), Y3, Y3
	Q8DOTN(192, Y3, Y0, Y2)
	VMOVDQU      bcastIdx<>+224(SB), Y2
	VPERMPS      Y7, Y2, Y2
	VMOVDQU      240(SI), X3
	VINSERTI128  $1, 256(SI), Y3, Y3
	Q8DOTN(224, Y3, Y1, Y2)
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
	Q8DOTN(0, Y3, Y0, Y2)
	ADDQ    $4, DX
	SCALE16(34, X4, Y4)
	VMOVDQU 36(SI), X3
	VINSERTI128 $1, 52(SI), Y3, Y3
	Q8DOTN(32, Y3, Y1, Y4)
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
	Q8DOTN(0, Y3, Y0, Y2)

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

// FN_Q40: dotQ4_0AVX2 with VNNI.
TEXT FN_Q40(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ s8+24(FP), R12
	MOVQ nb+32(FP), CX
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
	Q4PAIRN(0, 0, Y2, Y0)
	VMOVDQU     pairIdx<>+32(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIRN(36, 64, Y2, Y1)
	VMOVDQU     pairIdx<>+64(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIRN(72, 128, Y2, Y0)
	VMOVDQU     pairIdx<>+96(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIRN(108, 192, Y2, Y1)
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
	TPAIRN(Y0)
	CMPQ CX, $2
	JLT  q40lone1
	TPAIRN(Y1)
	CMPQ CX, $2
	JLT  q40lone0
	TPAIRN(Y0)

q40lone1:
	TESTQ CX, CX
	JZ    q40done
	S1(0, 0, X2)
	VFMADD231SS  (R12), X2, X9
	VBROADCASTSS X2, Y2
	Q4LONEN(Y1)
	JMP          q40done

q40lone0:
	TESTQ CX, CX
	JZ    q40done
	S1(0, 0, X2)
	VFMADD231SS  (R12), X2, X9
	VBROADCASTSS X2, Y2
	Q4LONEN(Y0)

q40done:
	VADDPS Y1, Y0, Y0
	HSUM8
	HSUMR(Y8, X8, X12)
	VADDSS X9, X8, X8
	VSUBSS X8, X0, X0
	VZEROUPPER
	MOVSS  X0, ret+40(FP)
	RET

// FN_Q40ROWS: dotQ4_0RowsAVX2 with VNNI.
TEXT FN_Q40ROWS(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R13
	MOVQ out+56(FP), BX
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
	Q4PAIRN(0, 0, Y2, Y0)
	VMOVDQU     pairIdx<>+32(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIRN(36, 64, Y2, Y1)
	VMOVDQU     pairIdx<>+64(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIRN(72, 128, Y2, Y0)
	VMOVDQU     pairIdx<>+96(SB), Y2
	VPERMPS     Y7, Y2, Y2
	Q4PAIRN(108, 192, Y2, Y1)
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
	TPAIRN(Y0)
	CMPQ CX, $2
	JLT  q40rlone1
	TPAIRN(Y1)
	CMPQ CX, $2
	JLT  q40rlone0
	TPAIRN(Y0)

q40rlone1:
	TESTQ CX, CX
	JZ    q40rdone
	S1(0, 0, X2)
	VFMADD231SS  (R12), X2, X9
	VBROADCASTSS X2, Y2
	Q4LONEN(Y1)
	JMP          q40rdone

q40rlone0:
	TESTQ CX, CX
	JZ    q40rdone
	S1(0, 0, X2)
	VFMADD231SS  (R12), X2, X9
	VBROADCASTSS X2, Y2
	Q4LONEN(Y0)

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

// FN_Q6K: dotQ6_KAVX2 with VNNI.
TEXT FN_Q6K(SB), NOSPLIT, $32-36
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
	VPXOR     Y9, Y9, Y9
	K6HALFN(0)
	K6HALFN(1)
	VPSUBD      Y9, Y1, Y1
	VCVTDQ2PS   Y1, Y1
	VFMADD231PS Y1, Y2, Y0
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q6kloop

	HSUM8
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

//go:build !purego

#include "textflag.h"

// The half-precision conversions of the KV cache on arm64 (attn.go):
// FCVTL/FCVTL2 widen exactly, FCVTN/FCVTN2 narrow with the FPCR rounding
// mode (round to nearest even in Go programs). Go's assembler has no
// mnemonics for them, so they are WORDs (register numbers in the low bits:
// Rd bits 0-4, Rn bits 5-9).

// func decodeF16NEON(dst *float32, src *uint16, n int)
//
// dst[i] = the half src[i] for n (a positive multiple of 8) elements.
TEXT ·decodeF16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	LSR  $3, R2, R2

h8:
	VLD1.P 16(R1), [V0.H8]
	WORD   $0x0e217801 // FCVTL  V1.4S, V0.4H
	WORD   $0x4e217802 // FCVTL2 V2.4S, V0.8H
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS   $1, R2
	BNE    h8
	RET

// func encodeF16NEON(dst *uint16, src *float32, n int)
//
// dst[i] = FP32ToFP16(src[i]) for n (a positive multiple of 8) elements.
TEXT ·encodeF16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	LSR  $3, R2, R2

e8:
	VLD1.P 32(R1), [V1.S4, V2.S4]
	WORD   $0x0e216820 // FCVTN  V0.4H, V1.4S
	WORD   $0x4e216840 // FCVTN2 V0.8H, V2.4S
	VST1.P [V0.H8], 16(R0)
	SUBS   $1, R2
	BNE    e8
	RET

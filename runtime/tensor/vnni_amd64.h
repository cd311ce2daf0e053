// The VNNI dot-product instructions as bytes, for 32-byte registers 0-15
// (register-register forms only). Go's assembler writes VPDPBUSD and
// VPDPWSSD only in their EVEX (AVX-512) encoding; CPUs with AVX-VNNI but
// not AVX-512 need the VEX one, so both are spelled out here and a kernel
// body written once with VNNIB/VNNIW (dot_vnni_amd64.h) is assembled
// twice: with the VEX forms for "avxvnni", with the EVEX forms for
// "avx512".
//
// In every macro: Y(dst) += the int32 lane sums of the products of
// Y(src1) and Y(src2): VPDPBUSD, four bytes per lane (src1 unsigned, src2
// signed, no saturation); VPDPWSSD, two int16 per lane.

// VNNIVEX(op, src2, src1, dst): VEX.256.66.0F38.W0 op /r.
#define VNNIVEX(op, src2, src1, dst) \
	BYTE $0xC4; BYTE $((((~(dst>>3))&1)<<7) | 0x40 | (((~(src2>>3))&1)<<5) | 0x02); BYTE $((((~src1)&15)<<3) | 0x05); BYTE $op; BYTE $(0xC0 | ((dst&7)<<3) | (src2&7))

// VNNIEVEX(op, src2, src1, dst): EVEX.256.66.0F38.W0 op /r, no masking.
#define VNNIEVEX(op, src2, src1, dst) \
	BYTE $0x62; BYTE $((((~(dst>>3))&1)<<7) | 0x52 | (((~(src2>>3))&1)<<5)); BYTE $((((~src1)&15)<<3) | 0x05); BYTE $0x28; BYTE $op; BYTE $(0xC0 | ((dst&7)<<3) | (src2&7))

#define VPDPBUSDV(src2, src1, dst) VNNIVEX(0x50, src2, src1, dst)
#define VPDPWSSDV(src2, src1, dst) VNNIVEX(0x52, src2, src1, dst)
#define VPDPBUSDE(src2, src1, dst) VNNIEVEX(0x50, src2, src1, dst)
#define VPDPWSSDE(src2, src1, dst) VNNIEVEX(0x52, src2, src1, dst)

package tensor

import "testing"

// Known blocks of the low-bit types, built byte by byte from the ggml
// layouts (ggml-common.h, dequantize_row_* in ggml-quants.c). The same
// decoders were also checked bit for bit against ggml's own (libggml-base
// from node-llama-cpp) on ggml-quantized and on our blocks.

func TestKnownQ2_K(t *testing.T) {
	// scales[s] = s&15 | (s%4)<<4 (scale s&15, min s%4), qs[i] = i,
	// d = 0.5, dmin = 0.25. Element e = 128h+32k+l has quant
	// (qs[32h+l] >> 2k) & 3 and sub-block s = e/16.
	var block []byte
	for s := range 16 {
		block = append(block, byte(s&15|(s%4)<<4))
	}
	for i := range 64 {
		block = append(block, byte(i))
	}
	block = append(block, le16(0x3800)...) // d = 0.5
	block = append(block, le16(0x3400)...) // dmin = 0.25
	want := make([]float32, 256)
	for e := range want {
		h, k, l, s := e/128, e%128/32, e%32, e/16
		q := (32*h + l) >> (2 * k) & 3
		want[e] = 0.5*float32(s&15)*float32(q) - 0.25*float32(s%4)
	}
	// Spot values worked by hand: e=0: q=0, s=0 -> 0. e=21: qs[21]=0b10101
	// k=0 -> q=1, s=1 (scale 1, min 1) -> 0.5-0.25. e=200: h=1, k=2, l=8,
	// qs[40]=0b101000 >>4 = 2, s=12 (scale 12, min 0) -> 12. e=255: h=1,
	// k=3, l=31, qs[63]=0b111111 >>6 = 0, s=15 (min 3) -> -0.75.
	for e, v := range map[int]float32{0: 0, 21: 0.25, 200: 12, 255: -0.75} {
		if want[e] != v {
			t.Fatalf("hand value %d: formula %g, hand %g", e, want[e], v)
		}
	}
	checkDecoded(t, Q2_K, block, want)
}

func TestKnownQ3_K(t *testing.T) {
	// Stored scales 24+j (value j-8): low nibbles 8..15 then 0..7, top
	// bits 01 for j < 8 and 10 after, so scale bytes k = (8+k) | k<<4 and
	// 0xa5 four times. hmask[l] = 7l, qs[i] = 5i+1, d = 0.25.
	var block []byte
	for l := range 32 {
		block = append(block, byte(7*l))
	}
	for i := range 64 {
		block = append(block, byte(5*i+1))
	}
	for k := range 8 {
		block = append(block, byte(8+k)|byte(k)<<4)
	}
	block = append(block, 0xa5, 0xa5, 0xa5, 0xa5)
	block = append(block, le16(0x3400)...) // d = 0.25
	want := make([]float32, 256)
	for e := range want {
		h, k, l := e/128, e%128/32, e%32
		low := int(byte(5*(32*h+l)+1) >> (2 * k) & 3)
		high := int(byte(7*l) >> (e / 32) & 1)
		want[e] = 0.25 * float32(e/16-8) * float32(low+4*high-4)
	}
	// e=0: low = 1, hmask[0]=0 -> q=-3, scale -8 -> 6. e=130: h=1, l=2,
	// qs[34]=171=0b10101011 -> low 3; hmask[2]=14 bit 4 = 0 -> q=-1;
	// scale 0 -> 0. e=255: qs[63]=60=0b00111100 >>6 = 0; hmask[31]=217
	// bit 7 = 1 -> q=0 -> 0. e=65: h=0, k=2, l=1: qs[1]=6 >>4 = 0;
	// hmask[1]=7 bit 2 = 1 -> q=0. e=97: k=3, l=1: 6>>6 = 0, bit 3 of 7 =
	// 0 -> q=-4, scale 6-8=-2 -> 2.
	for e, v := range map[int]float32{0: 6, 130: 0, 255: 0, 65: 0, 97: 2} {
		if want[e] != v {
			t.Fatalf("hand value %d: formula %g, hand %g", e, want[e], v)
		}
	}
	checkDecoded(t, Q3_K, block, want)
}

func TestKnownIQ4_XS(t *testing.T) {
	// d = 0.5; stored scales 28+j (value j-4): scales_l = 0xdc, 0xfe,
	// 0x10, 0x32, scales_h = 01 four times then 10 four times = 0xaa55;
	// qs[16j+l] = l | (15-l)<<4, so element 32j+l is level l and element
	// 32j+16+l level 15-l.
	block := append(le16(0x3800), le16(0xaa55)...)
	block = append(block, 0xdc, 0xfe, 0x10, 0x32)
	for range 8 {
		for l := range 16 {
			block = append(block, byte(l)|byte(15-l)<<4)
		}
	}
	levels := []float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	want := make([]float32, 256)
	for e := range want {
		j, l := e/32, e%32
		lv := levels[l%16]
		if l >= 16 {
			lv = levels[15-l%16]
		}
		want[e] = 0.5 * float32(j-4) * lv
	}
	for e, v := range map[int]float32{0: 254, 16: -226, 31: 254, 128: 0, 255: 0.5 * 3 * -127, 240: 0.5 * 3 * 113} {
		if want[e] != v {
			t.Fatalf("hand value %d: formula %g, hand %g", e, want[e], v)
		}
	}
	checkDecoded(t, IQ4_XS, block, want)
}

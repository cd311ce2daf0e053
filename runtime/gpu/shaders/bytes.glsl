// Byte access to the weights w[] (declared by the includer as words, so
// that no 8- or 16-bit storage feature is needed).

// ubyte is the byte at byte offset i, sbyte the same byte signed.
uint ubyte(uint i) {
	return bitfieldExtract(w[i >> 2], int((i & 3u) * 8u), 8);
}

int sbyte(uint i) {
	return bitfieldExtract(int(w[i >> 2]), int((i & 3u) * 8u), 8);
}

// half16 is the f16 at byte offset i (even), as a float.
float half16(uint i) {
	return unpackHalf2x16((w[i >> 2] >> ((i & 2u) * 8u)) & 0xffffu).x;
}

// xbyte is activation quant i of the int8 quants packed in words xq[].
int xbyte(uint i) {
	return bitfieldExtract(int(xq[i >> 2]), int((i & 3u) * 8u), 8);
}

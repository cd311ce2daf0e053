// Included by matmul_q4_k.comp and, in the experts' form, matmul_q4_k_id.comp.
// out[v][r] = W[r] . x[v] for Q4_K weights (super-blocks of 256, 144
// bytes: f16 d and dmin, 12 bytes of 6-bit scales and mins for 8
// sub-blocks of 32, then 128 bytes of 4-bit quants: sub-blocks 2j and
// 2j+1 in the low and high nibbles of bytes 32j..32j+31; value
// d*scale*q - dmin*min) and activations in Q8_K blocks of 256 (int8
// quants, a float scale, and int16 sums of every 16 quants), as the CPU's
// MatMulAct makes them (tensor.QuantizeQ8K). As on the CPU, a super-block
// gives two exact integers, the scaled quant dot and the mins times the
// quant sums, and the row sums each in float before taking one from the
// other.
#include "common.glsl"
#define IDS_BINDING 5
#include "shape.glsl"

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Quants { uint xq[]; };
layout(std430, binding = 2) readonly buffer Scales { float xd[]; };
layout(std430, binding = 3) readonly buffer Sums { int bsums[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };

#include "bytes.glsl"

// bsum is 16-quant sum i of the int16 sums packed in words.
int bsum(uint i) {
	return bitfieldExtract(bsums[i >> 1], int((i & 1u) * 16u), 16);
}

void main() {
	uint r = rowIndex(), v = p.v0 + gl_WorkGroupID.z, wr = weightRow(r, v), xv = inputVector(v);
	if (r >= p.rows || skipVector(v)) {
		return;
	}
	uint nb = p.cols / 256u;
	float s = 0.0, sm = 0.0;
	for (uint b = gl_LocalInvocationID.x; b < nb; b += 64u) {
		uint base = (wr * nb + b) * 144u, xb = (xv * nb + b) * 256u;
		int isum = 0, msum = 0;
		for (uint j = 0u; j < 8u; j++) {
			// The 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
			int sc, m;
			if (j < 4u) {
				sc = int(ubyte(base + 4u + j) & 63u);
				m = int(ubyte(base + 8u + j) & 63u);
			} else {
				sc = int((ubyte(base + 8u + j) & 15u) | ((ubyte(base + j) >> 6) << 4));
				m = int((ubyte(base + 8u + j) >> 4) | ((ubyte(base + 4u + j) >> 6) << 4));
			}
			int dot = 0;
			for (uint k = 0u; k < 32u; k++) {
				uint q = (ubyte(base + 16u + 32u * (j / 2u) + k) >> (4u * (j & 1u))) & 15u;
				dot += int(q) * xbyte(xb + 32u * j + k);
			}
			isum += sc * dot;
			msum += m * (bsum((xv * nb + b) * 16u + 2u * j) + bsum((xv * nb + b) * 16u + 2u * j + 1u));
		}
		float dx = xd[xv * nb + b];
		s = fma(float(isum), dx * half16(base), s);
		sm = fma(float(msum), dx * half16(base + 2u), sm);
	}
	s = groupSum(s);
	sm = groupSum(sm);
	if (gl_LocalInvocationID.x == 0u) {
		y[v * p.rows + r] = s - sm;
	}
}

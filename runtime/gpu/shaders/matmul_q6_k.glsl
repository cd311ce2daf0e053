// Included by matmul_q6_k.comp and, in the experts' form, matmul_q6_k_id.comp.
// out[v][r] = W[r] . x[v] for Q6_K weights (super-blocks of 256, 210
// bytes: 128 bytes of low 4 bits, 64 of high 2 bits, 16 int8 scales of
// 16 quants each, f16 d; value d*scale*(q - 32)) and activations in Q8_K
// blocks of 256 (tensor.QuantizeQ8K). As on the CPU, a super-block's dot
// is one exact integer, scaled by d times the activations' scale.
#include "common.glsl"
#define IDS_BINDING 5
#include "shape.glsl"

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Quants { uint xq[]; };
layout(std430, binding = 2) readonly buffer Scales { float xd[]; };
// Binding 3 holds the activations' 16-sums, as for Q4_K: Q6_K needs none.
layout(std430, binding = 4) writeonly buffer Out { float y[]; };

#include "bytes.glsl"

void main() {
	uint r = rowIndex(), v = p.v0 + gl_WorkGroupID.z, wr = weightRow(r, v), xv = inputVector(v);
	if (r >= p.rows || skipVector(v)) {
		return;
	}
	uint nb = p.cols / 256u;
	float s = 0.0;
	for (uint b = gl_LocalInvocationID.x; b < nb; b += 64u) {
		uint base = (wr * nb + b) * 210u, xb = (xv * nb + b) * 256u;
		int isum = 0;
		for (uint g = 0u; g < 16u; g++) {
			int dot = 0;
			for (uint e = 16u * g; e < 16u * g + 16u; e++) {
				// Element e: half h, quarter k of it, position l in the quarter.
				uint h = e / 128u, k = (e % 128u) / 32u, l = e % 32u;
				uint lo = (ubyte(base + 64u * h + 32u * (k & 1u) + l) >> (4u * (k >> 1))) & 15u;
				uint hi = (ubyte(base + 128u + 32u * h + l) >> (2u * k)) & 3u;
				dot += (int(lo | (hi << 4)) - 32) * xbyte(xb + e);
			}
			isum += sbyte(base + 192u + g) * dot;
		}
		s = fma(float(isum), xd[xv * nb + b] * half16(base + 208u), s);
	}
	s = groupSum(s);
	if (gl_LocalInvocationID.x == 0u) {
		y[v * p.rows + r] = s;
	}
}

// Included by matmul_q8_0.comp and, in the experts' form, matmul_q8_0_id.comp.
// out[v][r] = W[r] . x[v] for Q8_0 weights (blocks of 32: an f16 scale and
// 32 int8 quants, 34 bytes) and activations quantized into blocks of 32
// (int8 quants and a float scale a block, as the CPU's MatMulAct makes
// them: tensor.QuantizeQ32). Each block's dot is an exact integer sum;
// the blocks' scaled sums are added in float.
#include "common.glsl"
#define IDS_BINDING 4
#include "shape.glsl"

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Quants { uint xq[]; };
layout(std430, binding = 2) readonly buffer Scales { float xd[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

#include "bytes.glsl"

void main() {
	uint r = rowIndex(), v = p.v0 + gl_WorkGroupID.z, wr = weightRow(r, v), xv = inputVector(v);
	if (r >= p.rows || skipVector(v)) {
		return;
	}
	uint nb = p.cols / 32u;
	float s = 0.0;
	for (uint b = gl_LocalInvocationID.x; b < nb; b += 64u) {
		uint base = (wr * nb + b) * 34u, xb = (xv * nb + b) * 32u;
		int isum = 0;
		for (uint k = 0u; k < 32u; k++) {
			isum += sbyte(base + 2u + k) * xbyte(xb + k);
		}
		s = fma(float(isum), half16(base) * xd[xv * nb + b], s);
	}
	s = groupSum(s);
	if (gl_LocalInvocationID.x == 0u) {
		y[v * p.rows + r] = s;
	}
}

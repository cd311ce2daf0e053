// Included by matmul_q4_0.comp and, in the experts' form, matmul_q4_0_id.comp.
// out[v][r] = W[r] . x[v] for Q4_0 weights (blocks of 32: an f16 scale and
// 16 bytes of 4-bit quants, element k in the low nibble of byte k and
// element k+16 in the high one, value (q - 8) * scale; 18 bytes) and
// activations quantized into blocks of 32 as for Q8_0.
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
		uint base = (wr * nb + b) * 18u, xb = (xv * nb + b) * 32u;
		int isum = 0;
		for (uint k = 0u; k < 16u; k++) {
			uint q = ubyte(base + 2u + k);
			isum += (int(q & 15u) - 8) * xbyte(xb + k) + (int(q >> 4) - 8) * xbyte(xb + 16u + k);
		}
		s = fma(float(isum), half16(base) * xd[xv * nb + b], s);
	}
	s = groupSum(s);
	if (gl_LocalInvocationID.x == 0u) {
		y[v * p.rows + r] = s;
	}
}

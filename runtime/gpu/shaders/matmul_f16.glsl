// Included by matmul_f16.comp and, in the experts' form, matmul_f16_id.comp.
// out[v][r] = W[r] . x[v] for F16 weights (an even number of columns:
// two halves a word) and float vectors x.
#include "common.glsl"
#define IDS_BINDING 3
#include "shape.glsl"

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Vectors { float x[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

void main() {
	uint r = rowIndex(), v = p.v0 + gl_WorkGroupID.z, wr = weightRow(r, v), xv = inputVector(v);
	if (r >= p.rows || skipVector(v)) {
		return;
	}
	uint wrow = wr * p.cols / 2u, xrow = xv * p.cols;
	float s = 0.0;
	for (uint c = gl_LocalInvocationID.x; c < p.cols / 2u; c += 64u) {
		vec2 h = unpackHalf2x16(w[wrow + c]);
		s = fma(h.x, x[xrow + 2u * c], s);
		s = fma(h.y, x[xrow + 2u * c + 1u], s);
	}
	s = groupSum(s);
	if (gl_LocalInvocationID.x == 0u) {
		y[v * p.rows + r] = s;
	}
}

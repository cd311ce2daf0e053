// Included by matmul_f32.comp and, in the experts' form, matmul_f32_id.comp.
// out[v][r] = W[r] . x[v] for F32 weights W (rows x cols) and vectors x.
#include "common.glsl"
#define IDS_BINDING 3
#include "shape.glsl"

layout(std430, binding = 0) readonly buffer Weights { float w[]; };
layout(std430, binding = 1) readonly buffer Vectors { float x[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

void main() {
	uint r = rowIndex(), v = p.v0 + gl_WorkGroupID.z, wr = weightRow(r, v), xv = inputVector(v);
	if (r >= p.rows || skipVector(v)) {
		return; // the whole workgroup: r is the group's
	}
	uint wrow = wr * p.cols, xrow = xv * p.cols;
	float s = 0.0;
	for (uint c = gl_LocalInvocationID.x; c < p.cols; c += 64u) {
		s = fma(w[wrow + c], x[xrow + c], s);
	}
	s = groupSum(s);
	if (gl_LocalInvocationID.x == 0u) {
		y[v * p.rows + r] = s;
	}
}

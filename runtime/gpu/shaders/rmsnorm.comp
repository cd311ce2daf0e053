#version 450
#extension GL_GOOGLE_include_directive : require
// out[r] = x[r] * weight / sqrt(mean(x[r]^2) + eps), row r = workgroup
// (p.rows rows of p.cols, p.stride floats apart: the first p.cols of a
// wider row, as MLA's latent before its rope key), as tensor.RMSNorm
// (which sums the squares in float64: here float32 in a tree, so within
// float rounding).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

layout(push_constant) uniform Shape {
	uint rows;
	uint cols;
	float eps;
	uint stride;
} p;

void main() {
	uint r = rowIndex();
	if (r >= p.rows) {
		return;
	}
	uint base = r * p.stride;
	float s = 0.0;
	for (uint c = gl_LocalInvocationID.x; c < p.cols; c += 64u) {
		float v = x[base + c];
		s += v * v;
	}
	float scale = 1.0 / sqrt(groupSum(s) / float(p.cols) + p.eps);
	for (uint c = gl_LocalInvocationID.x; c < p.cols; c += 64u) {
		precise float v = x[base + c] * scale;
		y[base + c] = v * weight[c];
	}
}

#version 450
// out[v][r] = W[r] . x[v] for F32 weights W (rows x cols) and vectors x.
// One workgroup per (row, vector): 64 invocations stride the row, then a
// tree in shared memory. Rows beyond 65535 groups wrap into y.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { float w[]; };
layout(std430, binding = 1) readonly buffer Vectors { float x[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

layout(push_constant) uniform Shape {
	uint rows;
	uint cols;
} p;

shared float part[64];

void main() {
	uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint v = gl_WorkGroupID.z;
	if (r >= p.rows) {
		return; // the whole workgroup: r is the group's
	}
	uint t = gl_LocalInvocationID.x;
	uint wrow = r * p.cols, xrow = v * p.cols;
	float s = 0.0;
	for (uint c = t; c < p.cols; c += 64) {
		s = fma(w[wrow + c], x[xrow + c], s);
	}
	part[t] = s;
	barrier();
	for (uint k = 32; k > 0; k >>= 1) {
		if (t < k) {
			part[t] += part[t + k];
		}
		barrier();
	}
	if (t == 0) {
		y[v * p.rows + r] = part[0];
	}
}

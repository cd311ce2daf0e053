#version 450
// out[i] = SiLU(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i], as
// tensor.SwiGLU (whose exp is its own float32 polynomial: here the
// device's, so within float rounding). 64 invocations a workgroup; the
// elements past 65535 groups wrap into y.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

layout(push_constant) uniform Count {
	uint n;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	if (i >= p.n) {
		return;
	}
	float g = gate[i];
	y[i] = g / (1.0 + exp(-g)) * up[i];
}

#version 450
// out[t] += sum over token t's p.used experts, in the order the host
// listed them (ascending expert id, as the CPU adds them), of the
// expert's weight times its output row: slot[t * used + j] is the row of
// ys holding token t's j-th expert's output, weight[t * used + j] its
// router weight (0 for an expert this call does not run). One invocation
// per output value.
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Out { float y[]; };
layout(std430, binding = 1) readonly buffer Ys { float ys[]; };
layout(std430, binding = 2) readonly buffer Slots { uint slot[]; };
layout(std430, binding = 3) readonly buffer Weights { float weight[]; };

layout(push_constant) uniform Shape {
	uint n;
	uint used;
	uint width;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	if (i >= p.n * p.width) {
		return;
	}
	uint t = i / p.width, c = i % p.width;
	float s = y[i];
	for (uint j = 0u; j < p.used; j++) {
		s = fma(weight[t * p.used + j], ys[slot[t * p.used + j] * p.width + c], s);
	}
	y[i] = s;
}

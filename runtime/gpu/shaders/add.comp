#version 450
// y[i] += x[i % p.period] for i < p.n: a residual (period n) or a bias
// added to every row (period: the row's length), as tensor.Add.
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };

layout(push_constant) uniform Count {
	uint n;
	uint period;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	if (i >= p.n) {
		return;
	}
	y[i] += x[i % p.period];
}

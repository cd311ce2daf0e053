#version 450
// y[s] = x[rows[s]] for the p.n rows s of p.width floats: a mixture-of-
// experts layer's tokens gathered into their experts' groups (a token
// once for each expert it is routed to).
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Rows { uint rows[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Shape {
	uint n;
	uint width;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	if (i >= p.n * p.width) {
		return;
	}
	uint s = i / p.width, c = i % p.width;
	y[i] = x[rows[s] * p.width + c];
}

#version 450
// dst[d0 + a*da + b*db + c] = src[s0 + a*sa + b*sb + c] for a < p.outer,
// b < p.inner, c < p.width: runs of words moved between layouts, such as
// latent attention's per-head parts of each row gathered head by head
// (so that one head's rows are one matrix product's vectors) and back,
// or a discrete GPU's copies into and out of its own memory (words: the
// bits as they are, f16 pairs too).
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uint dst[]; };

layout(push_constant) uniform Shape {
	uint outer;
	uint inner;
	uint width;
	uint s0;
	uint sa;
	uint sb;
	uint d0;
	uint da;
	uint db;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	if (i >= p.outer * p.inner * p.width) {
		return;
	}
	uint c = i % p.width, b = (i / p.width) % p.inner, a = i / (p.width * p.inner);
	dst[p.d0 + a * p.da + b * p.db + c] = src[p.s0 + a * p.sa + b * p.sb + c];
}

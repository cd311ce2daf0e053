#version 450
// Appends p.n rows of keys or values to a sequence's KV cache, in the
// layout of strata's model.Cache: [head][position][width], f16 (p.f16 = 1,
// rounded to nearest even as tensor.EncodeF16) or f32. Row j is
// src[(p.row0 + j) * p.heads * p.width ...], stored at position p.pos0 + j
// of a cache of p.capacity positions. One invocation per pair of values.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) buffer Cache { uint cache[]; };

layout(push_constant) uniform Shape {
	uint row0;
	uint n;
	uint pos0;
	uint heads;
	uint width;
	uint capacity;
	uint f16;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	uint pairs = p.width / 2u;
	if (i >= p.n * p.heads * pairs) {
		return;
	}
	uint pair = i % pairs, h = (i / pairs) % p.heads, j = i / (pairs * p.heads);
	uint s = (p.row0 + j) * p.heads * p.width + h * p.width + 2u * pair;
	uint e = (h * p.capacity + p.pos0 + j) * p.width + 2u * pair; // element index in the cache
	if (p.f16 != 0u) {
		cache[e / 2u] = packHalf2x16(vec2(src[s], src[s + 1u]));
	} else {
		cache[e] = floatBitsToUint(src[s]);
		cache[e + 1u] = floatBitsToUint(src[s + 1u]);
	}
}

#version 450
// Activations into blocks of 32 int8 quants and a float scale, as
// tensor.QuantizeQ32 (the input form of the Q8_0 and Q4_0 kernels): the
// scale is max|x| / 127 rounded to f16, each quant x * 127/max|x| rounded
// to even. One invocation per block of p.blocks.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Quants { uint q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };

layout(push_constant) uniform Count {
	uint blocks;
} p;

void main() {
	uint b = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	if (b >= p.blocks) {
		return;
	}
	float amax = 0.0;
	for (uint k = 0u; k < 32u; k++) {
		amax = max(amax, abs(x[32u * b + k]));
	}
	d[b] = unpackHalf2x16(packHalf2x16(vec2(amax / 127.0, 0.0))).x;
	float id = amax != 0.0 ? 127.0 / amax : 0.0;
	for (uint w = 0u; w < 8u; w++) {
		uint word = 0u;
		for (uint k = 0u; k < 4u; k++) {
			precise float v = x[32u * b + 4u * w + k] * id;
			word |= (uint(int(roundEven(v))) & 0xffu) << (8u * k);
		}
		q[8u * b + w] = word;
	}
}

#version 450
// Activations into Q8_K blocks of 256, as tensor.QuantizeQ8K (the input
// form of the K-quant kernels): the scale from the value of largest
// magnitude m (the first such), quants min(127, round-to-even(-127/m * x)),
// and the sums of every 16 quants (int16, two a word). One invocation per
// block of p.blocks.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Quants { uint q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };
layout(std430, binding = 3) writeonly buffer Sums { uint sums[]; };

layout(push_constant) uniform Count {
	uint blocks;
} p;

void main() {
	uint b = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	if (b >= p.blocks) {
		return;
	}
	uint base = 256u * b;
	float amax = 0.0, m = 0.0;
	for (uint k = 0u; k < 256u; k++) {
		float v = x[base + k];
		if (abs(v) > amax) {
			amax = abs(v);
			m = v;
		}
	}
	if (amax == 0.0) {
		d[b] = 0.0;
		for (uint w = 0u; w < 64u; w++) {
			q[64u * b + w] = 0u;
		}
		for (uint w = 0u; w < 8u; w++) {
			sums[8u * b + w] = 0u;
		}
		return;
	}
	float iscale = -127.0 / m;
	d[b] = 1.0 / iscale;
	int sum = 0;
	uint packed = 0u;
	for (uint w = 0u; w < 64u; w++) {
		uint word = 0u;
		for (uint k = 0u; k < 4u; k++) {
			precise float v = iscale * x[base + 4u * w + k];
			int qv = min(127, int(roundEven(v)));
			word |= (uint(qv) & 0xffu) << (8u * k);
			sum += qv;
		}
		q[64u * b + w] = word;
		if ((w & 3u) == 3u) { // 16 quants summed
			packed |= (uint(sum) & 0xffffu) << (16u * ((w >> 2) & 1u));
			sum = 0;
			if ((w & 7u) == 7u) {
				sums[8u * b + (w >> 3)] = packed;
				packed = 0u;
			}
		}
	}
}

#version 450
// out[v][r] = W[r] . x[v] for Q8_0 weights (blocks of 32: an f16 scale and
// 32 int8 quants, 34 bytes) and activations quantized into blocks of 32
// (int8 quants and a float scale a block, as the CPU's MatMulAct makes
// them: tensor.QuantizeQ32). Each block's dot is an exact integer sum;
// the blocks' scaled sums are added in float. The weights are read as
// words and unpacked here, so no 8- or 16-bit storage feature is needed.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Quants { uint xq[]; };
layout(std430, binding = 2) readonly buffer Scales { float xd[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

layout(push_constant) uniform Shape {
	uint rows;
	uint cols;
} p;

shared float part[64];

// wbyte is the signed byte at byte offset i of the weights.
int wbyte(uint i) {
	return bitfieldExtract(int(w[i >> 2]), int((i & 3u) * 8u), 8);
}

void main() {
	uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint v = gl_WorkGroupID.z;
	if (r >= p.rows) {
		return;
	}
	uint t = gl_LocalInvocationID.x;
	uint nb = p.cols / 32u;
	uint wrow = r * nb * 34u;
	float s = 0.0;
	for (uint b = t; b < nb; b += 64) {
		uint base = wrow + b * 34u; // even: the scale is one aligned half-word
		float dw = unpackHalf2x16((w[base >> 2] >> ((base & 2u) * 8u)) & 0xffffu).x;
		uint xw = (v * p.cols + b * 32u) >> 2; // 8 words of quants
		int isum = 0;
		for (uint j = 0u; j < 8u; j++) {
			int xs = int(xq[xw + j]);
			for (uint k = 0u; k < 4u; k++) {
				isum += wbyte(base + 2u + 4u * j + k) * bitfieldExtract(xs, int(8u * k), 8);
			}
		}
		s = fma(float(isum), dw * xd[v * nb + b], s);
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

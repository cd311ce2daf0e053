#version 450
// Causal softmax attention of p.n query rows over a sequence's KV cache
// (model.Cache's layout: [head][position][width], f16 or f32), as the
// CPU's attendUnit: query head h reads KV head h / (heads / kvHeads); row
// j sees positions 0 .. p.pos0 + j. Keys and queries are p.width wide, a
// value is the first p.vwidth of its cache row: the same width for
// grouped-query attention (K and V separate caches), and for latent
// attention (MLA) the latent of the one cache both bindings name, the
// rope key after it scored but not summed. One workgroup per (head, row):
// the 64 invocations score 64 positions at a time, and each keeps a
// running softmax (max, sum) and the weighted sum of up to 8 of the
// value's elements (vwidth ≤ 512, width ≤ 1024), so the scores need no
// memory beyond a chunk. Another order of float operations than the
// CPU's: within rounding.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { uint kc[]; };
layout(std430, binding = 2) readonly buffer V { uint vc[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

layout(push_constant) uniform Shape {
	uint row0;     // the first row's index in q and y
	uint n;
	uint pos0;     // the first row's position
	uint heads;
	uint kvHeads;
	uint width;    // of a query head and a cache row
	uint vwidth;   // of a value, and of an output head
	uint capacity;
	uint qstride;  // floats per row of q (heads * width)
	uint ystride;  // floats per row of y (heads * vwidth)
	uint f16;
	float scale;
} p;

shared float qs[1024];
shared float score[64];

float kval(uint e) {
	if (p.f16 != 0u) {
		return unpackHalf2x16(kc[e >> 1] >> ((e & 1u) * 16u)).x;
	}
	return uintBitsToFloat(kc[e]);
}

float vval(uint e) {
	if (p.f16 != 0u) {
		return unpackHalf2x16(vc[e >> 1] >> ((e & 1u) * 16u)).x;
	}
	return uintBitsToFloat(vc[e]);
}

void main() {
	uint h = gl_WorkGroupID.x, j = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
	uint g = h / (p.heads / p.kvHeads);
	uint qBase = (p.row0 + j) * p.qstride + h * p.width;
	for (uint c = t; c < p.width; c += 64u) {
		qs[c] = q[qBase + c];
	}
	barrier();
	uint end = p.pos0 + j + 1u; // positions seen
	uint head = g * p.capacity * p.width;
	float m = -1e30, l = 0.0;
	float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
	for (uint p0 = 0u; p0 < end; p0 += 64u) {
		uint pos = p0 + t;
		float s = -1e30;
		if (pos < end) {
			float dot = 0.0;
			uint k = head + pos * p.width;
			for (uint c = 0u; c < p.width; c++) {
				dot = fma(qs[c], kval(k + c), dot);
			}
			s = dot * p.scale;
		}
		score[t] = s;
		barrier();
		uint count = min(64u, end - p0);
		float cm = m;
		for (uint i = 0u; i < count; i++) {
			cm = max(cm, score[i]);
		}
		float corr = exp(m - cm);
		l *= corr;
		for (uint d = 0u; d < 8u; d++) {
			acc[d] *= corr;
		}
		for (uint i = 0u; i < count; i++) {
			float e = exp(score[i] - cm);
			l += e;
			uint v = head + (p0 + i) * p.width;
			for (uint d = 0u; d < 8u; d++) {
				uint c = t + 64u * d;
				if (c < p.vwidth) {
					acc[d] = fma(e, vval(v + c), acc[d]);
				}
			}
		}
		m = cm;
		barrier(); // all have read score before the next chunk writes it
	}
	uint yBase = (p.row0 + j) * p.ystride + h * p.vwidth;
	for (uint d = 0u; d < 8u; d++) {
		uint c = t + 64u * d;
		if (c < p.vwidth) {
			y[yBase + c] = acc[d] / l;
		}
	}
}

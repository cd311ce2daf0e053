#version 450
// Rotary position embedding in place, as tensor.RoPEFactors: x holds
// p.rows rows of p.heads heads of p.headDim; in each head the first
// p.ropeDim elements turn as ropeDim/2 pairs, (2i, 2i+1) or with p.neox
// (i, i + ropeDim/2), by the angle whose cosine and sine the host wrote
// for the row's position (tensor.RoPETable: float64 angles, rounded). One
// invocation per (row, head, pair); precise keeps the products unfused,
// as the CPU computes them.
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Table { float cs[]; }; // [rows][pairs][cos, sin]

layout(push_constant) uniform Shape {
	uint rows;
	uint heads;
	uint headDim;
	uint ropeDim;
	uint neox;
	uint offset;
} p;

void main() {
	uint half_ = p.ropeDim / 2u;
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
	if (i >= p.rows * p.heads * half_) {
		return;
	}
	uint pair = i % half_, head = (i / half_) % p.heads, row = i / (half_ * p.heads);
	uint ia = 2u * pair, ib = 2u * pair + 1u;
	if (p.neox != 0u) {
		ia = pair;
		ib = pair + half_;
	}
	uint base = (row * p.heads + head) * p.headDim + p.offset;
	float c = cs[2u * (row * half_ + pair)], s = cs[2u * (row * half_ + pair) + 1u];
	float a = x[base + ia], b = x[base + ib];
	precise float ac = a * c, bs = b * s, as_ = a * s, bc = b * c;
	precise float na = ac - bs, nb = as_ + bc;
	x[base + ia] = na;
	x[base + ib] = nb;
}

// The push constants of the matrix kernels (included): W is rows x cols;
// the vectors are v0, v0+1, ... of the input and output buffers (one a
// workgroup's z), so that one buffer holds the vectors of several
// products (a mixture-of-experts layer's experts, each over its tokens).
//
// The experts' form (EXPERT_IDS, matmul_*_id): W holds every expert's
// rows (a 3-D tensor, ffn_*_exps), p.rows of them an expert's; output
// vector v is expert ids[v]'s rows times input vector v / p.per (p.per =
// experts per token where a token's input goes to each of its experts;
// 1 where the inputs are already one per (token, expert) pair). W may
// hold experts [p.lo, p.hi) only (a 3-D tensor over the device's binding
// range is held in parts): a vector of another expert is skipped, its
// output left to the dispatch of the part that holds it. The includer
// defines IDS_BINDING, the binding after its output.
#ifdef EXPERT_IDS
layout(push_constant) uniform Shape {
	uint rows;
	uint cols;
	uint v0;
	uint per;
	uint lo;
	uint hi;
} p;

layout(std430, binding = IDS_BINDING) readonly buffer Ids { uint ids[]; };

bool skipVector(uint v) {
	return ids[v] < p.lo || ids[v] >= p.hi;
}

uint weightRow(uint r, uint v) {
	return (ids[v] - p.lo) * p.rows + r;
}

uint inputVector(uint v) {
	return v / p.per;
}
#else
layout(push_constant) uniform Shape {
	uint rows;
	uint cols;
	uint v0;
} p;

bool skipVector(uint v) {
	return false;
}

uint weightRow(uint r, uint v) {
	return r;
}

uint inputVector(uint v) {
	return v;
}
#endif

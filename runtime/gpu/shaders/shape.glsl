// The push constants of the matrix kernels (included): W is rows x cols;
// the vectors are v0, v0+1, ... of the input and output buffers (one a
// workgroup's z), so that one buffer holds the vectors of several
// products (a mixture-of-experts layer's experts, each over its tokens).
layout(push_constant) uniform Shape {
	uint rows;
	uint cols;
	uint v0;
} p;

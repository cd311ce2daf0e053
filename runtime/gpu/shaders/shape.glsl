// The push constants of the matrix kernels (included): W is rows x cols.
layout(push_constant) uniform Shape {
	uint rows;
	uint cols;
} p;

// Shared by the row kernels (included): each workgroup computes one row
// (of a matrix product: row rowIndex() of W times vector gl_WorkGroupID.z),
// its 64 invocations striding the row; groupSum adds their parts.
layout(local_size_x = 64) in;

shared float part[64];

// rowIndex is this workgroup's row: rows beyond 65535 groups wrap into y.
uint rowIndex() {
	return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}

// groupSum is the sum of s over the workgroup (a tree in shared memory),
// returned to every invocation.
float groupSum(float s) {
	uint t = gl_LocalInvocationID.x;
	part[t] = s;
	barrier();
	for (uint k = 32u; k > 0u; k >>= 1) {
		if (t < k) {
			part[t] += part[t + k];
		}
		barrier();
	}
	float total = part[0];
	barrier();
	return total;
}

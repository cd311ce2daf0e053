#version 450
// A mixture-of-experts layer's routing on the device, one invocation a
// token, as the CPU's State.route: the router's scores turned into
// probabilities (softmax, or a sigmoid each), the selection scores (the
// probabilities plus the bias exp_probs_b, which steers the choice only),
// the worst expert groups dropped (DeepSeek-V3: a group scores its two
// best), the p.used best experts picked (a tie to the lower id), their
// weights normalized to sum 1 and scaled where the model says so. The
// token's experts are written in ascending id (ids[t * used + j], with
// their weights), the order the CPU adds their outputs in.
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Probs { float probs[]; };       // [n × experts] the router's scores, then probabilities
layout(std430, binding = 1) buffer Sel { float sel[]; };           // [n × experts] scratch: the selection scores
layout(std430, binding = 2) readonly buffer Bias { float bias[]; }; // [experts], read where p.biased
layout(std430, binding = 3) writeonly buffer Ids { uint ids[]; };
layout(std430, binding = 4) writeonly buffer Weights { float weights[]; };

layout(push_constant) uniform Shape {
	uint n;
	uint experts;
	uint used;
	uint sigmoid;
	uint biased;
	uint groups;
	uint groupsUsed;
	uint norm;
	float scale;
} p;

// The most experts a token uses and groups a layer has (the host checks).
const uint maxUsed = 32u;
const uint maxGroups = 64u;

void main() {
	uint t = gl_GlobalInvocationID.x;
	if (t >= p.n) {
		return;
	}
	uint base = t * p.experts;
	float negInf = uintBitsToFloat(0xff800000u), posInf = uintBitsToFloat(0x7f800000u);
	if (p.sigmoid != 0u) {
		for (uint e = 0u; e < p.experts; e++) {
			probs[base + e] = 1.0 / (1.0 + exp(-probs[base + e]));
		}
	} else {
		float mx = probs[base];
		for (uint e = 1u; e < p.experts; e++) {
			mx = max(mx, probs[base + e]);
		}
		float sum = 0.0;
		for (uint e = 0u; e < p.experts; e++) {
			float x = exp(probs[base + e] - mx);
			probs[base + e] = x;
			sum += x;
		}
		float inv = 1.0 / sum;
		for (uint e = 0u; e < p.experts; e++) {
			probs[base + e] *= inv;
		}
	}
	for (uint e = 0u; e < p.experts; e++) {
		sel[base + e] = p.biased != 0u ? probs[base + e] + bias[e] : probs[base + e];
	}
	if (p.groups > 1u) {
		// Keep the groupsUsed groups whose two best scores sum highest.
		uint per = p.experts / p.groups;
		float score[maxGroups];
		for (uint k = 0u; k < p.groups; k++) {
			float a = negInf, b = negInf;
			for (uint e = k * per; e < (k + 1u) * per; e++) {
				float v = sel[base + e];
				if (v > a) {
					b = a;
					a = v;
				} else if (v > b) {
					b = v;
				}
			}
			score[k] = a + b;
		}
		for (uint k = 0u; k < p.groups - p.groupsUsed; k++) {
			uint worst = 0u;
			for (uint j = 1u; j < p.groups; j++) {
				if (score[j] < score[worst]) {
					worst = j;
				}
			}
			score[worst] = posInf;
			for (uint e = worst * per; e < (worst + 1u) * per; e++) {
				sel[base + e] = negInf;
			}
		}
	}
	uint pick[maxUsed];
	float weight[maxUsed];
	float sum = 0.0;
	for (uint j = 0u; j < p.used; j++) {
		uint best = 0u;
		for (uint e = 0u; e < p.experts; e++) {
			if (sel[base + e] > sel[base + best]) {
				best = e;
			}
		}
		pick[j] = best;
		weight[j] = probs[base + best];
		sum += weight[j];
		sel[base + best] = negInf;
	}
	if (p.norm != 0u) {
		sum = max(sum, 6.103515625e-5); // llama.cpp's clamp: the smallest normal f16
		for (uint j = 0u; j < p.used; j++) {
			weight[j] /= sum;
		}
	}
	if (p.scale != 0.0 && p.scale != 1.0) {
		for (uint j = 0u; j < p.used; j++) {
			weight[j] *= p.scale;
		}
	}
	// Ascending expert id (insertion sort; the picks are distinct).
	for (uint j = 1u; j < p.used; j++) {
		uint e = pick[j];
		float w = weight[j];
		uint i = j;
		for (; i > 0u && pick[i - 1u] > e; i--) {
			pick[i] = pick[i - 1u];
			weight[i] = weight[i - 1u];
		}
		pick[i] = e;
		weight[i] = w;
	}
	for (uint j = 0u; j < p.used; j++) {
		ids[t * p.used + j] = pick[j];
		weights[t * p.used + j] = weight[j];
	}
}

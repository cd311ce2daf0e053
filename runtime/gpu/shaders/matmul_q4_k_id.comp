#version 450
#extension GL_GOOGLE_include_directive : require
#define EXPERT_IDS
#include "matmul_q4_k.glsl"

#version 450
#extension GL_GOOGLE_include_directive : require
#include "matmul_q6_k.glsl"

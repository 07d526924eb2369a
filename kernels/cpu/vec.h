// Small float loops written so that GCC vectorises them at the baseline ISA: reductions
// keep eight independent partial sums (a fixed, order-stable summation), the rest are plain
// element loops. The summation order depends only on n, so a row gives the same result
// whichever batch it is computed in.
//
// DS_CPU_CLONES marks a hot loop function to be compiled twice, for the baseline and for AVX2,
// with the choice made once at load time (GCC/Clang target_clones). AVX2 without FMA: the
// source fixes every operation's order and rounding, so both clones give identical bits.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(DELTASERVE_NO_CLONES)
#define DS_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DS_CPU_CLONES
#endif

namespace ds::kernels::cpu {

inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  const int64_t rest = n - i;  // < 8
  for (int l = 0; l < 8 && l < rest; ++l) acc[l] += a[i + l] * b[i + l];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

inline float sum_squares(const float* a, int64_t n) { return dot(a, a, n); }

// y += a * x
inline void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

inline void scale(float a, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

// torch's sigmoid and silu in f32: 1 / (1 + e^-x) and x / (1 + e^-x).
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace ds::kernels::cpu

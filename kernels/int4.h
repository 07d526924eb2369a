// The values of an int4 weight in its host form (kernels/tensor.h, Int4Groups), for host code:
// the CPU backend's upload, the model loader's dequantisation, tests.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace ds {

// Rows [n0, n1) of w [N, K] (DType::int4, host codes and groups) as f32 values in input column
// order into out [N, K] (row n at out + n * K): scale * (code - zero), exact in f32 for f16
// scales.
inline void dequantize_int4_rows(const kernels::HostTensor& w, int64_t n0, int64_t n1, float* out) {
  const int64_t K = w.shape[1], G = w.int4.group_size, groups = K / G;
  const auto* codes = static_cast<const uint8_t*>(w.data);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = n * groups + k / G;
      const int code = (codes[(n * K + k) / 2] >> (4 * (k & 1))) & 15;
      const int64_t col = w.int4.perm ? w.int4.perm[k] : k;
      out[n * K + col] = w.int4.scales[g] * static_cast<float>(code - w.int4.zeros[g]);
    }
}

}  // namespace ds

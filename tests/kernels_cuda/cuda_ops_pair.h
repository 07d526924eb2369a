// What the CUDA backend's op tests share (test_cuda_*_ops_gpu.cpp): a CPU and a CUDA backend
// side by side, relative errors, bf16 helpers, poisoned outputs and shuffled block tables.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/kernels_cpu/kernel_test_util.h"

namespace ds::test::cuda_ops {

using kernels::Backend;
using kernels::Shape;
using kernels::Tensor;

struct Pair {
  std::unique_ptr<Backend> cpu;
  std::unique_ptr<Backend> gpu;
  explicit Pair(bool f32_weights = false, DType kv = DType::bf16, bool fp8_block_gemm = true,
                int64_t fp8_skinny_rows = cuda::CudaBackendOptions{}.paths.fp8_skinny_rows,
                DType recurrent_state = DType::f32) {
    cpu = kernels::cpu::make_cpu_backend({.num_threads = 2, .recurrent_state_dtype = recurrent_state});
    cuda::CudaBackendOptions o;
    o.f32_weights = f32_weights;
    o.kv_dtype = kv;
    o.recurrent_state_dtype = recurrent_state;
    o.paths.fp8_block_gemm = fp8_block_gemm;
    o.paths.fp8_skinny_rows = fp8_skinny_rows;
    o.sync_each_op = true;
    gpu = cuda::make_cuda_backend(o);
  }
};

inline double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = static_cast<double>(a[i]) - b[i];
    d += e * e;
    r += static_cast<double>(b[i]) * b[i];
  }
  if (a.size() != b.size() || std::isnan(d)) return INFINITY;
  return std::sqrt(d / std::max(r, 1e-30));
}

// Rounds to the nearest bf16 (values both backends then store exactly).
inline std::vector<float> bf16_exact(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

inline std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  return h;
}

// A weight uploaded from bf16 checkpoint bytes.
inline Tensor weight(Backend& be, const Shape& s, const std::vector<uint16_t>& bits) {
  return be.upload(kernels::HostTensor{DType::bf16, s, bits.data()});
}

inline Tensor act(Backend& be, DType t, const Shape& s, const std::vector<float>& v) {
  Tensor x = be.alloc(t, s);
  be.copy_from_host(v, x);
  return x;
}

// A tensor of the given type filled with NaN-free garbage that no op produces by chance.
inline Tensor poisoned(Backend& be, DType t, const Shape& s) {
  return act(be, t, s, std::vector<float>(static_cast<size_t>(s.numel()), -12345.0f));
}

// Shuffled distinct block ids for sequences of the given lengths.
inline std::vector<SeqDesc> with_blocks(std::vector<SeqDesc> seqs, int32_t bs, int32_t num_blocks, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
  size_t next = 0;
  for (auto& s : seqs) {
    const int64_t need = (s.n_cached + s.n_tokens + bs - 1) / bs;
    for (int64_t b = 0; b < need; ++b) s.blocks.push_back(ids.at(next++));
  }
  return seqs;
}


}  // namespace ds::test::cuda_ops

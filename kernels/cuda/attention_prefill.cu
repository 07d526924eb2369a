// The non-GEMM kernels of paged prefill attention (cuda_attention.cpp runs the GEMMs): the
// gather of one sequence's paged K/V rows into contiguous buffers, and the causal softmax of
// a tile of scores into bf16 probabilities.
//
// Prefill attention for a chunk of T new tokens of a sequence with n_cached earlier tokens is
// S = Q Kᵀ over the L = n_cached + T positions, masked bottom-right (query t sees keys
// 0 .. n_cached + t), softmax in f32, then O = P V: two tensor-core GEMMs per KV head (the
// group's query heads batched) around these kernels. The K/V rows are read from the pool
// after kv_write has stored the chunk, so the chunk attends to itself through the same path.
#include <utility>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

// One thread per 16 bytes (8 bf16) of a token's [n_kv, d] row block.
__global__ void gather_kv_kernel(const uint16_t* k_pool, const uint16_t* v_pool, const int32_t* block_ids,
                                 int32_t block_size, int64_t len, int64_t row_vecs, uint16_t* k_out,
                                 uint16_t* v_out) {
  const int64_t n = len * row_vecs;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = i / row_vecs, e = i - p * row_vecs;
    const int64_t slot = static_cast<int64_t>(block_ids[p / block_size]) * block_size + p % block_size;
    reinterpret_cast<uint4*>(k_out)[i] = reinterpret_cast<const uint4*>(k_pool)[slot * row_vecs + e];
    reinterpret_cast<uint4*>(v_out)[i] = reinterpret_cast<const uint4*>(v_pool)[slot * row_vecs + e];
  }
}

// Any pool type: one thread per element, widened through the element codec and rounded to
// bf16. Row (slot, head) starts at (slot * n_kv + head) * row_bytes.
__global__ void gather_widen_kernel(const uint8_t* pool, DType type, int64_t row_bytes, const int32_t* block_ids,
                                    int32_t block_size, int64_t len, int64_t n_kv, int64_t d, uint16_t* out) {
  const int64_t n = len * n_kv * d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t e = i % d, ph = i / d, h = ph % n_kv, p = ph / n_kv;
    const int64_t slot = static_cast<int64_t>(block_ids[p / block_size]) * block_size + p % block_size;
    const uint8_t* row = pool + (slot * n_kv + h) * row_bytes;
    out[i] = detail::f32_to_bf16_bits(detail::load_element(type, row, static_cast<int>(e)));
  }
}

// One block per (query row, head): max, sum of exponentials, normalised write.
__global__ void causal_softmax_kernel(const float* scores, int64_t tq, int64_t lk, int64_t ld, int64_t first_pos,
                                      float scale, uint16_t* p) {
  __shared__ float red[32];
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const float* row = scores + (h * tq + t) * ld;
  uint16_t* out = p + (h * tq + t) * ld;
  const int64_t n = min(lk, first_pos + t + 1);  // keys this row may see
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, row[j] * scale);
  // block max through the sum helper's shared array
  {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    float v = lane < static_cast<int>(blockDim.x >> 5) ? red[lane] : -INFINITY;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    m = v;
    __syncthreads();
  }
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += expf(row[j] * scale - m);
  s = block_sum(s, red);
  const float inv = 1.0f / s;
  for (int64_t j = threadIdx.x; j < lk; j += blockDim.x)
    out[j] = j < n ? detail::f32_to_bf16_bits(expf(row[j] * scale - m) * inv) : uint16_t{0};
}

}  // namespace

void gather_kv(const void* k_pool, DType k_type, const void* v_pool, DType v_type, const int32_t* block_ids,
               int32_t block_size, int64_t len, int64_t n_kv, int64_t d, uint16_t* k_out, uint16_t* v_out, Stream stream) {
  if (len == 0) return;
  if (k_type != DType::bf16 || v_type != DType::bf16) {
    const int64_t n = len * n_kv * d, g = (n + 255) / 256;
    const unsigned grid = static_cast<unsigned>(g > 65536 ? 65536 : g);
    const std::pair<const void*, DType> pools[2] = {{k_pool, k_type}, {v_pool, v_type}};
    uint16_t* outs[2] = {k_out, v_out};
    for (int i = 0; i < 2; ++i) {
      gather_widen_kernel<<<grid, 256, 0, stream>>>(static_cast<const uint8_t*>(pools[i].first),
                                                              pools[i].second, ds::row_bytes(pools[i].second, d),
                                                              block_ids, block_size, len, n_kv, d, outs[i]);
      check_launch("paged_attention gather_kv (widening) kernel");
    }
    return;
  }
  if ((n_kv * d) % 8 != 0) throw std::invalid_argument("cuda backend: gather_kv: row not a multiple of 8 elements");
  const int64_t row_vecs = n_kv * d / 8, n = len * row_vecs;
  const int64_t g = (n + 255) / 256;
  gather_kv_kernel<<<static_cast<unsigned>(g > 65536 ? 65536 : g), 256, 0, stream>>>(
      static_cast<const uint16_t*>(k_pool), static_cast<const uint16_t*>(v_pool), block_ids, block_size, len, row_vecs,
      k_out, v_out);
  check_launch("paged_attention gather_kv kernel");
}

void causal_softmax(const float* scores, int64_t heads, int64_t tq, int64_t lk, int64_t ld, int64_t first_pos,
                    float scale, uint16_t* p, Stream stream) {
  if (heads * tq == 0) return;
  if (tq > 0x7fffffffLL || heads > 65535) throw std::invalid_argument("cuda backend: causal_softmax: tile too large");
  causal_softmax_kernel<<<dim3(static_cast<unsigned>(tq), static_cast<unsigned>(heads)), 256, 0, stream>>>(
      scores, tq, lk, ld, first_pos, scale, p);
  check_launch("paged_attention causal_softmax kernel");
}

}  // namespace ds::cuda::ops

// write_kv: stores new tokens' K and V rows into the pools, converting or quantising them.
// One thread per (token, KV head, 32-element block); quantisation uses the same device
// routines as kv_elements.cuh documents (bit-identical to kernels/common/quant.h). f32 rows
// into 16-bit pools (every prefill of a bf16 or f16 cache) take a kernel of 8 elements per
// thread with 16-byte accesses instead.
#include <string>

#include "kernels/cuda/kv_elements.cuh"
#include "kernels/cuda/paged_attention.h"
#include "kernels/common/gpu_runtime.h"

namespace ds::cuda {
namespace {

struct WriteArgs {
  uint8_t* k_pool;
  uint8_t* v_pool;
  const void* k_src;
  const void* v_src;
  const int64_t* slots;
  int32_t* guard;
  int64_t num_slots;  // num_blocks * block_size
  int32_t block_size;
  int32_t n_tokens, n_kv_heads, head_dim;
  DType src, k_type, v_type;
  bool bounds_check;
};

__device__ float load_src(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return detail::bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: return detail::f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
}

__device__ void store_block(DType t, const float* x, uint8_t* row, int b) {
  switch (t) {
    case DType::bf16:
      for (int j = 0; j < 32; ++j) reinterpret_cast<uint16_t*>(row)[32 * b + j] = detail::f32_to_bf16_bits(x[j]);
      break;
    case DType::f16:
      for (int j = 0; j < 32; ++j) reinterpret_cast<uint16_t*>(row)[32 * b + j] = detail::f32_to_f16_bits(x[j]);
      break;
    case DType::q8_0: detail::quantize_q8_0(x, row + 34 * b); break;
    case DType::q4_0: detail::quantize_q4_0(x, row + 18 * b); break;
    default: break;
  }
}

// False for a padding token (slot < 0) and for a slot past the pool, which is reported through
// the guard word when bounds_check is on.
__device__ bool slot_in_pool(const WriteArgs& a, int64_t slot) {
  if (slot < 0) return false;
  if (slot >= a.num_slots) {
    if (a.bounds_check && atomicCAS(&a.guard[0], 0, 1) == 0)
      a.guard[1] = static_cast<int32_t>(min(slot / a.block_size, static_cast<int64_t>(0x7fffffff)));
    return false;
  }
  return true;
}

__global__ void write_kv_kernel(const WriteArgs a) {
  DS_GPU_WAIT_PREVIOUS();  // k_new / v_new are the previous kernel's results when chained
  DS_GPU_ALLOW_NEXT();
  const int nb = a.head_dim / 32;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(a.n_tokens) * a.n_kv_heads * nb) return;
  const int b = static_cast<int>(idx % nb);
  const int h = static_cast<int>((idx / nb) % a.n_kv_heads);
  const int64_t t = idx / (static_cast<int64_t>(nb) * a.n_kv_heads);
  const int64_t slot = a.slots[t];
  if (!slot_in_pool(a, slot)) return;
  const int64_t row = slot * a.n_kv_heads + h;
  const int64_t src0 = (t * a.n_kv_heads + h) * a.head_dim + 32 * b;
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = load_src(a.src, a.k_src, src0 + j);
  store_block(a.k_type, x, a.k_pool + row * row_bytes(a.k_type, a.head_dim), b);
  for (int j = 0; j < 32; ++j) x[j] = load_src(a.src, a.v_src, src0 + j);
  store_block(a.v_type, x, a.v_pool + row * row_bytes(a.v_type, a.head_dim), b);
}

// 16-bit pools (bf16, f16) from f32 rows, the prefill case: one thread per 8 elements, two
// 16-byte loads and one 16-byte store per pool, so a warp reads and writes whole lines (the
// kernel above gives each thread a 128-byte span of its own, strided across the warp).
__device__ uint32_t pack16(DType t, float lo, float hi) {
  if (t == DType::bf16)
    return detail::f32_to_bf16_bits(lo) | (static_cast<uint32_t>(detail::f32_to_bf16_bits(hi)) << 16);
  return detail::f32_to_f16_bits(lo) | (static_cast<uint32_t>(detail::f32_to_f16_bits(hi)) << 16);
}

__device__ void store8(DType t, const float4* src, uint8_t* dst) {
  const float4 a = src[0], b = src[1];
  *reinterpret_cast<uint4*>(dst) = make_uint4(pack16(t, a.x, a.y), pack16(t, a.z, a.w), pack16(t, b.x, b.y), pack16(t, b.z, b.w));
}

__global__ void write_kv16_kernel(const WriteArgs a) {
  DS_GPU_WAIT_PREVIOUS();
  DS_GPU_ALLOW_NEXT();
  const int n8 = a.head_dim / 8;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(a.n_tokens) * a.n_kv_heads * n8) return;
  const int c = static_cast<int>(idx % n8);
  const int64_t th = idx / n8;  // token * n_kv_heads + head
  const int64_t t = th / a.n_kv_heads;
  const int64_t slot = a.slots[t];
  if (!slot_in_pool(a, slot)) return;
  const int64_t row = slot * a.n_kv_heads + (th - t * a.n_kv_heads);
  const int64_t src = th * a.head_dim + 8 * c;
  const int64_t dst = (row * a.head_dim + 8 * c) * 2;
  store8(a.k_type, reinterpret_cast<const float4*>(static_cast<const float*>(a.k_src) + src), a.k_pool + dst);
  store8(a.v_type, reinterpret_cast<const float4*>(static_cast<const float*>(a.v_src) + src), a.v_pool + dst);
}

bool is16(DType t) { return t == DType::bf16 || t == DType::f16; }

}  // namespace

void write_kv(const KvPoolView& pools, const KvWrite& w, bool bounds_check, int32_t* guard, void* stream) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("write_kv: " + m); };
  auto pool_ok = [](DType t) { return t == DType::bf16 || t == DType::f16 || t == DType::q8_0 || t == DType::q4_0; };
  if (!pool_ok(pools.k_type) || !pool_ok(pools.v_type)) bad("pools must be bf16, f16, q8_0 or q4_0");
  if (w.src_type != DType::f32 && w.src_type != DType::bf16 && w.src_type != DType::f16)
    bad("source rows must be f32, bf16 or f16");
  if (pools.head_dim <= 0 || pools.head_dim % 32 != 0) bad("head_dim must be a positive multiple of 32");
  if (pools.n_kv_heads <= 0 || pools.block_size <= 0 || pools.num_blocks < 0) bad("bad pool shape");
  if (w.n_tokens < 0) bad("negative n_tokens");
  if (w.n_tokens == 0) return;
  if (!w.k_new || !w.v_new || !w.slots || !pools.k || !pools.v) bad("null pointer");
  if (bounds_check && !guard) bad("bounds_check needs a guard word");
  WriteArgs a{};
  a.k_pool = static_cast<uint8_t*>(pools.k);
  a.v_pool = static_cast<uint8_t*>(pools.v);
  a.k_src = w.k_new;
  a.v_src = w.v_new;
  a.slots = w.slots;
  a.guard = guard;
  a.num_slots = pools.num_blocks * pools.block_size;
  a.block_size = pools.block_size;
  a.n_tokens = w.n_tokens;
  a.n_kv_heads = pools.n_kv_heads;
  a.head_dim = pools.head_dim;
  a.src = w.src_type;
  a.k_type = pools.k_type;
  a.v_type = pools.v_type;
  // Without the guard a bad slot is still skipped (never written), just not reported.
  a.bounds_check = bounds_check;
  const int threads = 128;
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (w.src_type == DType::f32 && is16(pools.k_type) && is16(pools.v_type) && al(w.k_new) && al(w.v_new) &&
      al(pools.k) && al(pools.v)) {
    const int64_t n8 = int64_t{w.n_tokens} * pools.n_kv_heads * (pools.head_dim / 8);
    const int64_t blocks8 = (n8 + threads - 1) / threads;
    if (blocks8 > 0x7fffffff) bad("too many tokens for one launch");
    gpu::launch(write_kv16_kernel, dim3(static_cast<unsigned>(blocks8)), dim3(threads), 0,
                static_cast<gpuStream_t>(stream), w.chained_launch, a);
    return;
  }
  const int64_t n = int64_t{w.n_tokens} * pools.n_kv_heads * (pools.head_dim / 32);
  const int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 0x7fffffff) bad("too many tokens for one launch");
  gpu::launch(write_kv_kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, static_cast<gpuStream_t>(stream),
              w.chained_launch, a);
}

}  // namespace ds::cuda

#include "kernels/cuda/tma_pool_map.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace ds::cuda::detail {

namespace {

// cuTensorMapEncodeTiled through the runtime's driver entry point, so nothing links libcuda.
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

bool encode_pool_map(void* map, const void* pool, int64_t rows, int32_t n_kv_heads, int64_t row_bytes, bool all_heads,
                     int l2_promotion) {
  static_assert(sizeof(CUtensorMap) == 128);
  if (row_bytes <= 0 || row_bytes % 16 != 0 || row_bytes / 4 > 256 || rows <= 0 || rows > INT_MAX ||
      n_kv_heads <= 0 || reinterpret_cast<uintptr_t>(pool) % 16 != 0 || reinterpret_cast<uintptr_t>(map) % 64 != 0 ||
      (all_heads && n_kv_heads > 256))
    return false;
  CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  switch (l2_promotion) {
    case 0: break;
    case 64: promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_64B; break;
    case 128: promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B; break;
    case 256: promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B; break;
    default: return false;
  }
  const PFN_cuTensorMapEncodeTiled_v12000 fn = encoder();
  if (!fn) return false;
  // Per head: (row element, head, token row); all heads: (row element, token row, head), whose
  // box is written to shared memory head by head.
  const cuuint64_t words = static_cast<cuuint64_t>(row_bytes / 4), heads = static_cast<cuuint64_t>(n_kv_heads);
  const cuuint64_t head_stride = static_cast<cuuint64_t>(row_bytes), token_stride = head_stride * heads;
  const cuuint64_t dims[3] = {words, all_heads ? static_cast<cuuint64_t>(rows) : heads,
                              all_heads ? heads : static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[2] = {all_heads ? token_stride : head_stride, all_heads ? head_stride : token_stride};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(words), all_heads ? 16u : 1u,
                             all_heads ? static_cast<cuuint32_t>(heads) : 16u};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  return fn(static_cast<CUtensorMap*>(map), CU_TENSOR_MAP_DATA_TYPE_UINT32, 3, const_cast<void*>(pool), dims, strides,
            box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
            promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool pool_map(void* map, const void* pool, int64_t rows, int32_t n_kv_heads, int64_t row_bytes, bool all_heads,
              int l2_promotion) {
  struct alignas(64) Map {
    unsigned char bytes[128];
  };
  using Key = std::tuple<const void*, int64_t, int32_t, int64_t, bool, int>;
  static std::mutex mu;
  static std::map<Key, Map> cache;
  const Key key{pool, rows, n_kv_heads, row_bytes, all_heads, l2_promotion};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    Map m;
    if (!encode_pool_map(m.bytes, pool, rows, n_kv_heads, row_bytes, all_heads, l2_promotion)) return false;
    if (cache.size() >= 64) cache.clear();  // pools come and go in tests and benchmarks
    it = cache.emplace(key, m).first;
  }
  std::memcpy(map, it->second.bytes, sizeof(Map::bytes));
  return true;
}

}  // namespace ds::cuda::detail

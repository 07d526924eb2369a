// The paged prefill attention's launchers (the kernels: attention_prefill.cuh): how many
// splits of the key range a chunk needs to fill the GPU, their scratch, and the launch for the
// head_dim and the pools' element types.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

template <int D, bool kBf16Pool>
void launch(const Params& p, const Stream& stream) {
  constexpr size_t smem = prefill_smem_bytes<D>();
  static const bool attr_set = [] {
    check_cuda(cudaFuncSetAttribute(prefill_attention_kernel<D, kBf16Pool>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
               "prefill_attention: shared memory attribute");
    return true;
  }();
  (void)attr_set;
  const dim3 grid(static_cast<unsigned>((p.rows + kRows - 1) / kRows), static_cast<unsigned>(p.a.n_kv_heads),
                  static_cast<unsigned>(p.n_splits));
  launch_dependent("prefill_attention kernel", prefill_attention_kernel<D, kBf16Pool>, grid, dim3(kThreads), smem,
                   stream, p);
  if (p.n_splits > 1)
    launch_dependent("prefill_attention merge kernel", prefill_attention_merge_kernel<D>,
                     dim3(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.a.n_kv_heads)), dim3(64), 0, stream,
                     p);
}

}  // namespace

int32_t prefill_attention_splits(const PrefillAttention& a, int32_t n_sms) {
  const int64_t group = a.n_q_heads / a.n_kv_heads;
  const int64_t ctas = (a.n_tokens * group + kRows - 1) / kRows * a.n_kv_heads;
  const int64_t want = kCtasPerSm * static_cast<int64_t>(n_sms);
  if (ctas >= want) return 1;
  // At least 4 key tiles per split, so the merge stays small next to the attention itself.
  const int64_t tiles = (a.n_cached + a.n_tokens + kKeys - 1) / kKeys;
  return static_cast<int32_t>(std::clamp<int64_t>(std::min((want + ctas - 1) / ctas, tiles / 4), 1, 32));
}

size_t prefill_attention_scratch_floats(const PrefillAttention& a, int32_t n_splits) {
  if (n_splits <= 1) return 0;
  const int64_t rows = a.n_tokens * (a.n_q_heads / a.n_kv_heads);
  return static_cast<size_t>(n_splits) * static_cast<size_t>(a.n_kv_heads * rows) * (a.head_dim + 2);
}

void prefill_attention(const PrefillAttention& a, int32_t n_splits, float* scratch, Stream stream) {
  if (a.n_tokens == 0) return;
  if (a.n_kv_heads <= 0 || a.n_q_heads % a.n_kv_heads != 0)
    throw std::invalid_argument("cuda backend: prefill_attention: query heads not a multiple of KV heads");
  if (a.n_kv_heads > 65535 || n_splits < 1 || n_splits > 65535)
    throw std::invalid_argument("cuda backend: prefill_attention: too many KV heads or splits");
  Params p;
  p.a = a;
  p.group = a.n_q_heads / a.n_kv_heads;
  p.rows = a.n_tokens * p.group;
  p.n_splits = n_splits;
  p.scale_log2 = a.scale * kLog2e;
  p.part_o = scratch;
  p.part_ml = scratch ? scratch + static_cast<size_t>(n_splits) * static_cast<size_t>(a.n_kv_heads * p.rows) * a.head_dim
                      : nullptr;
  if (n_splits > 1 && !scratch) throw std::invalid_argument("cuda backend: prefill_attention: split without scratch");
  if (p.rows > 0x7fffffffLL * kRows) throw std::invalid_argument("cuda backend: prefill_attention: chunk too long");
  const bool bf16_pool = a.k_type == DType::bf16 && a.v_type == DType::bf16;
  switch (a.head_dim) {
    case 128:
      return bf16_pool ? launch<128, true>(p, stream) : launch<128, false>(p, stream);
    case 256:
      return bf16_pool ? launch<256, true>(p, stream) : launch<256, false>(p, stream);
    default:
      throw std::invalid_argument("cuda backend: prefill_attention: head_dim must be 128 or 256, got " +
                                  std::to_string(a.head_dim));
  }
}

}  // namespace ds::cuda::ops

// choose_decode_launch (paged_attention.h): the one place where paged decode's kernel, its
// layout and its resources are decided, from the device's description, the kernels' compiled
// resources, the pools and the options; and tc_config, the pipeline depth and shared memory a
// tensor-core instantiation gets. Host code.
#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common/gpu_runtime.h"
#include "kernels/cuda/decode_launch.h"
#include "kernels/cuda/decode_tc_layout.h"

namespace ds::cuda {
namespace detail {

TcConfig tc_config(DType k, DType v, int D, int regs, int64_t static_smem, int64_t smem_optin, int64_t smem_per_sm,
                   int max_blocks_per_sm, bool token_rows) {
#if DS_GPU_HAS_MMA_SM80
  if (D != 128 && D != 256) return {};
  const int64_t cta_stage = int64_t{kTcWarps} * 16 * (row_bytes(k, D) + row_bytes(v, D));
  auto smem_for = [&](int64_t stages) {
    return token_rows ? tc_token_rows_smem_bytes(cta_stage, static_cast<int>(stages), D)
                      : tc_q_offset(stages * cta_stage, D) + tc_q_bytes(D) + tc_bar_bytes();
  };
  const int64_t regs_per_block = int64_t{kTcWarps} * 32 * ((regs + 7) / 8 * 8);
  // DecodeOptions::max_blocks_per_sm caps the resident blocks (fewer blocks, deeper pipelines).
  const int64_t cap = std::clamp<int64_t>(max_blocks_per_sm, 1, 3);
  const int max_by_regs = static_cast<int>(std::min<int64_t>(cap, 65536 / std::max<int64_t>(regs_per_block, 1)));
  for (int blocks = max_by_regs; blocks >= 1; --blocks) {
    // Each resident block costs 1 KB of reserved shared memory besides its own; q's area
    // (rounded up with the stages) comes off the top.
    const int64_t per_block = std::min(smem_optin, smem_per_sm / blocks - 1024 - static_smem);
    int64_t stages = blocks == 1 ? 8 : 6;
    while (stages > 1 && smem_for(stages) > per_block) --stages;
    if (stages >= 3 || (blocks == 1 && stages >= 2)) {
      TcConfig c;
      c.stages = static_cast<int>(stages);
      c.smem_bytes = smem_for(stages);
      c.supported = true;
      return c;
    }
  }
  return {};
#else
  (void)k, (void)v, (void)D, (void)regs, (void)static_smem, (void)smem_optin, (void)smem_per_sm, (void)max_blocks_per_sm,
      (void)token_rows;
  return {};
#endif
}

TcEntry tc_entry(DType k, DType v, int D) {
  switch (k) {
    case DType::bf16: return tc_entry_for<DType::bf16>(v, D);
    case DType::f16: return tc_entry_for<DType::f16>(v, D);
    case DType::q8_0: return tc_entry_for<DType::q8_0>(v, D);
    case DType::q4_0: return tc_entry_for<DType::q4_0>(v, D);
    default: return {};
  }
}

namespace {

// What the choice reads about the current device.
struct DeviceInfo {
  int sm_count = 0, cc_major = 0, smem_per_sm = 0, smem_optin = 0;
};
DeviceInfo describe_device() {
  int dev = 0;
  DeviceInfo d;
  DS_GPU_CHECK(gpuGetDevice(&dev));
  DS_GPU_CHECK(gpuDeviceGetAttribute(&d.smem_per_sm, gpuDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  DS_GPU_CHECK(gpuDeviceGetAttribute(&d.sm_count, gpuDevAttrMultiProcessorCount, dev));
  DS_GPU_CHECK(gpuDeviceGetAttribute(&d.smem_optin, gpuDevAttrMaxSharedMemoryPerBlockOptin, dev));
  DS_GPU_CHECK(gpuDeviceGetAttribute(&d.cc_major, gpuDevAttrComputeCapabilityMajor, dev));
  return d;
}

}  // namespace
}  // namespace detail

using namespace detail;

DecodeLaunchConfig choose_decode_launch(const KvPoolView& pools, int32_t n_q_heads, const DecodeOptions& opts) {
  validate_pools(pools, n_q_heads);
  const DeviceInfo info = describe_device();
  const int sms = info.sm_count, optin = info.smem_optin, cc = info.cc_major, per_sm_smem = info.smem_per_sm;
  const int32_t group = n_q_heads / pools.n_kv_heads;
  // Token-row tiles (DecodeOptions::token_rows).
  const bool token_rows = opts.token_rows && cc >= 9 && opts.kernel != DecodeKernel::portable &&
                          tc_token_rows_capable(pools.k_type, pools.v_type, pools.head_dim) && pools.n_kv_heads == kTcWarps &&
                          group <= kTcHeads && pools.block_size % 16 == 0 && opts.chunk_tokens % 16 == 0;
#if DS_GPU_HIP
  const bool tc_ok = false;
  TcConfig tc, tc_rows;
  const TcEntry entry{};
  (void)token_rows;
#else
  TcConfig tc, tc_rows;
  const TcEntry entry = tc_entry(pools.k_type, pools.v_type, pools.head_dim);
  if (entry.symbol && cc >= 8) {
    cudaFuncAttributes fa{};
    DS_GPU_CHECK(cudaFuncGetAttributes(&fa, entry.symbol));
    tc = tc_config(pools.k_type, pools.v_type, pools.head_dim, fa.numRegs, static_cast<int64_t>(fa.sharedSizeBytes),
                   optin, per_sm_smem, opts.max_blocks_per_sm);
    if (token_rows && entry.token_rows_symbol) {
      cudaFuncAttributes fr{};
      DS_GPU_CHECK(cudaFuncGetAttributes(&fr, entry.token_rows_symbol));
      tc_rows = tc_config(pools.k_type, pools.v_type, pools.head_dim, fr.numRegs,
                          static_cast<int64_t>(fr.sharedSizeBytes), optin, per_sm_smem, opts.max_blocks_per_sm, true);
    }
  }
  const bool tc_ok = tc.supported;
#endif
  DecodeKernel kernel = opts.kernel;
  if (kernel == DecodeKernel::automatic) kernel = tc_ok ? DecodeKernel::tensor_core : DecodeKernel::portable;
  if (kernel == DecodeKernel::tensor_core && !tc_ok)
    throw std::invalid_argument("paged attention: the tensor-core kernel needs an NVIDIA sm_80+ device and head_dim "
                                "128 or 256");
  DecodeLaunchConfig d;
  d.kernel = kernel;
  d.sm_count = sms;
  d.kv_bytes_per_token = row_bytes(pools.k_type, pools.head_dim) + row_bytes(pools.v_type, pools.head_dim);
  const void* symbol = nullptr;
  int threads = 128;
  if (kernel == DecodeKernel::tensor_core) {
    d.heads_per_cta = kTcHeads;
    d.head_chunks = (group + kTcHeads - 1) / kTcHeads;
    d.tokens_per_round = kTcWarps * 16;
    d.stages = tc.stages;
    d.smem_bytes = tc.smem_bytes;
    d.bulk_copies = opts.bulk_copies && cc >= 9 && tc_tma_capable(pools.k_type, pools.v_type, pools.head_dim);
    symbol = entry.symbol;
    threads = kTcWarps * 32;
  } else {
    d.heads_per_cta = group;
    d.head_chunks = 1;
    d.tokens_per_round = 16;
    d.smem_bytes = portable_smem_bytes(group, pools.head_dim);
    symbol = portable_symbol(pools.k_type, pools.v_type);
    if (d.smem_bytes > optin)
      throw std::invalid_argument("paged attention: group of " + std::to_string(group) + " heads of dim " +
                                  std::to_string(pools.head_dim) + " needs more shared memory than the device has");
  }
  if (!symbol) throw std::invalid_argument("paged attention: no kernel for these types and head_dim");
  auto occupancy = [&](const void* sym, int64_t smem) {
    ensure_smem_limit(sym, smem);
    int per_sm = 0;
    DS_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sym, threads, static_cast<size_t>(smem)));
    return per_sm;
  };
  d.ctas_per_sm = occupancy(symbol, d.smem_bytes);
  if (d.ctas_per_sm < 1) throw std::invalid_argument("paged attention: the decode kernel cannot be resident on this device");
  if (kernel == DecodeKernel::tensor_core && tc_rows.supported) {
    d.token_rows.kv_heads = pools.n_kv_heads;
    d.token_rows.stages = tc_rows.stages;
    d.token_rows.smem_bytes = tc_rows.smem_bytes;
    d.token_rows.ctas_per_sm = occupancy(entry.token_rows_symbol, tc_rows.smem_bytes);
    d.token_rows.l2_promotion = opts.token_rows_l2_promotion;
    if (d.token_rows.ctas_per_sm < 1) d.token_rows = {};
  }
  return d;
}

}  // namespace ds::cuda

// paged_attention_decode (paged_attention.h): the checks of a call against its pools and
// plan, the argument block, the kernel launch and the merge of split chunks. Host code.
#include "kernels/cuda/paged_attention.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/common/gpu_runtime.h"
#include "kernels/cuda/decode_launch.h"
#include "kernels/cuda/decode_tc_layout.h"
#if DS_GPU_CUDA
#include "kernels/cuda/tma_pool_map.h"
#endif

namespace ds::cuda {
namespace detail {

// Raises a kernel's dynamic shared-memory limit once per (device, kernel, size).
void ensure_smem_limit(const void* symbol, int64_t bytes) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, int64_t> done;
  int dev = 0;
  DS_GPU_CHECK(gpuGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  int64_t& have = done[{dev, symbol}];
  if (have >= bytes) return;
  DS_GPU_CHECK(gpuFuncSetAttribute(symbol, gpuFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  have = bytes;
}

namespace {

// Whether the tensor-core kernel copies K/V tiles with bulk tensor copies (sm_90), and their
// maps: both rows whole 16-byte units (tc_tma_capable), every 16-token tile inside one block
// (block size and chunk starts multiples of 16), where choose_decode_launch chose them
// (DecodeLaunchConfig::bulk_copies). Maps are encoded once per pool (tma_pool_map.h).
bool use_bulk_copies(const KvPoolView& pools, const DecodePlan& plan, TcMaps& maps) {
#if DS_GPU_CUDA
  if (!plan.launch.bulk_copies || pools.block_size % 16 != 0) return false;
  if (plan.needs_merge && plan.chunk_tokens % 16 != 0) return false;
  const int64_t rows = pools.num_blocks * pools.block_size;
  return pool_map(maps.k, pools.k, rows, pools.n_kv_heads, row_bytes(pools.k_type, pools.head_dim)) &&
         pool_map(maps.v, pools.v, rows, pools.n_kv_heads, row_bytes(pools.v_type, pools.head_dim));
#else
  (void)pools, (void)plan, (void)maps;
  return false;
#endif
}

// The tensor maps of token-row tiles: 16 token rows of every head per box (tma_pool_map.h),
// with the L2 promotion choose_decode_launch chose (DecodeOptions::token_rows_l2_promotion).
bool token_row_maps(const KvPoolView& pools, int promotion, TcMaps& maps) {
#if DS_GPU_CUDA
  const int64_t rows = pools.num_blocks * pools.block_size;
  return pool_map(maps.k, pools.k, rows, pools.n_kv_heads, row_bytes(pools.k_type, pools.head_dim), true, promotion) &&
         pool_map(maps.v, pools.v, rows, pools.n_kv_heads, row_bytes(pools.v_type, pools.head_dim), true, promotion);
#else
  (void)pools, (void)promotion, (void)maps;
  return false;
#endif
}

bool kv_type_ok(DType t) {
  return t == DType::bf16 || t == DType::f16 || t == DType::q8_0 || t == DType::q4_0;
}

}  // namespace

void validate_pools(const KvPoolView& p, int32_t n_q_heads) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("paged attention: " + m); };
  if (!kv_type_ok(p.k_type) || !kv_type_ok(p.v_type))
    bad("K and V pools must be bf16, f16, q8_0 or q4_0 (got " + std::string(dtype_name(p.k_type)) + ", " +
        std::string(dtype_name(p.v_type)) + ")");
  if (p.head_dim <= 0 || p.block_size <= 0 || p.n_kv_heads <= 0 || p.num_blocks < 0)
    bad("pool shape must have positive head_dim, block_size and n_kv_heads");
  if ((is_quantized(p.k_type) || is_quantized(p.v_type)) && p.head_dim % 32 != 0)
    bad("quantised pools need head_dim to be a multiple of 32");
  if (p.head_dim % 8 != 0) bad("head_dim must be a multiple of 8");
  if (n_q_heads <= 0 || n_q_heads % p.n_kv_heads != 0)
    bad("n_q_heads (" + std::to_string(n_q_heads) + ") must be a positive multiple of n_kv_heads (" +
        std::to_string(p.n_kv_heads) + ")");
}

void decode_with(const KvPoolView& pools, const DecodeQuery& q, DecodeWorkspace& ws, const DecodeOptions& opts,
                 const TcEntry& tc, uint64_t* trace, void* stream) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("paged_attention_decode: " + m); };
  validate_pools(pools, q.n_q_heads);
  if (!ws.has_plan()) bad("no plan uploaded to the workspace");
  const DecodePlan& plan = ws.plan();
  const DecodeLaunchConfig& cfg = plan.launch;
  const int32_t group = q.n_q_heads / pools.n_kv_heads;
  if (plan.n_seqs != q.n_seqs) bad("plan is for " + std::to_string(plan.n_seqs) + " sequences, query has " +
                                   std::to_string(q.n_seqs));
  if (plan.n_kv_heads != pools.n_kv_heads) bad("plan and pools disagree on n_kv_heads");
  const int32_t want_chunks = cfg.kernel == DecodeKernel::tensor_core ? (group + kTcHeads - 1) / kTcHeads : 1;
  if (cfg.head_chunks != want_chunks || cfg.kernel == DecodeKernel::automatic)
    bad("plan was made for another head grouping or kernel (use choose_decode_launch with these pools)");
  if (cfg.kv_bytes_per_token != row_bytes(pools.k_type, pools.head_dim) + row_bytes(pools.v_type, pools.head_dim))
    bad("plan was made for pools of other types or head_dim");
  if (q.q_type != DType::f32 && q.q_type != DType::bf16) bad("q must be f32 or bf16");
  if (q.out_type != DType::f32 && q.out_type != DType::bf16) bad("out must be f32 or bf16");
  if (q.n_seqs < 0) bad("negative n_seqs");
  if (q.n_seqs == 0) return;
  if (!q.q || !q.out || !q.block_table || !q.seq_lens || !pools.k || !pools.v) bad("null pointer");
  if (q.block_table_stride <= 0) bad("block_table_stride must be positive");
  if (int64_t{q.n_q_heads} * pools.head_dim > int64_t{ws.n_q_heads()} * ws.head_dim())
    bad("workspace was sized for fewer heads or a smaller head_dim");
  if (cfg.kernel == DecodeKernel::tensor_core && opts.kernel == DecodeKernel::portable)
    bad("options ask for the portable kernel but the plan was made for the tensor-core kernel");
  if (reinterpret_cast<uintptr_t>(q.out) % 16 != 0) bad("out must be 16-byte aligned");
  const bool token_rows = cfg.kv_heads_per_cta > 1;
  if (token_rows) {
    if (cfg.kv_heads_per_cta != pools.n_kv_heads || pools.n_kv_heads != kTcWarps || cfg.head_chunks != 1 ||
        cfg.kernel != DecodeKernel::tensor_core || !tc_token_rows_capable(pools.k_type, pools.v_type, pools.head_dim))
      bad("plan was made for token-row tiles these pools cannot use (use choose_decode_launch with these pools)");
    if (plan.needs_merge && plan.chunk_tokens % 16 != 0)
      bad("token-row tiles need chunks of a multiple of 16 tokens (DecodeOptions::token_rows = false for others)");
    if (pools.block_size % 16 != 0 || reinterpret_cast<uintptr_t>(pools.k) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(pools.v) % 16 != 0)
      bad("token-row tiles need block_size % 16 == 0 and 16-byte aligned pools");
    if (pools.num_blocks * pools.block_size > INT32_MAX)
      bad("token-row tiles address at most 2^31 token rows");
  }
  if (reinterpret_cast<uintptr_t>(q.q) % 4 != 0) bad("q must be 4-byte aligned");

  DecodeArgs a{};
  a.k_pool = static_cast<const uint8_t*>(pools.k);
  a.v_pool = static_cast<const uint8_t*>(pools.v);
  a.q = q.q;
  a.out = q.out;
  a.part_o = ws.device().part_o;
  a.part_lse = ws.device().part_lse;
  a.table = q.block_table;
  a.seq_lens = q.seq_lens;
  a.items = ws.device().items;
  a.guard = ws.device().guard;
  a.trace = cfg.kernel == DecodeKernel::tensor_core ? trace : nullptr;
  a.num_blocks = pools.num_blocks;
  a.table_stride = q.block_table_stride;
  a.block_size = pools.block_size;
  a.block_shift = -1;
  for (int b = 0; b < 31; ++b)
    if ((int32_t{1} << b) == pools.block_size) a.block_shift = b;
  a.n_kv_heads = pools.n_kv_heads;
  a.n_q_heads = q.n_q_heads;
  a.group = group;
  a.head_chunks = cfg.head_chunks;
  a.heads_per_cta = cfg.heads_per_cta;
  a.chunk_tokens = plan.chunk_tokens;
  a.head_dim = pools.head_dim;
  a.stages = cfg.stages;
  a.q_scale = q.scale * kLog2e;
  a.q_f32 = q.q_type == DType::f32;
  a.out_f32 = q.out_type == DType::f32;
  a.bounds_check = opts.bounds_check;
  a.q_align16 = reinterpret_cast<uintptr_t>(q.q) % 16 == 0;

  const auto grid_x = static_cast<uint32_t>(cfg.blocks_per_item(pools.n_kv_heads));
  const auto grid_y = static_cast<uint32_t>(plan.items.size());
  if (cfg.kernel == DecodeKernel::tensor_core) {
    const void* symbol = token_rows ? tc.token_rows_symbol : tc.symbol;
    const TcEntry::Launch launch = token_rows ? tc.launch_token_rows : tc.launch;
    if (!launch) bad("no tensor-core kernel for these types and head_dim");
    ensure_smem_limit(symbol, cfg.smem_bytes);
    TcMaps maps{};
    if (token_rows) {
      if (!token_row_maps(pools, cfg.token_rows.l2_promotion, maps)) bad("cannot encode the token-row tensor maps of these pools");
    } else {
      a.tma = use_bulk_copies(pools, plan, maps);
    }
    launch(a, maps, grid_x, grid_y, cfg.smem_bytes, stream, opts.chained_launch);  // gpu::launch checks the launch
  } else {
    if (trace) bad("phase stamps need the tensor-core kernel");
    ensure_smem_limit(portable_symbol(pools.k_type, pools.v_type), cfg.smem_bytes);
    launch_portable(a, pools.k_type, pools.v_type, grid_x, grid_y, stream);
  }
  if (plan.needs_merge) {
    if (pools.head_dim > kMergeMaxHeadDim) bad("head_dim over 1024 cannot be merged");
    MergeArgs m{};
    m.part_o = a.part_o;
    m.part_lse = a.part_lse;
    m.seq_item_begin = ws.device().seq_item_begin;
    m.out = q.out;
    m.out_f32 = a.out_f32;
    m.n_seqs = q.n_seqs;
    m.n_q_heads = q.n_q_heads;
    m.head_dim = pools.head_dim;
    m.sm_count = plan.launch.sm_count;
    // Chained (programmatic dependent launch) behind the tensor-core kernel: the merge blocks
    // are scheduled while the decode kernel drains and wait for its results
    // (DecodeOptions::chained_merge).
    launch_merge(m, stream, opts.chained_merge && cfg.kernel == DecodeKernel::tensor_core);
  }
#ifndef NDEBUG
  if (opts.bounds_check) {
    const KvGuardReport rep = ws.take_guard_report(stream);
    if (rep.tripped)
      throw KvBoundsError("paged_attention_decode: block id " + std::to_string(rep.bad_id) +
                          " is outside the pool of " + std::to_string(pools.num_blocks) + " blocks");
  }
#endif
}

}  // namespace detail

void paged_attention_decode(const KvPoolView& pools, const DecodeQuery& q, DecodeWorkspace& ws,
                            const DecodeOptions& opts, void* stream) {
  using namespace detail;
  decode_with(pools, q, ws, opts, tc_entry(pools.k_type, pools.v_type, pools.head_dim), nullptr, stream);
}

}  // namespace ds::cuda

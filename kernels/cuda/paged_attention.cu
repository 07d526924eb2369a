// Host side of paged decode attention: device description, workspace, argument checks, the
// kernel launch and the log-sum-exp merge of split chunks.
#include "kernels/cuda/paged_attention.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/decode_common.cuh"
#include "kernels/cuda/decode_tc.cuh"
#if DS_GPU_CUDA
#include "kernels/cuda/tma_pool_map.h"
#endif

namespace ds::cuda {
namespace detail {

TcConfig tc_config(DType k, DType v, int D, int regs, int64_t static_smem, int64_t smem_optin, int64_t smem_per_sm,
                   int max_blocks_per_sm, bool token_rows) {
#if DS_GPU_HAS_MMA_SM80
  if (D != 128 && D != 256) return {};
  const int64_t cta_stage = int64_t{kTcWarps} * 16 * (row_bytes(k, D) + row_bytes(v, D));
  auto smem_for = [&](int64_t stages) {
    return token_rows ? tc_rows_smem_bytes(cta_stage, static_cast<int>(stages), D)
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

// Whether the tensor-core kernel copies K/V tiles with bulk tensor copies (sm_90), and their
// maps: both rows whole 16-byte units (tc_tma_capable), every 16-token tile inside one block
// (block size and chunk starts multiples of 16), where describe_decode chose them
// (DecodeDevice::bulk_copies). Maps are encoded once per pool (tma_pool_map.h).
bool use_bulk_copies(const KvPoolView& pools, const DecodePlan& plan, TcMaps& maps) {
#if DS_GPU_CUDA
  if (!plan.device.bulk_copies || pools.block_size % 16 != 0) return false;
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
// with the L2 promotion describe_decode chose (DecodeOptions::rows_l2_promotion).
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

// One block per (sequence, query head, slice of head_dim) of kMergeThreads threads, in groups
// of gt (a power of two): thread t of a group owns four elements of the slice, and the
// groups take every G-th chunk and meet in shared memory at the end. After the decode
// kernel's results are visible the block makes three round trips to memory: the chunk
// boundaries, the chunks' log-sum-exps (kept in shared memory as the weights), and the chunk
// outputs, loaded eight at a time per thread so they are in flight together (the boundaries
// are read before the wait). A batch-1 split
// has few (sequence, head) pairs, so head_dim is cut into slices to put more SMs on it.
constexpr int kMergeThreads = 256;
constexpr int kMergeBatch = 1024;  // chunks whose weights sit in shared memory at once
constexpr int kMergeUnroll = 8;
// Threads per group for a slice of head_dim / slices elements (four per thread).
int merge_group_threads(int D, int slices) {
  return std::min(kMergeThreads, static_cast<int>(std::bit_ceil(static_cast<unsigned>((D / slices + 3) / 4))));
}
// Slices of head_dim per (sequence, head): up to four, while the blocks stay under two per
// SM and each slice is whole 16-thread groups.
int merge_slices(int D, int64_t pairs, int sm_count) {
  int s = 1;
  while (s < 4 && D % (2 * s * 64) == 0 && pairs * 2 * s <= 2 * int64_t{std::max(sm_count, 1)}) s *= 2;
  return s;
}

__global__ void merge_partials_kernel(const float* part_o, const float* part_lse, const int32_t* begin, void* out,
                                      bool out_f32, int n_q_heads, int D, int gt) {
  // The chunk boundaries were copied in before the decode kernel started, so they are read
  // while it drains (from L2: this SM's L1 may still hold an earlier call's); the partials
  // only after the wait.
  const int s = blockIdx.x;
#if DS_GPU_HIP
  const int b = begin[s], e = begin[s + 1];
#else
  const int b = __ldcg(begin + s), e = __ldcg(begin + s + 1);
#endif
  DS_GPU_WAIT_PREVIOUS();  // the decode kernel's partials are complete
  DS_GPU_ALLOW_NEXT();
  __shared__ float w[kMergeBatch];
  __shared__ float red[kMergeThreads / 32];
  __shared__ float4 others[kMergeThreads];
  const int h = blockIdx.y, tid = threadIdx.x, nt = blockDim.x;
  const int groups = nt / gt, g = tid / gt, lt = tid - g * gt;
  if (e - b <= 1) return;  // the only chunk wrote the output itself
  const float neg_inf = -__builtin_huge_valf();
  auto block_reduce = [&](float v, bool is_max) {
    for (int off = 16; off > 0; off >>= 1) {
#if DS_GPU_HIP
      const float o = __shfl_xor(v, off);
#else
      const float o = __shfl_xor_sync(0xffffffffu, v, off);
#endif
      v = is_max ? fmaxf(v, o) : v + o;
    }
    __syncthreads();
    if ((tid & 31) == 0) red[tid >> 5] = v;
    __syncthreads();
    v = is_max ? neg_inf : 0.f;
    for (int i = 0; i < (nt + 31) / 32; ++i) v = is_max ? fmaxf(v, red[i]) : v + red[i];
    return v;
  };
  auto lse = [&](int p) { return part_lse[static_cast<int64_t>(p) * n_q_heads + h]; };
  // The first kMergeBatch chunks' log-sum-exps, then their weights 2^(lse - M), stay in w;
  // each thread touches only its own entries until the reductions' barriers.
  float M = neg_inf;
  for (int p = b + tid; p < e; p += nt) {
    const float x = lse(p);
    if (p - b < kMergeBatch) w[p - b] = x;
    M = fmaxf(M, x);
  }
  M = block_reduce(M, true);
  float L = 0.f;
  if (M != neg_inf)
    for (int p = b + tid; p < e; p += nt) {
      const float x = exp2f((p - b < kMergeBatch ? w[p - b] : lse(p)) - M);
      if (p - b < kMergeBatch) w[p - b] = x;
      L += x;
    }
  L = block_reduce(L, false);  // its barriers also publish w
  const int d0 = blockIdx.z * 4 * gt + 4 * lt;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int p0 = b; M != neg_inf && p0 < e; p0 += kMergeBatch) {
    const int n = min(kMergeBatch, e - p0);
    if (p0 != b) {
      __syncthreads();
      for (int i = tid; i < n; i += nt) w[i] = exp2f(lse(p0 + i) - M);
      __syncthreads();
    }
    if (d0 >= D) continue;
    const float* src = part_o + (static_cast<int64_t>(p0) * n_q_heads + h) * D + d0;
    const int64_t step = static_cast<int64_t>(n_q_heads) * D;
    for (int i = g; i < n; i += kMergeUnroll * groups) {
      float4 v[kMergeUnroll];
#pragma unroll
      for (int k = 0; k < kMergeUnroll; ++k) {
        const int j = i + k * groups;
        v[k] = j < n ? *reinterpret_cast<const float4*>(src + j * step) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int k = 0; k < kMergeUnroll; ++k) {
        const int j = i + k * groups;
        const float x = j < n ? w[j] : 0.f;
        acc.x += x * v[k].x;
        acc.y += x * v[k].y;
        acc.z += x * v[k].z;
        acc.w += x * v[k].w;
      }
    }
  }
  if (g > 0 && d0 < D) others[tid] = acc;
  __syncthreads();
  if (g == 0 && d0 < D) {
    for (int k = 1; k < groups; ++k) {
      const float4 v = others[k * gt + lt];
      acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
    }
    const float inv = L > 0.f ? 1.f / L : 0.f;
    acc = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    const int64_t o = (static_cast<int64_t>(s) * n_q_heads + h) * D + d0;
    if (out_f32) {
      *reinterpret_cast<float4*>(static_cast<float*>(out) + o) = acc;
    } else {
      uint32_t* ob = reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(out) + o);
      ob[0] = f32_to_bf16_bits(acc.x) | (static_cast<uint32_t>(f32_to_bf16_bits(acc.y)) << 16);
      ob[1] = f32_to_bf16_bits(acc.z) | (static_cast<uint32_t>(f32_to_bf16_bits(acc.w)) << 16);
    }
  }
}

bool kv_type_ok(DType t) {
  return t == DType::bf16 || t == DType::f16 || t == DType::q8_0 || t == DType::q4_0;
}

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

}  // namespace
}  // namespace detail

DecodeDevice describe_decode(const KvPoolView& pools, int32_t n_q_heads, const DecodeOptions& opts) {
  using namespace detail;
  validate_pools(pools, n_q_heads);
  int dev = 0, sms = 0, optin = 0, cc = 0, per_sm_smem = 0;
  DS_GPU_CHECK(gpuGetDevice(&dev));
  DS_GPU_CHECK(gpuDeviceGetAttribute(&per_sm_smem, gpuDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  DS_GPU_CHECK(gpuDeviceGetAttribute(&sms, gpuDevAttrMultiProcessorCount, dev));
  DS_GPU_CHECK(gpuDeviceGetAttribute(&optin, gpuDevAttrMaxSharedMemoryPerBlockOptin, dev));
  DS_GPU_CHECK(gpuDeviceGetAttribute(&cc, gpuDevAttrComputeCapabilityMajor, dev));
  const int32_t group = n_q_heads / pools.n_kv_heads;
  // Token-row tiles (DecodeOptions::token_row_tiles).
  const bool token_rows = opts.token_row_tiles && cc >= 9 && opts.kernel != DecodeKernel::portable &&
                          tc_rows_capable(pools.k_type, pools.v_type, pools.head_dim) && pools.n_kv_heads == kTcWarps &&
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
    if (token_rows && entry.rows_symbol) {
      cudaFuncAttributes fr{};
      DS_GPU_CHECK(cudaFuncGetAttributes(&fr, entry.rows_symbol));
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
  DecodeDevice d;
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
    d.rows.kv_heads = pools.n_kv_heads;
    d.rows.stages = tc_rows.stages;
    d.rows.smem_bytes = tc_rows.smem_bytes;
    d.rows.ctas_per_sm = occupancy(entry.rows_symbol, tc_rows.smem_bytes);
    d.rows.l2_promotion = opts.rows_l2_promotion;
    if (d.rows.ctas_per_sm < 1) d.rows = {};
  }
  return d;
}

// ---- workspace

namespace {
constexpr int64_t kAlign = 256;
int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
struct WsLayout {
  int64_t items, begin, part_o, part_lse, guard, total;
};
WsLayout ws_layout(int32_t max_items, int32_t max_seqs, int32_t n_q_heads, int32_t head_dim) {
  WsLayout l;
  l.items = 0;
  l.begin = align_up(l.items + int64_t{max_items} * static_cast<int64_t>(sizeof(DecodeWorkItem)));
  l.part_o = align_up(l.begin + (int64_t{max_seqs} + 1) * 4);
  l.part_lse = align_up(l.part_o + int64_t{max_items} * n_q_heads * head_dim * 4);
  l.guard = align_up(l.part_lse + int64_t{max_items} * n_q_heads * 4);
  l.total = align_up(l.guard + 8);
  return l;
}
}  // namespace

DecodeWorkspace::DecodeWorkspace(int32_t max_items, int32_t max_seqs, int32_t n_q_heads, int32_t head_dim)
    : max_items_(max_items), max_seqs_(max_seqs), n_q_heads_(n_q_heads), head_dim_(head_dim) {
  if (max_items <= 0 || max_seqs <= 0 || n_q_heads <= 0 || head_dim <= 0)
    throw std::invalid_argument("DecodeWorkspace: sizes must be positive");
  const WsLayout l = ws_layout(max_items, max_seqs, n_q_heads, head_dim);
  DS_GPU_CHECK(gpuMalloc(&block_, static_cast<size_t>(l.total)));
  auto* base = static_cast<uint8_t*>(block_);
  dev_.items = reinterpret_cast<DecodeWorkItem*>(base + l.items);
  dev_.seq_item_begin = reinterpret_cast<int32_t*>(base + l.begin);
  dev_.part_o = reinterpret_cast<float*>(base + l.part_o);
  dev_.part_lse = reinterpret_cast<float*>(base + l.part_lse);
  dev_.guard = reinterpret_cast<int32_t*>(base + l.guard);
  DS_GPU_CHECK(gpuMemsetAsync(dev_.guard, 0, 8, nullptr));
  DS_GPU_CHECK(gpuMallocHost(&staging_, static_cast<size_t>(l.begin + (int64_t{max_seqs} + 1) * 4)));
  gpuEvent_t ev;
  DS_GPU_CHECK(gpuEventCreateWithFlags(&ev, gpuEventDisableTiming));
  staged_event_ = ev;
  DS_GPU_CHECK(gpuStreamSynchronize(nullptr));
}

DecodeWorkspace::~DecodeWorkspace() {
  if (staged_event_) {
    (void)gpuEventSynchronize(static_cast<gpuEvent_t>(staged_event_));
    (void)gpuEventDestroy(static_cast<gpuEvent_t>(staged_event_));
  }
  if (staging_) (void)gpuFreeHost(staging_);
  if (block_) (void)gpuFree(block_);
}

int64_t DecodeWorkspace::device_bytes(int32_t max_items, int32_t max_seqs, int32_t n_q_heads, int32_t head_dim) {
  return ws_layout(max_items, max_seqs, n_q_heads, head_dim).total;
}

void DecodeWorkspace::upload(const DecodePlan& plan, void* stream) {
  if (static_cast<int64_t>(plan.items.size()) > max_items_ || plan.n_seqs > max_seqs_)
    throw std::invalid_argument("DecodeWorkspace::upload: plan has " + std::to_string(plan.items.size()) +
                                " items for " + std::to_string(plan.n_seqs) + " sequences; workspace holds " +
                                std::to_string(max_items_) + " and " + std::to_string(max_seqs_));
  if (static_cast<int32_t>(plan.seq_item_begin.size()) != plan.n_seqs + 1)
    throw std::invalid_argument("DecodeWorkspace::upload: malformed plan");
  auto s = static_cast<gpuStream_t>(stream);
  auto ev = static_cast<gpuEvent_t>(staged_event_);
  DS_GPU_CHECK(gpuEventSynchronize(ev));  // the previous upload has left the staging buffer
  const WsLayout l = ws_layout(max_items_, max_seqs_, n_q_heads_, head_dim_);
  auto* st = static_cast<uint8_t*>(staging_);
  const size_t item_bytes = plan.items.size() * sizeof(DecodeWorkItem);
  const size_t begin_bytes = plan.seq_item_begin.size() * 4;
  if (item_bytes) std::memcpy(st, plan.items.data(), item_bytes);
  std::memcpy(st + l.begin, plan.seq_item_begin.data(), begin_bytes);
  if (item_bytes) DS_GPU_CHECK(gpuMemcpyAsync(dev_.items, st, item_bytes, gpuMemcpyHostToDevice, s));
  DS_GPU_CHECK(gpuMemcpyAsync(dev_.seq_item_begin, st + l.begin, begin_bytes, gpuMemcpyHostToDevice, s));
  DS_GPU_CHECK(gpuEventRecord(ev, s));
  plan_ = plan;
  uploaded_ = true;
}

KvGuardReport DecodeWorkspace::take_guard_report(void* stream) {
  auto s = static_cast<gpuStream_t>(stream);
  int32_t host[2] = {0, 0};
  DS_GPU_CHECK(gpuStreamSynchronize(s));
  DS_GPU_CHECK(gpuMemcpy(host, dev_.guard, 8, gpuMemcpyDeviceToHost));
  KvGuardReport r;
  r.tripped = host[0] != 0;
  r.bad_id = host[1];
  if (r.tripped) {
    DS_GPU_CHECK(gpuMemsetAsync(dev_.guard, 0, 8, s));
    DS_GPU_CHECK(gpuStreamSynchronize(s));
  }
  return r;
}

// ---- decode

void paged_attention_decode(const KvPoolView& pools, const DecodeQuery& q, DecodeWorkspace& ws,
                            const DecodeOptions& opts, void* stream) {
  using namespace detail;
  auto bad = [](const std::string& m) { throw std::invalid_argument("paged_attention_decode: " + m); };
  validate_pools(pools, q.n_q_heads);
  if (!ws.has_plan()) bad("no plan uploaded to the workspace");
  const DecodePlan& plan = ws.plan();
  const DecodeDevice& dev = plan.device;
  const int32_t group = q.n_q_heads / pools.n_kv_heads;
  if (plan.n_seqs != q.n_seqs) bad("plan is for " + std::to_string(plan.n_seqs) + " sequences, query has " +
                                   std::to_string(q.n_seqs));
  if (plan.n_kv_heads != pools.n_kv_heads) bad("plan and pools disagree on n_kv_heads");
  const int32_t want_chunks = dev.kernel == DecodeKernel::tensor_core ? (group + kTcHeads - 1) / kTcHeads : 1;
  if (dev.head_chunks != want_chunks || dev.kernel == DecodeKernel::automatic)
    bad("plan was made for another head grouping or kernel (use describe_decode with these pools)");
  if (dev.kv_bytes_per_token != row_bytes(pools.k_type, pools.head_dim) + row_bytes(pools.v_type, pools.head_dim))
    bad("plan was made for pools of other types or head_dim");
  if (q.q_type != DType::f32 && q.q_type != DType::bf16) bad("q must be f32 or bf16");
  if (q.out_type != DType::f32 && q.out_type != DType::bf16) bad("out must be f32 or bf16");
  if (q.n_seqs < 0) bad("negative n_seqs");
  if (q.n_seqs == 0) return;
  if (!q.q || !q.out || !q.block_table || !q.seq_lens || !pools.k || !pools.v) bad("null pointer");
  if (q.block_table_stride <= 0) bad("block_table_stride must be positive");
  if (int64_t{q.n_q_heads} * pools.head_dim > int64_t{ws.n_q_heads()} * ws.head_dim())
    bad("workspace was sized for fewer heads or a smaller head_dim");
  if (dev.kernel == DecodeKernel::tensor_core && opts.kernel == DecodeKernel::portable)
    bad("options ask for the portable kernel but the plan was made for the tensor-core kernel");
  if (reinterpret_cast<uintptr_t>(q.out) % 16 != 0) bad("out must be 16-byte aligned");
  const bool token_rows = dev.kv_heads_per_cta > 1;
  if (token_rows) {
    if (dev.kv_heads_per_cta != pools.n_kv_heads || pools.n_kv_heads != kTcWarps || dev.head_chunks != 1 ||
        dev.kernel != DecodeKernel::tensor_core || !tc_rows_capable(pools.k_type, pools.v_type, pools.head_dim))
      bad("plan was made for token-row tiles these pools cannot use (use describe_decode with these pools)");
    if (plan.needs_merge && plan.chunk_tokens % 16 != 0)
      bad("token-row tiles need chunks of a multiple of 16 tokens (DecodeOptions::token_row_tiles = false for others)");
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
  a.seq_rows = q.seq_rows;
  a.items = ws.device().items;
  a.guard = ws.device().guard;
  a.trace = dev.kernel == DecodeKernel::tensor_core ? opts.trace : nullptr;
  a.num_blocks = pools.num_blocks;
  a.table_stride = q.block_table_stride;
  a.block_size = pools.block_size;
  a.block_shift = -1;
  for (int b = 0; b < 31; ++b)
    if ((int32_t{1} << b) == pools.block_size) a.block_shift = b;
  a.n_kv_heads = pools.n_kv_heads;
  a.n_q_heads = q.n_q_heads;
  a.group = group;
  a.head_chunks = dev.head_chunks;
  a.heads_per_cta = dev.heads_per_cta;
  a.chunk_tokens = plan.chunk_tokens;
  a.head_dim = pools.head_dim;
  a.stages = dev.stages;
  a.q_scale = q.scale * kLog2e;
  a.q_f32 = q.q_type == DType::f32;
  a.out_f32 = q.out_type == DType::f32;
  a.bounds_check = opts.bounds_check;
  a.q_align16 = reinterpret_cast<uintptr_t>(q.q) % 16 == 0;

  auto s = static_cast<gpuStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(dev.blocks_per_item(pools.n_kv_heads)), static_cast<unsigned>(plan.items.size()));
  if (dev.kernel == DecodeKernel::tensor_core) {
    const TcEntry e = tc_entry(pools.k_type, pools.v_type, pools.head_dim);
    const void* symbol = token_rows ? e.rows_symbol : e.symbol;
    const TcEntry::Launch launch = token_rows ? e.launch_rows : e.launch;
    if (!launch) bad("no tensor-core kernel for these types and head_dim");
    ensure_smem_limit(symbol, dev.smem_bytes);
    TcMaps maps{};
    if (token_rows) {
      if (!token_row_maps(pools, dev.rows.l2_promotion, maps)) bad("cannot encode the token-row tensor maps of these pools");
    } else {
      a.tma = use_bulk_copies(pools, plan, maps);
    }
    launch(a, maps, grid, dev.smem_bytes, s, opts.chained_launch);  // gpu::launch checks the launch
  } else {
    ensure_smem_limit(portable_symbol(pools.k_type, pools.v_type), dev.smem_bytes);
    launch_portable(a, pools.k_type, pools.v_type, grid, s);
  }
  if (plan.needs_merge) {
    if (pools.head_dim > 4 * kMergeThreads) bad("head_dim over 1024 cannot be merged");
    const int slices = merge_slices(pools.head_dim, int64_t{q.n_seqs} * q.n_q_heads, plan.device.sm_count);
    const int gt = merge_group_threads(pools.head_dim, slices);
    const dim3 mgrid(static_cast<unsigned>(q.n_seqs), static_cast<unsigned>(q.n_q_heads), static_cast<unsigned>(slices));
    const unsigned threads = kMergeThreads;
    const bool out_f32 = a.out_f32;
    const int n_q_heads = q.n_q_heads, D = pools.head_dim;
    const int32_t* begin = ws.device().seq_item_begin;
    // Chained (programmatic dependent launch) behind the tensor-core kernel: the merge blocks
    // are scheduled while the decode kernel drains and wait for its results
    // (DecodeOptions::chained_merge).
    gpu::launch(merge_partials_kernel, mgrid, dim3(threads), 0, s, opts.chained_merge && dev.kernel == DecodeKernel::tensor_core,
                static_cast<const float*>(a.part_o), static_cast<const float*>(a.part_lse), begin, q.out, out_f32,
                n_q_heads, D, gt);
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

}  // namespace ds::cuda

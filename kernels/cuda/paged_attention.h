// Paged attention decode on the GPU: one query token per sequence against its paged K/V.
//
// This header is plain C++ (no CUDA headers): the engine's backend includes it from .cpp or
// .cu files alike. Streams are passed as `void*` (a cudaStream_t or hipStream_t converts
// implicitly; nullptr is the default stream). Device pointers are raw; every size and pool
// offset is 64-bit inside.
//
// Data, per full-attention layer (kvcache/kv_layout.h):
//   K and V pools [num_blocks, block_size, n_kv_heads, head_dim], each of its own type among
//   bf16, f16, q8_0, q4_0 (ggml blocks of 32 along head_dim). Block id b names the same slot
//   in every layer. head_dim is 128 or 256.
//   q [n_seqs, n_q_heads, head_dim] in f32 or bf16 (4-byte aligned); out the same shape in f32
//   or bf16 (16-byte aligned).
//   A device block table [n_seqs, stride] of int32 block ids and device seq_lens [n_seqs]
//   (the CUDA backend uploads both with the step's plan, cuda_plan.h).
//   Query head h uses KV head h / (n_q_heads / n_kv_heads); any integer ratio works.
//
// A step, on the host:
//   DecodeLaunchConfig cfg = choose_decode_launch(pools, n_q_heads, opts);  // once per model
//   DecodePlan plan = plan_decode(cfg, pools.n_kv_heads, host_seq_lens, opts.chunk_tokens);
//   ws.upload(plan, stream);                                              // once per step
//   for each layer: paged_attention_decode(layer_pools, query, ws, opts, stream);
// choose_decode_launch is the one place where the kernel, its layout and its resources are
// decided (in the manner of llama.cpp's ggml_cuda_get_best_fattn_kernel), from the device's
// description, the pools and the options; plan_decode then only splits the batch.
// The plan splits every sequence into chunks of plan.chunk_tokens tokens (split-K) so that
// batch 1 at 4K context still fills all multiprocessors; each (chunk, KV head) is one thread
// block that computes all query heads of the group, so every K/V row is read once. Chunks of
// a sequence are merged with a log-sum-exp by a second small kernel (on sm_90 launched with
// programmatic dependent launch, so its launch overlaps the decode kernel's tail); a sequence
// that fits in one chunk is written directly. A sequence of length 0 produces zeros.
//
// Kernels: `tensor_core` (NVIDIA sm_80+, decode_tc.cuh: mma.sync bf16/f16 with fp32
// accumulation and cp.async or bulk-copy pipelining; quantised K/V are consumed as exact small
// integers with the block scale applied in fp32, and q and the probabilities are split into
// two bf16/f16 parts, so results match a float64 reference to ~1e-6) and `portable` (plain
// CUDA-core code that also compiles with hipcc; slower, used on HIP and as a cross-check).
// decode_trace.h runs the tensor-core kernel with per-block phase stamps, for the benchmark
// and the tests.
//
// Errors: bad shapes, types or plans throw std::invalid_argument; CUDA failures throw
// std::runtime_error. With DecodeOptions::bounds_check (on by default in builds without
// NDEBUG) the kernels refuse block ids outside [0, num_blocks): the offending K/V rows are
// not read, and the first bad id is reported by DecodeWorkspace::take_guard_report(); in such
// builds paged_attention_decode also synchronises and throws KvBoundsError itself.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "kernels/dtype.h"

namespace ds::cuda {

#ifdef NDEBUG
inline constexpr bool kBoundsCheckDefault = false;
#else
inline constexpr bool kBoundsCheckDefault = true;
#endif

// One layer's K and V pools.
struct KvPoolView {
  void* k = nullptr;
  void* v = nullptr;
  DType k_type = DType::bf16;
  DType v_type = DType::bf16;
  int64_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

// One decode batch of one layer.
struct DecodeQuery {
  const void* q = nullptr;  // [n_seqs, n_q_heads, head_dim], contiguous
  DType q_type = DType::bf16;
  void* out = nullptr;  // same shape as q, 16-byte aligned
  DType out_type = DType::f32;
  int32_t n_seqs = 0;
  int32_t n_q_heads = 0;
  float scale = 0.0f;  // softmax scale, usually 1/sqrt(head_dim)

  const int32_t* block_table = nullptr;  // device [n_seqs, block_table_stride]
  int32_t block_table_stride = 0;
  const int32_t* seq_lens = nullptr;  // device [n_seqs]
};

enum class DecodeKernel : uint8_t { automatic, tensor_core, portable };

// What a caller may force; the defaults are what production runs. The CUDA backend passes
// CudaBackendOptions::decode; benchmarks and tests change a field to compare one path with
// the one it replaced (docs/bench-log).
struct DecodeOptions {
  int32_t chunk_tokens = 0;  // 0: split-K chosen from occupancy; > 0: fixed tokens per split
  bool bounds_check = kBoundsCheckDefault;
  DecodeKernel kernel = DecodeKernel::automatic;
  // Launch the tensor-core kernel chained behind the previous kernel on the stream
  // (programmatic dependent launch: it is scheduled while that kernel drains and waits for it
  // before reading). The CUDA backend's forward sets it; standalone timing leaves it off so
  // every call starts from an idle stream.
  bool chained_launch = false;
  // Launch the merge of split chunks chained behind the decode kernel, so its blocks are
  // scheduled while the decode kernel drains.
  bool chained_merge = true;
  // Quantised K and V with 4 KV heads on sm_90: one thread block per chunk reads the chunk's
  // whole token rows (every head) by contiguous bulk copies, instead of one block per head
  // reading its interleaved rows (Q8_0 rows share 128-byte lines with the next head's).
  // Needs 16-token-aligned chunks (chunk_tokens 0 or a multiple of 16) and block_size % 16 == 0.
  bool token_rows = true;
  // Quantised K/V tiles with 16-byte-multiple rows by bulk tensor copies on sm_90 (else
  // cp.async).
  bool bulk_copies = true;
  // Resident tensor-core blocks per SM at most (1-3): fewer blocks get deeper pipelines.
  int32_t max_blocks_per_sm = 3;
  // L2 promotion of the token-row tiles' bulk copies, in bytes (0, 64, 128 or 256): a box
  // covers whole lines of the pool, and fetching each line whole on its first sector made
  // Q8_0 faster at 32K+ (docs/bench-log, "Token-row tiles").
  int32_t token_rows_l2_promotion = 128;
};

// How decode launches for one model's pools on this device (from choose_decode_launch): the
// kernel, its resources, and what the planner needs to split a batch over the device.
struct DecodeLaunchConfig {
  DecodeKernel kernel = DecodeKernel::portable;
  int32_t sm_count = 1;
  int32_t ctas_per_sm = 1;        // resident thread blocks per multiprocessor
  int32_t heads_per_cta = 8;      // query heads one thread block computes
  int32_t head_chunks = 1;        // thread blocks per KV head (ceil(group / heads_per_cta))
  int32_t tokens_per_round = 64;  // tokens one thread block consumes per pipeline round
  int64_t kv_bytes_per_token = 0; // K + V bytes of one token of one KV head
  int32_t stages = 0;             // pipeline depth (tensor-core kernel)
  int64_t smem_bytes = 0;         // dynamic shared memory per thread block
  bool bulk_copies = false;       // bulk tensor copies where the pools allow (sm_90+, tensor-core kernel)
  // KV heads one thread block covers: 1, or all of them when it reads whole token rows
  // (quantised K and V at head_dim 256, 4 KV heads, sm_90: DecodeOptions::token_rows).
  // choose_decode_launch leaves 1 and fills `rows` where token-row tiles are possible;
  // plan_decode chooses per batch and, choosing them, copies `rows` into these fields of its
  // plan's launch configuration.
  int32_t kv_heads_per_cta = 1;
  struct TokenRows {
    int32_t kv_heads = 0;  // 0: not available
    int32_t stages = 0;
    int64_t smem_bytes = 0;
    int32_t ctas_per_sm = 0;
    int32_t l2_promotion = 0;  // bytes (DecodeOptions::token_rows_l2_promotion)
  } token_rows;
  // Thread blocks per work item (grid x).
  int32_t blocks_per_item(int32_t n_kv_heads) const {
    return (n_kv_heads + kv_heads_per_cta - 1) / kv_heads_per_cta * head_chunks;
  }
};

// Describes the current device (multiprocessors, shared memory, compute capability) and the
// kernels' resources and occupancy for these pools (pointers may still be null), and chooses
// the kernel and its layouts: the tensor-core kernel where it is compiled and fits (sm_80+,
// head_dim 128 or 256), else the portable one; bulk tensor copies and token-row tiles where
// the device (sm_90), the pools and `opts` allow them. Throws std::invalid_argument for
// unsupported shapes or types, or a kernel `opts` forces that cannot run.
DecodeLaunchConfig choose_decode_launch(const KvPoolView& pools, int32_t n_q_heads, const DecodeOptions& opts);

// One thread-block row of the grid: a chunk of one sequence.
struct DecodeWorkItem {
  int32_t seq = 0;          // batch entry
  int32_t token_begin = 0;  // first token of the chunk
  int32_t flags = 0;        // kItemLast | kItemOnly
  int32_t partial = 0;      // slot of its partial result; a sequence's slots are contiguous
};
inline constexpr int32_t kItemLast = 1;  // last chunk: runs to the device seq_len
inline constexpr int32_t kItemOnly = 2;  // the sequence's only chunk: writes out directly

struct DecodePlan {
  int32_t n_seqs = 0;
  int32_t chunk_tokens = 0;
  int32_t n_kv_heads = 0;
  DecodeLaunchConfig launch;  // the layout this batch runs (plan_decode's choice of `rows`)
  std::vector<DecodeWorkItem> items;     // one per (sequence, chunk), longest first
  std::vector<int32_t> seq_item_begin;   // [n_seqs + 1]: partial slots of entry i
  bool needs_merge = false;              // some sequence has more than one chunk
  double est_us = 0;                     // planner's time estimate (bandwidth model)
};

// Splits the batch (host copy of the sequence lengths, in batch order) into work items.
// chunk_tokens > 0 forces that split length; 0 picks the length that best balances
// (sequence chunks x KV heads) thread blocks over ctas_per_sm x sm_count slots, with no empty
// chunks. Where cfg.token_rows offers token-row tiles, it also picks the layout: token rows when
// their chunk is long (>= 1000 tokens, or forced), a block per head otherwise; the plan's
// launch configuration holds the chosen layout's blocks, stages and shared memory. Pure host
// code: the result only depends on the arguments.
DecodePlan plan_decode(const DecodeLaunchConfig& cfg, int32_t n_kv_heads, std::span<const int32_t> seq_lens,
                       int32_t chunk_tokens = 0);

// The first refused block id, as reported by the kernels' bounds guard.
struct KvGuardReport {
  bool tripped = false;
  int32_t bad_id = 0;
};

class KvBoundsError : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

// Device scratch for one decode call at a time: the uploaded plan, the split partials
// (fp32, normalised, with base-2 log-sum-exp) and the guard word.
class DecodeWorkspace {
 public:
  DecodeWorkspace(int32_t max_items, int32_t max_seqs, int32_t n_q_heads, int32_t head_dim);
  ~DecodeWorkspace();
  DecodeWorkspace(const DecodeWorkspace&) = delete;
  DecodeWorkspace& operator=(const DecodeWorkspace&) = delete;

  // Copies the plan's work list to the device (asynchronously, through pinned memory).
  // Throws std::invalid_argument if the plan exceeds this workspace.
  void upload(const DecodePlan& plan, void* stream);
  const DecodePlan& plan() const { return plan_; }
  bool has_plan() const { return uploaded_; }
  int32_t max_items() const { return max_items_; }
  int32_t max_seqs() const { return max_seqs_; }
  int32_t n_q_heads() const { return n_q_heads_; }
  int32_t head_dim() const { return head_dim_; }

  // Waits for the stream, returns and clears the guard report.
  KvGuardReport take_guard_report(void* stream);

  // Device bytes a workspace of this size allocates.
  static int64_t device_bytes(int32_t max_items, int32_t max_seqs, int32_t n_q_heads, int32_t head_dim);

  // Device pointers, for the launchers.
  struct Device {
    DecodeWorkItem* items;
    int32_t* seq_item_begin;
    float* part_o;
    float* part_lse;
    int32_t* guard;  // [0]: tripped flag, [1]: first bad id
  };
  const Device& device() const { return dev_; }
  int32_t* guard_word() const { return dev_.guard; }

 private:
  int32_t max_items_, max_seqs_, n_q_heads_, head_dim_;
  void* block_ = nullptr;
  void* staging_ = nullptr;  // pinned host copy of the work list
  void* staged_event_ = nullptr;
  Device dev_{};
  DecodePlan plan_;
  bool uploaded_ = false;
};

// Runs decode attention for one layer with the plan uploaded into ws. Throws
// std::invalid_argument when the query, the pools and the plan disagree.
void paged_attention_decode(const KvPoolView& pools, const DecodeQuery& query, DecodeWorkspace& ws,
                            const DecodeOptions& opts, void* stream);

// Appends new tokens' K and V rows to the pools (the "quantising write"): token i's rows
// [n_kv_heads, head_dim] of k_new and v_new are converted to the pools' types (bf16/f16
// round to nearest even; Q8_0/Q4_0 with ggml's reference quantisers, bit-identical to
// kernels/common/quant.h) and stored at flat slot slots[i] = block * block_size + offset.
// A negative slot skips the token (padding). With bounds_check, a slot past the pool is not
// written and is reported through `guard` (DecodeWorkspace::guard_word(); may be null).
struct KvWrite {
  const void* k_new = nullptr;  // [n_tokens, n_kv_heads, head_dim], contiguous
  const void* v_new = nullptr;
  DType src_type = DType::bf16;  // f32, bf16 or f16
  int32_t n_tokens = 0;
  const int64_t* slots = nullptr;  // device [n_tokens]
  bool chained_launch = false;  // as DecodeOptions::chained_launch
};
void write_kv(const KvPoolView& pools, const KvWrite& w, bool bounds_check, int32_t* guard, void* stream);

}  // namespace ds::cuda

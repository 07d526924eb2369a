// Model: a Qwen3.5 / Qwen3.6 dense checkpoint loaded onto a Backend, with its caches.
//
// Usage by the engine:
//   auto backend = ds::kernels::cpu::make_cpu_backend();
//   auto model = ds::qwen35::Model::load(*backend, "path/to/checkpoint");
//   auto sizes = kvcache::size_pools(model->cache_geometry(), {.block_size = 16, .max_num_seqs = n, .budget_bytes = b});
//   model->allocate_cache(sizes);                    // the model owns the K/V and state memory
//   kvcache::BlockPool blocks(sizes.num_blocks, sizes.block_size);   // the engine owns the
//   kvcache::StatePool slots(sizes.num_slots, model->cache_geometry().state,   // bookkeeping
//                            model->state_zero_fn());
//   const Logits& out = model->forward(batch);       // rows in batch order
//
// forward() runs every layer over all rows of the batch at once: the projections as one
// GEMM over all rows, the attention and the DeltaNet recurrence per sequence. Logits are
// computed only for the rows asked for (final norm + lm_head on those rows alone).
//
// Recorded steps (kernels/step_graph.h; CUDA graphs): after enable_step_graphs, on a backend
// that records, a step whose sequences all bring the same short chunk (decode: 1 token;
// speculative verify: K + 1) with the same logit rows and row states is padded to the next
// recorded batch size and planned with fixed-width block tables (step_graphs.cpp). The first
// step of a shape runs eagerly (it sizes every buffer), the second is recorded, later ones
// replay the recording. Padding sequences run on a pad block and a pad state slot that
// allocate_cache reserves beyond the engine's pools. Every other step runs eagerly.
//
// Not thread-safe: one engine thread drives a model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kvcache/capacity.h"
#include "kvcache/host_cache.h"
#include "kvcache/state_pool.h"
#include "model/qwen35/config.h"
#include "model/qwen35/forward_batch.h"
#include "model/qwen35/lora_slots.h"
#include "model/qwen35/mtp.h"
#include "model/qwen35/weights.h"

namespace ds::qwen35 {

// The logits of one forward step, [rows, vocab] in the backend's memory, rows in batch
// order (sequence by sequence, token order within a chunk). Valid until the next forward.
// A device backend can sample from tensor() directly; host code copies rows out.
class Logits {
 public:
  int64_t rows() const { return tensor_.empty() ? 0 : tensor_.dim(0); }
  int64_t vocab() const { return vocab_; }
  const kernels::Tensor& tensor() const { return tensor_; }
  // Row-major [rows * vocab] f32 on the host.
  std::vector<float> to_host() const;
  // One row into dst (dst.size() == vocab()).
  void copy_row(int64_t row, std::span<float> dst) const;

 private:
  friend class Model;
  kernels::Backend* backend_ = nullptr;
  kernels::Tensor tensor_;
  int64_t vocab_ = 0;
};

// Debug hook: called during forward with every row's residual stream. index 0 = embedding
// output, index i (1..L) = output of layer i-1, index L+1 = the last layer's output after the
// final norm (what HF's output_hidden_states reports last). hidden is [rows, H].
using HiddenStateObserver = std::function<void(int index, const kernels::Tensor& hidden)>;

class Model {
 public:
  // Reads config.json, generation_config.json and the safetensors weights of dir onto
  // backend (which must outlive the model). Throws std::runtime_error with the file and
  // tensor at fault. options: load-time quantisation (weights.h).
  static std::unique_ptr<Model> load(kernels::Backend& backend, const std::filesystem::path& dir,
                                     const LoadOptions& options = {});
  // A model from an already loaded config and weights (tests).
  Model(kernels::Backend& backend, ModelConfig config, ModelWeights weights);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  // The uploaded weights (their types and sizes: what a benchmark reports as weight memory).
  const ModelWeights& weights() const { return weights_; }
  kernels::Backend& backend() const { return *backend_; }
  // The cache geometry on this backend (its K/V element type).
  kvcache::CacheGeometry cache_geometry() const;

  // Allocates the K/V pools (sizes.num_blocks blocks of sizes.block_size tokens per
  // full-attention layer, the MTP module's included) and sizes.num_slots + sizes.num_snapshots DeltaNet state slots
  // (the snapshots follow the running sequences' slots), replacing earlier ones, plus the pad
  // blocks and pad slot of recorded steps past them. The state is zeroed.
  void allocate_cache(const kvcache::PoolSizes& sizes);
  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  // State slots, snapshot slots included.
  int32_t num_slots() const { return num_slots_; }
  // Zeroes one slot's state in every DeltaNet layer; install it in the StatePool.
  void zero_state_slot(kvcache::SlotId slot);
  kvcache::StatePool::ZeroFn state_zero_fn();
  // Copies one slot's state (every DeltaNet layer, conv and recurrent) to another, on the
  // backend (device to device on a GPU).
  void copy_state_slot(kvcache::SlotId from, kvcache::SlotId to);

  // The prefix cache's host tier (host_tier.cpp; scheduler/forward_model.h): host memory from
  // the backend (alloc_host: pinned on a device) for as many blocks and state slots as `bytes`
  // holds, laid out as the pools (per attention layer a K and a V array of blocks, then the
  // conv and recurrent states of each slot), so consecutive blocks copy as one range. After
  // allocate_cache; replaces an earlier one. Then transfer_host queues block and slot copies
  // (kernels::Backend::transfer) and returns the ticket; ids outside the pools or the tier
  // are std::out_of_range, thrown before anything is queued.
  struct HostTierLayout {
    kvcache::HostTierSizes sizes;
    int64_t block_bytes = 0;
    int64_t state_bytes = 0;
  };
  HostTierLayout allocate_host_cache(int64_t bytes);
  uint64_t transfer_host(std::span<const kvcache::BlockTransfer> blocks, std::span<const kvcache::StateTransfer> states,
                         bool to_host);
  // A host entry's bytes (layout.block_bytes of a block, state_bytes of a snapshot), copied
  // out to `out` or in from `in` (one of them): host memory only, for the disk tier.
  void host_entry_bytes(bool block, int32_t id, uint8_t* out, const uint8_t* in) const;

  // One step over the batch. Throws std::invalid_argument for a malformed batch (empty
  // chunk, table too small, block or slot outside the pools, token id outside the vocab,
  // two chunks sharing a slot) before touching any cache.
  const Logits& forward(const ForwardBatch& batch);

  // The MTP module (mtp.h), when loaded (LoadOptions::mtp): one step over `batch`, writing
  // the module's K/V; logits for the chunks that ask, in batch order, valid until the next
  // forward_mtp. Throws std::invalid_argument for a malformed batch (as forward does, and a
  // hidden-state row outside its source) before touching any cache. The logits cover
  // mtp_vocab(batch.vocab) token ids from 0.
  bool has_mtp() const { return weights_.mtp.has_value(); }
  const Logits& forward_mtp(const MtpBatch& batch);
  int64_t mtp_vocab(int64_t requested) const;

  void set_hidden_state_observer(HiddenStateObserver observer) { observer_ = std::move(observer); }

  // LoRA adapters (lora_adapter.h, lora_slots.h): a pool of num_slots adapter slots of up to
  // max_rank, replacing an earlier pool (whose slots are gone). A chunk naming a slot
  // (SequenceChunk::lora_slot) runs with that slot's adapter on every projection it adapts:
  // y = W x + B (A x) per row, so one step mixes adapters and the base. The MTP module never
  // applies one (speculative decoding drafts with the base; the verifier's forward applies the
  // adapter). Steps with an adapter record like others (a shape of its own, which applies
  // every site, so that one recording serves any mix of adapters). forward() refuses a slot
  // outside the pool, or any slot before enable_lora.
  void enable_lora(int32_t num_slots, int64_t max_rank);
  const LoraSlots* lora_slots() const { return lora_.get(); }
  void install_lora(int32_t slot, const LoraAdapter& adapter);
  void clear_lora(int32_t slot);

  // Recorded steps (see above), after allocate_cache (which turns them off). A no-op where
  // the backend cannot record steps, unless `record` is false (steps padded, run eagerly:
  // what the tests compare with, on any backend).
  struct StepGraphOptions {
    // The longest sequence (cached plus new tokens) a recorded step may hold: the width of
    // its block tables, and the length its decode attention is planned for. Longer ones run
    // eagerly.
    int64_t max_seq_len = 4096;
    // The largest recorded batch (kernels::step_graph_batches).
    int32_t max_batch = kernels::kStepGraphMaxBatch;
    // false: steps are padded and planned as recorded ones but always run eagerly (what the
    // tests compare replays with, bit for bit).
    bool record = true;
  };
  void enable_step_graphs(const StepGraphOptions& options);
  void disable_step_graphs();
  bool step_graphs_enabled() const;
  // Steps so far by how they ran (benchmarks and tests).
  struct StepGraphStats {
    int64_t replayed = 0;  // a recording replayed (including the one just recorded)
    int64_t recorded = 0;  // recordings made
    int64_t padded_eager = 0;  // a shape's first step, or any with record = false
    int64_t failed = 0;    // recordings that failed (the shape then runs eagerly, padded)
  };
  StepGraphStats step_graph_stats() const;

  // Backend views of a slot's DeltaNet state in one DeltaNet layer (tests, debugging):
  // conv [conv_dim, Kc-1] and recurrent [Hv, dk, dv].
  kernels::Tensor conv_state(kvcache::SlotId slot, int64_t deltanet_layer) const;
  kernels::Tensor recurrent_state(kvcache::SlotId slot, int64_t deltanet_layer) const;

 private:
  struct Workspace;
  // The backend's plan of a step over these pools (which validates every index).
  std::unique_ptr<kernels::BatchPlan> make_plan(std::span<const SequenceChunk> seqs);
  // A gated full-attention mixer on ws.x, its K/V in pool `pool`, added into ws.h.
  // `layer`: the decoder layer, whose LoRA sites apply (-1: none, the MTP module's layer).
  void run_attention(const AttentionWeights& w, int64_t pool, int64_t layer, const kernels::BatchPlan& plan,
                     Workspace& ws);
  void run_deltanet(int64_t layer, const kernels::BatchPlan& plan, Workspace& ws);
  void run_mlp(const LayerWeights& L, int64_t layer, const kernels::BatchPlan& plan, Workspace& ws);
  // LoRA (lora_forward.cpp): whether any of this step's slots adapts (layer, t) (in a recorded
  // step: whether the pool has that site), and for sites of one input group (lora_slots.h) that
  // all read x, out[:, col, col + out_t) += each active site's update of x for every row with a
  // slot: one shrink for the group (when any of them is active), then one expand op for its
  // active sites (Backend::lora_expand_group: one launch on a GPU).
  struct LoraOutput {
    LoraTarget target;
    const kernels::Tensor& out;
    int64_t col = 0;
  };
  bool lora_active(int64_t layer, LoraTarget t) const;
  void apply_lora(int64_t layer, const kernels::Tensor& x, const kernels::BatchPlan& plan,
                  std::initializer_list<LoraOutput> outputs);
  // Checks the batch's LoRA slots and notes which this step uses.
  void note_lora_slots(std::span<const SequenceChunk> seqs);
  // x · stackedᵀ into outputs (the stacked weight's row ranges in order), fused or one GEMM
  // per output as the backend prefers (Backend::fused_projection_rows). A fused one-row step
  // replaces the outputs with views of the fused result (no copy): callers read `outputs`
  // afterwards, not the tensors they put in. The fused result starts proj_offset elements
  // into the workspace's buffer (a second stack of the same layer goes after the first).
  void project(const kernels::Tensor& x, const kernels::Tensor& stacked, std::span<kernels::Tensor> outputs,
               Workspace& ws, int64_t proj_offset = 0);
  Workspace& workspace(int64_t rows, int64_t logit_rows);
  // Embedding to logits over a planned step of T rows with R logit rows (into logits_).
  void run_step(const kernels::BatchPlan& plan, int64_t T, int64_t R);
  // The recorded-step path (step_graphs.cpp): false when the batch has no recorded shape.
  bool forward_recorded(const ForwardBatch& batch);

  kernels::Backend* backend_;
  ModelConfig config_;
  kernels::RopeParams rope_;  // the full-attention layers' RoPE (rope.h)
  ModelWeights weights_;
  int32_t num_blocks_ = 0;
  int32_t block_size_ = 0;
  int32_t num_slots_ = 0;
  std::vector<kernels::Tensor> k_pools_;  // per full-attention layer
  std::vector<kernels::Tensor> v_pools_;
  kernels::Tensor conv_state_;       // [slots, linear layers, conv_dim, Kc-1]
  kernels::Tensor recurrent_state_;  // [slots, linear layers, Hv, dk, dv]
  // The host tier (host_tier.cpp): its memory and where each array starts in it.
  struct HostTier {
    std::shared_ptr<void> memory;
    HostTierLayout layout;
    int64_t pool_block_bytes = 0;  // one block of one K or V pool
    std::vector<char*> pools;      // K then V of each attention layer: [blocks, pool_block_bytes]
    char* conv = nullptr;          // [slots, conv bytes per slot]
    char* recurrent = nullptr;     // [slots, recurrent bytes per slot]
  } host_;
  std::unique_ptr<Workspace> ws_;
  uint64_t ws_generation_ = 0;  // bumped when the workspace is reallocated (recordings hold it)
  struct StepGraphs;
  std::unique_ptr<StepGraphs> graphs_;
  int32_t pad_blocks_ = 0;  // blocks [num_blocks_, num_blocks_ + pad_blocks_) and slot
  int32_t pad_slot_ = -1;   // pad_slot_ (past num_slots_), for padding sequences (allocate_cache)
  Logits logits_;
  // This step's rows fed other embeddings (forward_batch.h): global row and rows.
  std::vector<std::pair<int64_t, kernels::Tensor>> overrides_;
  HiddenStateObserver observer_;
  std::unique_ptr<LoraSlots> lora_;
  std::vector<int32_t> step_lora_slots_;  // distinct slots of this step's chunks
  bool lora_every_site_ = false;          // a recorded step with adapters: apply every site
  kernels::Tensor lora_tmp_;              // [rows, max group rank] shrink output
  // The MTP module's buffers (mtp_forward.cpp) and the rows each hidden-state source holds.
  struct MtpWorkspace;
  std::unique_ptr<MtpWorkspace> mtp_ws_;
  int64_t target_rows_ = 0;
  int64_t module_rows_ = 0;
  Logits mtp_logits_;
};

}  // namespace ds::qwen35

// CudaBatchPlan: one step's indices (kernels/batch_plan.h), plus their device copies and the
// per-path work lists the CUDA backend's kernels read.
//
// Everything is packed into one pinned staging buffer and sent with one asynchronous copy on
// the backend's stream (PlanUploader), so a step costs one transfer however many ops read the
// plan. The device copies live in the uploader's buffer: a plan's pointers are valid until the
// next plan is made on the same backend (the model makes one per forward).
//
// Work lists:
//  * attention: the leading sequences with at most kDecodePathMaxTokens new tokens -- decodes,
//    speculative decoding's verify chunks -- go to the paged decode kernel, one query per row
//    (decode rows 0..n_decode-1), each row with its sequence's block table and the length up
//    to its own position (causal within the chunk); every other sequence (prefill chunks, and
//    anything behind one) to the prefill path.
//  * DeltaNet: sequences with at most ops::kDeltaNetRecurrentMaxTokens new tokens, or with row
//    states, run token by token (rec_seq_ids), longer ones in 64-token chunks (chunk_items,
//    chunk_seqs; a snapshot row restarts the chunks after it, ops::append_chunk_items).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/batch_plan.h"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda {

// A device buffer and a pinned host twin that one plan at a time is staged through.
class PlanUploader {
 public:
  PlanUploader() = default;
  ~PlanUploader();
  PlanUploader(const PlanUploader&) = delete;
  PlanUploader& operator=(const PlanUploader&) = delete;

  // Host staging memory of at least `bytes`, free to overwrite (the previous upload has left it).
  uint8_t* stage(size_t bytes, void* stream);
  // Copies the first `bytes` of the staging memory to the device buffer; returns its address.
  uint8_t* upload(size_t bytes, void* stream);
  // How many times the device buffer was reallocated (recorded steps hold its address).
  uint64_t reallocations() const { return reallocations_; }

 private:
  uint8_t* host_ = nullptr;
  uint8_t* dev_ = nullptr;
  size_t capacity_ = 0;
  void* event_ = nullptr;
  uint64_t reallocations_ = 0;
};

class CudaBatchPlan final : public kernels::BatchPlan {
 public:
  // The longest chunk that attends through the decode kernel. Such a chunk reads its
  // sequence's K/V once per row; the prefill path gathers them once but costs launches per
  // sequence and KV head, which dominates for verify chunks of many sequences
  // (docs/bench-log, "Speculative decoding").
  static constexpr int64_t kDecodePathMaxTokens = 16;

  CudaBatchPlan(const kernels::BatchDesc& desc, PlanUploader& uploader, void* stream, uint64_t generation);

  uint64_t generation = 0;  // distinguishes plans of one backend (the decode plan is made once per plan)

  // Device copies.
  const int32_t* d_token_ids = nullptr;
  const int32_t* d_positions = nullptr;  // BatchPlan::rope_positions(): what RoPE reads without M-RoPE
  const int64_t* d_kv_slots = nullptr;
  const int32_t* d_logit_rows = nullptr;
  const ops::DevSeq* d_seqs = nullptr;
  const int32_t* d_table = nullptr;     // [n_seqs, table_stride]
  const int32_t* d_seq_lens = nullptr;  // [n_seqs]: n_cached + n_tokens
  const int32_t* d_rec_seq_ids = nullptr;
  const ops::DeltaNetChunkItem* d_chunk_items = nullptr;
  const ops::DeltaNetChunkSeq* d_chunk_seqs = nullptr;
  const int32_t* d_row_state_slots = nullptr;  // BatchPlan::row_state_slots()
  const ops::DevSnapshot* d_snapshots = nullptr;  // BatchPlan::snapshot_rows()
  // The decode kernel's view, per decode row: [n_decode, table_stride] and seq_lens (d_table
  // and d_seq_lens themselves when every decode-path sequence has one row).
  const int32_t* d_decode_table = nullptr;
  const int32_t* d_decode_lens = nullptr;
  // M-RoPE positions, 3 per row (BatchPlan::mrope_positions; null when the step has none).
  const int32_t* d_mrope = nullptr;
  // LoRA: the rows with an adapter grouped by slot, in tiles of at most ops::kLoraTileRows
  // rows of one slot (ops::LoraTile over d_lora_rows; null when no row has one). A plan of a
  // recorded step (table_blocks > 0) pads the tiles with empty ones to one per row, so the
  // kernels' grid is the same for every step of the shape.
  const ops::LoraTile* d_lora_tiles = nullptr;
  const int32_t* d_lora_rows = nullptr;
  int32_t n_lora_tiles = 0;

  int32_t table_stride = 0;
  int32_t max_block_id = -1;              // largest block id of the step (pool bound checks)
  int32_t n_decode = 0;                   // decode rows (of the leading short sequences)
  std::vector<int32_t> decode_lens;       // their seq_lens, on the host (decode planning)
  // > 0 (a plan with BatchDesc::table_blocks, kernels/step_graph.h): the decode kernel's work
  // list is planned as if every decode row were this long (a full table row) and is the same
  // for every step of the shape; chunks past a row's real length are empty.
  int32_t decode_plan_len = 0;
  std::vector<int32_t> prefill_seqs;      // sequences on the prefill attention path
  int32_t n_rec = 0, n_chunk_items = 0, n_chunk_seqs = 0;
};

}  // namespace ds::cuda

// CudaBatchPlan: packing a step's indices into one staged upload, and the work lists.
#include "kernels/cuda/cuda_plan.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace ds::cuda {
namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("cuda backend: plan: ") + what + ": " + cudaGetErrorString(e));
}

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// The LoRA tiles (cuda_plan.h): rows with a slot, stably grouped by slot, cut into tiles of at
// most kLoraTileRows; `fixed` pads the rows to one per row of the step and the tiles to one
// per row (a tile has at least one row, so no step has more).
void plan_lora_tiles(const std::vector<int32_t>& slots, bool fixed, std::vector<int32_t>& rows,
                     std::vector<ops::LoraTile>& tiles) {
  std::vector<int32_t> order;
  for (size_t r = 0; r < slots.size(); ++r)
    if (slots[r] >= 0) order.push_back(static_cast<int32_t>(r));
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return slots[static_cast<size_t>(x)] < slots[static_cast<size_t>(y)];
  });
  rows = order;
  for (size_t i = 0; i < order.size();) {
    const int32_t slot = slots[static_cast<size_t>(order[i])];
    size_t n = 1;
    while (i + n < order.size() && n < static_cast<size_t>(ops::kLoraTileRows) &&
           slots[static_cast<size_t>(order[i + n])] == slot)
      ++n;
    tiles.push_back({static_cast<int32_t>(i), static_cast<int32_t>(n), slot, 0});
    i += n;
  }
  if (fixed) {
    rows.resize(slots.size(), 0);
    tiles.resize(slots.size(), ops::LoraTile{0, 0, 0, 0});
  }
}

}  // namespace

PlanUploader::~PlanUploader() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  if (host_) cudaFreeHost(host_);
  if (dev_) cudaFree(dev_);
}

uint8_t* PlanUploader::stage(size_t bytes, void* stream) {
  if (!event_) {
    cudaEvent_t ev;
    ok(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    event_ = ev;
  }
  ok(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "waiting for the previous upload");
  if (bytes > capacity_) {
    // The old device buffer may still be read by queued kernels.
    ok(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
    const size_t cap = std::max<size_t>(bytes * 2, 64 << 10);
    if (host_) cudaFreeHost(host_);
    if (dev_) cudaFree(dev_);
    host_ = nullptr;
    dev_ = nullptr;
    capacity_ = 0;
    ok(cudaMallocHost(reinterpret_cast<void**>(&host_), cap), "cudaMallocHost");
    ok(cudaMalloc(reinterpret_cast<void**>(&dev_), cap), "cudaMalloc");
    capacity_ = cap;
    ++reallocations_;
  }
  return host_;
}

uint8_t* PlanUploader::upload(size_t bytes, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (bytes) ok(cudaMemcpyAsync(dev_, host_, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  ok(cudaEventRecord(static_cast<cudaEvent_t>(event_), s), "cudaEventRecord");
  return dev_;
}

CudaBatchPlan::CudaBatchPlan(const kernels::BatchDesc& desc, PlanUploader& uploader, void* stream, uint64_t gen)
    : BatchPlan(desc), generation(gen) {
  const auto& sq = seqs();
  const auto n_seqs = static_cast<int32_t>(sq.size());
  const int64_t rows = num_rows();
  if (rows > std::numeric_limits<int32_t>::max() / 2)
    throw std::invalid_argument("forward batch: too many rows for the cuda backend");
  for (int64_t p : positions())
    if (p > std::numeric_limits<int32_t>::max() - 1)
      throw std::invalid_argument("forward batch: position beyond the cuda backend's 32-bit positions");
  for (const auto* list : {&rope_positions(), &mrope_positions()})
    for (int64_t p : *list)
      if (p < std::numeric_limits<int32_t>::min() || p > std::numeric_limits<int32_t>::max())
        throw std::invalid_argument("forward batch: RoPE position beyond the cuda backend's 32-bit positions");

  for (int32_t id : block_ids()) max_block_id = std::max(max_block_id, id);
  for (const Seq& s : sq) table_stride = std::max<int32_t>(table_stride, static_cast<int32_t>(s.n_blocks));
  table_stride = std::max<int32_t>(table_stride, 1);
  if (table_blocks() > 0) {
    table_stride = table_blocks();  // BatchPlan checked that every sequence fits
    if (int64_t{table_stride} * block_size() > std::numeric_limits<int32_t>::max())
      throw std::invalid_argument("forward batch: table width beyond the cuda backend's 32-bit lengths");
    decode_plan_len = table_stride * block_size();
  }
  int32_t n_decode_seqs = 0;
  bool multi_row = false;  // a decode-path sequence with several rows: the table goes per row
  while (n_decode_seqs < n_seqs && sq[static_cast<size_t>(n_decode_seqs)].n_tokens <= kDecodePathMaxTokens) {
    const Seq& q = sq[static_cast<size_t>(n_decode_seqs)];
    for (int64_t t = 0; t < q.n_tokens; ++t) decode_lens.push_back(static_cast<int32_t>(q.n_cached + t + 1));
    multi_row = multi_row || q.n_tokens > 1;
    ++n_decode_seqs;
  }
  n_decode = static_cast<int32_t>(decode_lens.size());
  for (int32_t s = n_decode_seqs; s < n_seqs; ++s) prefill_seqs.push_back(s);

  std::vector<ops::DevSnapshot> snapshots;
  for (const kernels::SnapshotRow& sr : snapshot_rows()) snapshots.push_back({static_cast<int32_t>(sr.row), sr.slot});
  std::vector<int32_t> rec;
  std::vector<ops::DeltaNetChunkItem> items;
  std::vector<ops::DeltaNetChunkSeq> chunk_seqs;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const Seq& q = sq[static_cast<size_t>(s)];
    if (q.n_tokens <= ops::kDeltaNetRecurrentMaxTokens || q.n_row_states > 0) {
      rec.push_back(s);
      continue;
    }
    chunk_seqs.push_back(ops::append_chunk_items(items, s, static_cast<int32_t>(q.first_row),
                                                 static_cast<int32_t>(q.n_tokens), snapshots.data() + q.snapshot_begin,
                                                 static_cast<int32_t>(q.n_snapshots)));
  }
  n_rec = static_cast<int32_t>(rec.size());
  n_chunk_items = static_cast<int32_t>(items.size());
  n_chunk_seqs = static_cast<int32_t>(chunk_seqs.size());

  // Layout of the packed buffer.
  size_t off = 0;
  auto place = [&](size_t bytes) {
    const size_t at = off;
    off = align16(off + bytes);
    return at;
  };
  const size_t o_tok = place(static_cast<size_t>(rows) * 4);
  const size_t o_pos = place(static_cast<size_t>(rows) * 4);
  const size_t o_kv = place(static_cast<size_t>(rows) * 8);
  const size_t o_logit = place(logit_rows().size() * 4);
  const size_t o_seqs = place(static_cast<size_t>(n_seqs) * sizeof(ops::DevSeq));
  const size_t o_table = place(static_cast<size_t>(n_seqs) * static_cast<size_t>(table_stride) * 4);
  const size_t o_lens = place(static_cast<size_t>(n_seqs) * 4);
  const size_t o_rec = place(rec.size() * 4);
  const size_t o_items = place(items.size() * sizeof(ops::DeltaNetChunkItem));
  const size_t o_cseqs = place(chunk_seqs.size() * sizeof(ops::DeltaNetChunkSeq));
  const size_t o_rstates = place(row_state_slots().size() * 4);
  const size_t o_snaps = place(snapshots.size() * sizeof(ops::DevSnapshot));
  const size_t n_row_table = multi_row ? static_cast<size_t>(n_decode) : 0;
  const size_t o_dtable = place(n_row_table * static_cast<size_t>(table_stride) * 4);
  const size_t o_dlens = place(n_row_table * 4);
  const size_t o_mrope = place(mrope_positions().size() * 4);
  const bool has_lora = max_lora_slot() >= 0;
  std::vector<int32_t> lora_rows;
  std::vector<ops::LoraTile> lora_tiles;
  if (has_lora) plan_lora_tiles(row_lora_slots(), table_blocks() > 0, lora_rows, lora_tiles);
  const size_t o_lora_rows = place(lora_rows.size() * 4);
  const size_t o_lora_tiles = place(lora_tiles.size() * sizeof(ops::LoraTile));
  const size_t total = std::max<size_t>(off, 16);

  uint8_t* h = uploader.stage(total, stream);
  std::memcpy(h + o_tok, token_ids().data(), static_cast<size_t>(rows) * 4);
  auto* pos = reinterpret_cast<int32_t*>(h + o_pos);
  for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(rope_positions()[static_cast<size_t>(r)]);
  std::memcpy(h + o_kv, kv_slots().data(), static_cast<size_t>(rows) * 8);
  auto* lr = reinterpret_cast<int32_t*>(h + o_logit);
  for (size_t i = 0; i < logit_rows().size(); ++i) lr[i] = static_cast<int32_t>(logit_rows()[i]);
  auto* ds = reinterpret_cast<ops::DevSeq*>(h + o_seqs);
  auto* table = reinterpret_cast<int32_t*>(h + o_table);
  auto* lens = reinterpret_cast<int32_t*>(h + o_lens);
  for (int32_t s = 0; s < n_seqs; ++s) {
    const Seq& q = sq[static_cast<size_t>(s)];
    ds[s] = {static_cast<int32_t>(q.first_row), static_cast<int32_t>(q.n_tokens),      static_cast<int32_t>(q.n_cached),
             q.state_slot,                         static_cast<int32_t>(q.row_state_begin), static_cast<int32_t>(q.n_row_states),
             static_cast<int32_t>(q.snapshot_begin), static_cast<int32_t>(q.n_snapshots)};
    int32_t* trow = table + static_cast<int64_t>(s) * table_stride;
    for (int32_t b = 0; b < table_stride; ++b)
      trow[b] = b < q.n_blocks ? block_ids()[static_cast<size_t>(q.block_begin + b)] : 0;
    lens[s] = static_cast<int32_t>(q.n_cached + q.n_tokens);
  }
  if (!rec.empty()) std::memcpy(h + o_rec, rec.data(), rec.size() * 4);
  if (!items.empty()) std::memcpy(h + o_items, items.data(), items.size() * sizeof(ops::DeltaNetChunkItem));
  if (!chunk_seqs.empty()) std::memcpy(h + o_cseqs, chunk_seqs.data(), chunk_seqs.size() * sizeof(ops::DeltaNetChunkSeq));
  if (has_row_states()) std::memcpy(h + o_rstates, row_state_slots().data(), row_state_slots().size() * 4);
  if (!snapshots.empty()) std::memcpy(h + o_snaps, snapshots.data(), snapshots.size() * sizeof(ops::DevSnapshot));
  if (multi_row) {
    // Row r of a decode-path chunk is a query at position n_cached + r over its sequence's
    // table: its own table row, and seq_len n_cached + r + 1 (causal within the chunk).
    auto* dt = reinterpret_cast<int32_t*>(h + o_dtable);
    for (int32_t s = 0, r = 0; s < n_decode_seqs; ++s)
      for (int64_t t = 0; t < sq[static_cast<size_t>(s)].n_tokens; ++t, ++r)
        std::memcpy(dt + static_cast<int64_t>(r) * table_stride, table + static_cast<int64_t>(s) * table_stride,
                    static_cast<size_t>(table_stride) * 4);
    std::memcpy(h + o_dlens, decode_lens.data(), decode_lens.size() * 4);
  }

  auto* mrope = reinterpret_cast<int32_t*>(h + o_mrope);
  for (size_t i = 0; i < mrope_positions().size(); ++i) mrope[i] = static_cast<int32_t>(mrope_positions()[i]);

  if (has_lora) {
    std::memcpy(h + o_lora_rows, lora_rows.data(), lora_rows.size() * 4);
    std::memcpy(h + o_lora_tiles, lora_tiles.data(), lora_tiles.size() * sizeof(ops::LoraTile));
  }

  uint8_t* d = uploader.upload(total, stream);
  d_token_ids = reinterpret_cast<const int32_t*>(d + o_tok);
  d_positions = reinterpret_cast<const int32_t*>(d + o_pos);
  d_kv_slots = reinterpret_cast<const int64_t*>(d + o_kv);
  d_logit_rows = reinterpret_cast<const int32_t*>(d + o_logit);
  d_seqs = reinterpret_cast<const ops::DevSeq*>(d + o_seqs);
  d_table = reinterpret_cast<const int32_t*>(d + o_table);
  d_seq_lens = reinterpret_cast<const int32_t*>(d + o_lens);
  d_rec_seq_ids = reinterpret_cast<const int32_t*>(d + o_rec);
  d_chunk_items = reinterpret_cast<const ops::DeltaNetChunkItem*>(d + o_items);
  d_chunk_seqs = reinterpret_cast<const ops::DeltaNetChunkSeq*>(d + o_cseqs);
  d_row_state_slots = reinterpret_cast<const int32_t*>(d + o_rstates);
  d_snapshots = reinterpret_cast<const ops::DevSnapshot*>(d + o_snaps);
  d_decode_table = multi_row ? reinterpret_cast<const int32_t*>(d + o_dtable) : d_table;
  d_decode_lens = multi_row ? reinterpret_cast<const int32_t*>(d + o_dlens) : d_seq_lens;
  d_mrope = has_mrope() ? reinterpret_cast<const int32_t*>(d + o_mrope) : nullptr;
  d_lora_rows = has_lora ? reinterpret_cast<const int32_t*>(d + o_lora_rows) : nullptr;
  d_lora_tiles = has_lora ? reinterpret_cast<const ops::LoraTile*>(d + o_lora_tiles) : nullptr;
  n_lora_tiles = static_cast<int32_t>(lora_tiles.size());
}

}  // namespace ds::cuda

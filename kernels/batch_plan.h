// BatchPlan: the indices of one forward step, checked once and laid out per row.
//
// A step runs several sequences at once, each with a span of new tokens: a decode token or a
// prefill chunk of any length. Their rows sit back to back in the step's activations
// ([num_rows, ...]). The ops that need to know which row belongs to which sequence (RoPE,
// K/V writes, paged attention, the DeltaNet conv and recurrence, the logits gather) read
// this plan instead of host structures, so a device backend can upload it once per step
// (subclass it and add device copies in Backend::plan).
//
// The constructor validates everything an op would otherwise index blindly: token ids
// within the vocabulary, each sequence's block table big enough for its new tokens, block
// ids and state slots inside the pools, no two rows writing the same K/V slot or sharing a
// state slot, logit rows in range. A bad batch is an std::invalid_argument, never a stray
// write.
//
// Row states (speculative decoding's verify chunks, scheduler/engine.h): a chunk may name
// state slots that receive its DeltaNet state after each of its first rows, row_state_slots[i]
// the state after row i (the conv window and the recurrent matrix, every layer), besides the
// state after its last row left in state_slot as always. Accepting the first i + 1 tokens of
// the chunk then means continuing from row_state_slots[i]: nothing is recomputed. Those slots
// are fully overwritten, and may not be any sequence's state slot or another row's.
//
// Snapshot rows (prefix caching's state snapshots, scheduler/scheduler.h): a prefill chunk may
// name rows (ascending, not its last) and slots that receive the state after them, so the
// state at block boundaries inside the chunk is kept without ending the chunk there (which
// would cost the request a step). Same rules for the slots as for row states; a chunk has row
// states or snapshot rows, not both.
//
// M-RoPE (Qwen's multimodal rotary positions; docs/vision.md): a chunk of a prompt with images
// names the (t, h, w) positions of its first rows, three per row; its other rows, and every
// row of a chunk that names none, sit at position + rope_delta on all three axes (the delta a
// prompt's images leave carries into its decode). A plan where no chunk names any has no
// M-RoPE positions: RoPE reads rope_positions() (position + rope_delta, one axis, which is
// M-RoPE with three equal axes), so the decode steps of an image prompt are shaped like text
// ones and can be recorded.
//
// Recorded steps (kernels/step_graph.h) need a plan whose layout depends only on the step's
// shape: BatchDesc::table_blocks fixes every sequence's block-table row to one width, and the
// last BatchDesc::n_padding sequences pad the batch to a recorded batch size. Padding
// sequences may share state slots and K/V slots with each other (they all point at the pad
// slot and pad blocks the model reserves), never with the real sequences; what they write
// is garbage nobody reads, and their logits are ignored.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds::kernels {

// A snapshot row of a chunk: the state after row `row` also goes to `slot`.
struct SnapshotRow {
  int64_t row = 0;
  int32_t slot = -1;
};

// A sequence's chunk of a step: the one description of it in every layer. The scheduler
// plans it (scheduler/scheduler.h), the model runs it (model/qwen35/forward_batch.h), the
// plan below lays it out for the kernels. Plain data: the spans point into the caller's
// memory, which must outlive the forward.
struct SequenceChunk {
  std::span<const int32_t> tokens;     // new token ids (>= 1); rows follow the previous chunk's
  int64_t n_cached = 0;                // tokens already cached = position of the first new token
  std::span<const int32_t> block_ids;  // its block table; capacity >= n_cached + tokens.size()
  int32_t state_slot = -1;             // its DeltaNet state slot
  // Logits for the chunk's last `logit_rows` rows: 0 = none (a prefill chunk that does not
  // reach the prompt's end), 1 = its last row (what sampling needs), up to every row (a
  // verify chunk, reference checks).
  int32_t logit_rows = 0;
  std::span<const int32_t> row_state_slots = {};  // < n_tokens() slots: the state after rows 0, 1, ...
  std::span<const SnapshotRow> snapshot_rows = {};  // rows ascending, each < n_tokens() - 1
  std::span<const int64_t> mrope_positions = {};  // (t, h, w) of the first rows, 3 per row (see above)
  int64_t rope_delta = 0;
  // The LoRA adapter slot every row of the chunk applies (Backend::lora_shrink); -1: none
  // (the base model). Padding sequences have none.
  int32_t lora_slot = -1;

  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
};

// One step: its chunks (token ids and logit rows come from them, in order) and the pools'.
struct BatchDesc {
  std::span<const SequenceChunk> seqs;
  int32_t block_size = 0;
  int32_t num_blocks = 0;  // size of the K/V pools (block ids must be below)
  int32_t num_slots = 0;   // size of the state pool (slots must be below)
  int64_t vocab_size = 0;  // token ids must be below
  // Recorded steps (see above): 0 = each table row as wide as the step's longest.
  int32_t table_blocks = 0;
  int32_t n_padding = 0;  // the trailing sequences that only pad the batch
};

class BatchPlan {
 public:
  struct Seq {
    int64_t first_row = 0;
    int64_t n_tokens = 0;
    int64_t n_cached = 0;
    int32_t state_slot = 0;
    int64_t block_begin = 0;  // its ids in block_ids()[block_begin, block_begin + n_blocks)
    int64_t n_blocks = 0;
    // Its row-state slots: row_state_slots()[row_state_begin, row_state_begin + n_row_states).
    int64_t row_state_begin = 0;
    int64_t n_row_states = 0;
    // Its snapshot rows: snapshot_rows()[snapshot_begin, snapshot_begin + n_snapshots).
    int64_t snapshot_begin = 0;
    int64_t n_snapshots = 0;
  };

  explicit BatchPlan(const BatchDesc& d)
      : block_size_(d.block_size), table_blocks_(d.table_blocks), n_padding_(d.n_padding) {
    auto fail = [](const std::string& m) { throw std::invalid_argument("forward batch: " + m); };
    if (d.block_size <= 0) fail("block size must be positive");
    if (d.seqs.empty()) fail("no sequences");
    if (d.table_blocks < 0) fail("negative table width");
    if (d.n_padding < 0 || static_cast<size_t>(d.n_padding) >= d.seqs.size())
      fail("padding of " + std::to_string(d.n_padding) + " sequences in a batch of " + std::to_string(d.seqs.size()) +
           " (at least one real sequence)");
    const size_t n_real = d.seqs.size() - static_cast<size_t>(d.n_padding);
    int64_t rows = 0, real_rows = 0;
    std::vector<int32_t> slots, pad_slots;
    for (size_t s = 0; s < d.seqs.size(); ++s) {
      const SequenceChunk& in = d.seqs[s];
      const bool padding = s >= n_real;
      std::vector<int32_t>& seq_slots = padding ? pad_slots : slots;
      const std::string who = "sequence " + std::to_string(s);
      const int64_t n_tokens = in.n_tokens();
      if (n_tokens < 1) fail(who + " has no new tokens");
      if (in.logit_rows < 0 || in.logit_rows > n_tokens)
        fail(who + " asks for " + std::to_string(in.logit_rows) + " logit rows of " + std::to_string(n_tokens) +
             " tokens");
      if (in.n_cached < 0) fail(who + " has a negative cached length");
      if (in.state_slot < 0 || in.state_slot >= d.num_slots)
        fail(who + " uses state slot " + std::to_string(in.state_slot) + " outside [0, " +
             std::to_string(d.num_slots) + ")");
      const int64_t end = in.n_cached + n_tokens;
      if (static_cast<int64_t>(in.block_ids.size()) * d.block_size < end)
        fail(who + " needs room for " + std::to_string(end) + " tokens but its block table holds " +
             std::to_string(in.block_ids.size()) + " blocks of " + std::to_string(d.block_size));
      Seq q;
      q.first_row = rows;
      q.n_tokens = n_tokens;
      q.n_cached = in.n_cached;
      q.state_slot = in.state_slot;
      q.block_begin = static_cast<int64_t>(block_ids_.size());
      q.n_blocks = (end + d.block_size - 1) / d.block_size;  // blocks past the end are not read
      if (d.table_blocks > 0 && q.n_blocks > d.table_blocks)
        fail(who + " needs " + std::to_string(q.n_blocks) + " blocks, more than the table width " +
             std::to_string(d.table_blocks));
      for (int64_t b = 0; b < q.n_blocks; ++b) {
        const int32_t id = in.block_ids[static_cast<size_t>(b)];
        if (id < 0 || id >= d.num_blocks)
          fail(who + " has block id " + std::to_string(id) + " outside the pool of " +
               std::to_string(d.num_blocks));
        block_ids_.push_back(id);
        max_block_id_ = std::max(max_block_id_, id);
      }
      if (in.mrope_positions.size() % 3 != 0 || static_cast<int64_t>(in.mrope_positions.size()) > 3 * n_tokens)
        fail(who + " names " + std::to_string(in.mrope_positions.size()) + " M-RoPE positions for " +
             std::to_string(n_tokens) + " rows (3 a row, at most all rows)");
      if (!in.mrope_positions.empty()) has_mrope_ = true;
      if (in.lora_slot < -1) fail(who + " has LoRA slot " + std::to_string(in.lora_slot) + " (-1 = none)");
      if (padding && in.lora_slot >= 0) fail(who + " pads the batch but names a LoRA slot");
      max_lora_slot_ = std::max(max_lora_slot_, in.lora_slot);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t pos = in.n_cached + t;
        const int32_t id = in.tokens[static_cast<size_t>(t)];
        if (id < 0 || id >= d.vocab_size)
          fail("token id " + std::to_string(id) + " outside the vocabulary of " + std::to_string(d.vocab_size));
        token_ids_.push_back(id);
        positions_.push_back(pos);
        rope_positions_.push_back(pos + in.rope_delta);
        const int64_t block = in.block_ids[static_cast<size_t>(pos / d.block_size)];
        kv_slots_.push_back(block * d.block_size + pos % d.block_size);
        row_seq_.push_back(static_cast<int32_t>(s));
        row_lora_slots_.push_back(in.lora_slot);
      }
      for (int64_t r = rows + n_tokens - in.logit_rows; r < rows + n_tokens; ++r) logit_rows_.push_back(r);
      if (static_cast<int64_t>(in.row_state_slots.size()) >= n_tokens)
        fail(who + " asks for the state after " + std::to_string(in.row_state_slots.size()) +
             " rows of a chunk of " + std::to_string(n_tokens) + " (at most n_tokens - 1)");
      q.row_state_begin = static_cast<int64_t>(row_state_slots_.size());
      q.n_row_states = static_cast<int64_t>(in.row_state_slots.size());
      for (int32_t slot : in.row_state_slots) {
        if (slot < 0 || slot >= d.num_slots)
          fail(who + " has row-state slot " + std::to_string(slot) + " outside [0, " + std::to_string(d.num_slots) +
               ")");
        row_state_slots_.push_back(slot);
        seq_slots.push_back(slot);
        max_state_slot_ = std::max(max_state_slot_, slot);
      }
      if (!in.snapshot_rows.empty() && !in.row_state_slots.empty())
        fail(who + " has both row states and snapshot rows");
      q.snapshot_begin = static_cast<int64_t>(snapshot_rows_.size());
      q.n_snapshots = static_cast<int64_t>(in.snapshot_rows.size());
      int64_t previous = -1;
      for (const SnapshotRow& sr : in.snapshot_rows) {
        if (sr.row <= previous || sr.row >= n_tokens - 1)
          fail(who + " asks for a snapshot after row " + std::to_string(sr.row) + " of a chunk of " +
               std::to_string(n_tokens) + " (rows ascending, 0 .. n_tokens - 2)");
        if (sr.slot < 0 || sr.slot >= d.num_slots)
          fail(who + " has snapshot slot " + std::to_string(sr.slot) + " outside [0, " + std::to_string(d.num_slots) +
               ")");
        previous = sr.row;
        snapshot_rows_.push_back(sr);
        seq_slots.push_back(sr.slot);
        max_state_slot_ = std::max(max_state_slot_, sr.slot);
      }
      seqs_.push_back(q);
      seq_slots.push_back(in.state_slot);
      max_state_slot_ = std::max(max_state_slot_, in.state_slot);
      rows += n_tokens;
      if (!padding) real_rows = rows;
    }
    if (has_mrope_) {
      mrope_positions_.reserve(static_cast<size_t>(3 * rows));
      for (const SequenceChunk& in : d.seqs) {
        const auto given = static_cast<int64_t>(in.mrope_positions.size() / 3);
        mrope_positions_.insert(mrope_positions_.end(), in.mrope_positions.begin(), in.mrope_positions.end());
        for (int64_t t = given; t < in.n_tokens(); ++t)
          mrope_positions_.insert(mrope_positions_.end(), 3, in.n_cached + t + in.rope_delta);
      }
    }

    std::sort(slots.begin(), slots.end());
    if (std::adjacent_find(slots.begin(), slots.end()) != slots.end())
      fail("two sequences share a state slot (row-state slots included)");
    std::vector<int64_t> kv(kv_slots_.begin(), kv_slots_.begin() + real_rows);
    std::sort(kv.begin(), kv.end());
    if (std::adjacent_find(kv.begin(), kv.end()) != kv.end())
      fail("two new tokens would be written to the same K/V slot");
    for (int32_t slot : pad_slots)
      if (std::binary_search(slots.begin(), slots.end(), slot))
        fail("a padding sequence uses state slot " + std::to_string(slot) + " of a real sequence");
    for (int64_t r = real_rows; r < rows; ++r)
      if (std::binary_search(kv.begin(), kv.end(), kv_slots_[static_cast<size_t>(r)]))
        fail("a padding row would overwrite a real sequence's K/V slot");
  }
  virtual ~BatchPlan() = default;
  BatchPlan(const BatchPlan&) = delete;
  BatchPlan& operator=(const BatchPlan&) = delete;

  int64_t num_rows() const { return static_cast<int64_t>(token_ids_.size()); }
  int32_t block_size() const { return block_size_; }
  // BatchDesc::table_blocks and n_padding.
  int32_t table_blocks() const { return table_blocks_; }
  int32_t n_padding() const { return n_padding_; }
  const std::vector<Seq>& seqs() const { return seqs_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  // Per row: absolute position, K/V pool row (block * block_size + offset), sequence index.
  const std::vector<int64_t>& positions() const { return positions_; }
  const std::vector<int64_t>& kv_slots() const { return kv_slots_; }
  // Per row: the RoPE position without M-RoPE, position + its chunk's rope_delta.
  const std::vector<int64_t>& rope_positions() const { return rope_positions_; }
  // M-RoPE (see above): whether any chunk names (t, h, w) positions, and then every row's, 3
  // per row.
  bool has_mrope() const { return has_mrope_; }
  const std::vector<int64_t>& mrope_positions() const { return mrope_positions_; }
  const std::vector<int32_t>& row_seq() const { return row_seq_; }
  // Every sequence's block ids, concatenated (see Seq::block_begin).
  const std::vector<int32_t>& block_ids() const { return block_ids_; }
  const std::vector<int64_t>& logit_rows() const { return logit_rows_; }
  // Every sequence's row-state slots, concatenated (see Seq::row_state_begin).
  const std::vector<int32_t>& row_state_slots() const { return row_state_slots_; }
  bool has_row_states() const { return !row_state_slots_.empty(); }
  // Every sequence's snapshot rows, concatenated (see Seq::snapshot_begin).
  const std::vector<SnapshotRow>& snapshot_rows() const { return snapshot_rows_; }
  // The largest block id and state slot the step touches (-1: none), for the ops' pool checks.
  int32_t max_block_id() const { return max_block_id_; }
  int32_t max_state_slot() const { return max_state_slot_; }
  // Per row: its chunk's LoRA slot (-1: none), and the largest (-1: no row has one).
  const std::vector<int32_t>& row_lora_slots() const { return row_lora_slots_; }
  int32_t max_lora_slot() const { return max_lora_slot_; }

 private:
  int32_t block_size_;
  int32_t table_blocks_ = 0;
  int32_t n_padding_ = 0;
  int32_t max_block_id_ = -1;
  int32_t max_state_slot_ = -1;
  int32_t max_lora_slot_ = -1;
  bool has_mrope_ = false;
  std::vector<Seq> seqs_;
  std::vector<int32_t> token_ids_;
  std::vector<int64_t> positions_;
  std::vector<int64_t> rope_positions_;
  std::vector<int64_t> kv_slots_;
  std::vector<int64_t> mrope_positions_;
  std::vector<int32_t> row_seq_;
  std::vector<int32_t> row_lora_slots_;
  std::vector<int32_t> block_ids_;
  std::vector<int64_t> logit_rows_;
  std::vector<int32_t> row_state_slots_;
  std::vector<SnapshotRow> snapshot_rows_;
};

}  // namespace ds::kernels

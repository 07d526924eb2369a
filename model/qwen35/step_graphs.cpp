// Recorded steps of the Qwen3.5 forward (model.h; kernels/step_graph.h): which steps have a
// recorded shape, their padding, and when a shape runs eagerly, is recorded or is replayed.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/qwen35/model_workspace.h"

namespace ds::qwen35 {

void Model::enable_step_graphs(const StepGraphOptions& options) {
  if (options.record && !backend_->can_record_steps()) return;
  if (options.max_seq_len < 1 || options.max_batch < 1)
    throw std::invalid_argument("enable_step_graphs: max_seq_len and max_batch must be positive");
  if (block_size_ <= 0) throw std::logic_error("enable_step_graphs: allocate_cache() has not been called");
  graphs_ = std::make_unique<StepGraphs>();
  graphs_->options = options;
  graphs_->table_blocks = static_cast<int32_t>((options.max_seq_len + block_size_ - 1) / block_size_);
}

void Model::disable_step_graphs() { graphs_.reset(); }

bool Model::step_graphs_enabled() const { return graphs_ != nullptr; }

Model::StepGraphStats Model::step_graph_stats() const { return graphs_ ? graphs_->stats : StepGraphStats{}; }

bool Model::forward_recorded(const ForwardBatch& batch) {
  StepGraphs& g = *graphs_;
  if (batch.seqs.empty()) return false;
  // The shape: every sequence the same chunk length, row states and logit rows, and every
  // one within the fixed table width.
  const SequenceChunk& first = batch.seqs.front();
  const auto n = static_cast<int64_t>(first.tokens.size());
  const auto n_states = static_cast<int64_t>(first.row_state_slots.size());
  const int32_t n_logits = first.logit_rows;
  if (n < 1 || n > kernels::kStepGraphMaxChunk) return false;
  const int64_t max_len = int64_t{g.table_blocks} * block_size_;
  int64_t longest = 0;
  for (const SequenceChunk& s : batch.seqs) {
    if (static_cast<int64_t>(s.tokens.size()) != n || static_cast<int64_t>(s.row_state_slots.size()) != n_states ||
        s.logit_rows != n_logits || s.n_cached + n > max_len || !s.snapshot_rows.empty())
      return false;
    longest = std::max(longest, s.n_cached + n);
    // Ids past the engine's pools (the pads') are left to the eager plan to refuse.
    if (s.state_slot >= num_slots_) return false;
    for (kvcache::SlotId r : s.row_state_slots)
      if (r >= num_slots_) return false;
    const auto used = static_cast<size_t>(std::min<int64_t>((s.n_cached + n + block_size_ - 1) / block_size_,
                                                            static_cast<int64_t>(s.block_ids.size())));
    for (size_t b = 0; b < used; ++b)
      if (s.block_ids[b] >= num_blocks_) return false;
  }
  const int32_t table_blocks = kernels::step_table_blocks(longest, block_size_, g.table_blocks);
  const auto n_real = static_cast<int32_t>(batch.seqs.size());
  const int32_t bucket = kernels::step_graph_batch(n_real, g.options.max_batch);
  if (bucket == 0) return false;

  // Padding sequences: token 0 at position 0 on the pad blocks and the pad slot.
  const int32_t n_pad = bucket - n_real;
  std::vector<int32_t> pad_ids(static_cast<size_t>(pad_blocks_));
  for (int32_t b = 0; b < pad_blocks_; ++b) pad_ids[static_cast<size_t>(b)] = num_blocks_ + b;
  const std::vector<int32_t> pad_states(static_cast<size_t>(n_states), pad_slot_);
  const std::vector<int32_t> pad_tokens(static_cast<size_t>(n), 0);
  std::vector<SequenceChunk> all_spans(batch.seqs.begin(), batch.seqs.end());
  for (int32_t p = 0; p < n_pad; ++p)
    all_spans.push_back(SequenceChunk{pad_tokens, 0, pad_ids, pad_slot_, n_logits, pad_states});
  const std::unique_ptr<kernels::BatchPlan> plan = backend_->plan(
      kernels::BatchDesc{.seqs = all_spans, .block_size = block_size_, .num_blocks = num_blocks_ + pad_blocks_,
                         .num_slots = num_slots_ + 1, .vocab_size = config_.vocab_size,
                         .table_blocks = table_blocks, .n_padding = n_pad});
  const int64_t T = plan->num_rows();
  const auto R = static_cast<int64_t>(plan->logit_rows().size());
  workspace(T, R);

  const bool lora = !step_lora_slots_.empty();
  StepGraphs::Entry& e = g.entries[StepGraphs::Key{bucket, n, n_states, n_logits, table_blocks, lora}];
  auto& be = *backend_;
  // Every step of a LoRA shape applies every site, eager or recorded, so the first (eager)
  // step sizes what the recording reads.
  struct EverySite {
    bool& flag;
    ~EverySite() { flag = false; }
  } every_site{lora_every_site_};
  lora_every_site_ = lora;
  auto eager = [&] {
    run_step(*plan, T, R);
    ++g.stats.padded_eager;
  };
  if (!g.options.record || e.failed || !e.warm) {
    // A shape's first step sizes every buffer it needs, so that recording allocates nothing.
    eager();
    e.warm = true;
  } else if (e.graph && e.ws_generation == ws_generation_ && be.replay(*e.graph)) {
    ++g.stats.replayed;
  } else {
    // No recording yet, or a stale one (the memory it reads was reallocated since): record,
    // then replay it, which runs the step.
    e.graph.reset();
    std::string why;
    bool recording = false;
    try {
      be.begin_recording();
      recording = true;
      run_step(*plan, T, R);
    } catch (const std::exception& ex) {
      if (recording) be.end_recording(why);
      why = ex.what();
    }
    if (why.empty()) e.graph = be.end_recording(why);
    if (e.graph) {
      e.ws_generation = ws_generation_;
      ++g.stats.recorded;
      if (!be.replay(*e.graph)) throw std::logic_error("step graphs: a fresh recording is stale");
      ++g.stats.replayed;
    } else {
      spdlog::warn("step graphs: recording a step of {} x {} tokens failed ({}); that shape runs eagerly", bucket, n,
                   why);
      e.failed = true;
      ++g.stats.failed;
      eager();
    }
  }
  // The real sequences' rows and logits come first; the padding's are dropped.
  const int64_t real_logits = int64_t{n_real} * n_logits;
  logits_.tensor_ = real_logits > 0 ? ws_->logits.rows(0, real_logits) : kernels::Tensor();
  if (weights_.mtp) target_rows_ = int64_t{n_real} * n;
  return true;
}

}  // namespace ds::qwen35

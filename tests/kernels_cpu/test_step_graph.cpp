// Recorded steps' host logic (kernels/step_graph.h, kernels/batch_plan.h): the recorded batch
// sizes, the table widths, and the plan's padding sequences and fixed table width.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernels/batch_plan.h"
#include "kernels/step_graph.h"

using namespace ds;
using Catch::Matchers::Contains;

TEST_CASE("step graphs: recorded batch sizes follow vLLM's list up to max_num_seqs", "[kernels]") {
  CHECK(kernels::step_graph_batches(1) == std::vector<int32_t>{1});
  CHECK(kernels::step_graph_batches(3) == std::vector<int32_t>{1, 2, 3});
  CHECK(kernels::step_graph_batches(16) == std::vector<int32_t>{1, 2, 4, 8, 16});
  CHECK(kernels::step_graph_batches(20) == std::vector<int32_t>{1, 2, 4, 8, 16, 20});
  const auto all = kernels::step_graph_batches(1 << 20);
  CHECK(all.back() == kernels::kStepGraphMaxBatch);
  CHECK(all[3] == 8);
  CHECK(all[4] == 16);
  CHECK(all[5] == 24);
  CHECK(std::find(all.begin(), all.end(), 248) != all.end());
  CHECK(std::find(all.begin(), all.end(), 256) != all.end());
  CHECK(std::find(all.begin(), all.end(), 264) == all.end());
  CHECK(std::find(all.begin(), all.end(), 272) != all.end());
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i] > all[i - 1]);

  CHECK(kernels::step_graph_batch(0, 64) == 0);
  CHECK(kernels::step_graph_batch(1, 64) == 1);
  CHECK(kernels::step_graph_batch(3, 64) == 4);
  CHECK(kernels::step_graph_batch(5, 64) == 8);
  CHECK(kernels::step_graph_batch(17, 64) == 24);
  CHECK(kernels::step_graph_batch(64, 64) == 64);
  CHECK(kernels::step_graph_batch(65, 64) == 0);
  CHECK(kernels::step_graph_batch(30, 30) == 30);  // max_num_seqs itself is recorded
  CHECK(kernels::step_graph_batch(600, 1024) == 0);
}

TEST_CASE("step graphs: table widths are powers of two from 64 blocks, at most the widest", "[kernels]") {
  CHECK(kernels::step_table_blocks(1, 16, 256) == 64);
  CHECK(kernels::step_table_blocks(1024, 16, 256) == 64);
  CHECK(kernels::step_table_blocks(1025, 16, 256) == 128);
  CHECK(kernels::step_table_blocks(4096, 16, 256) == 256);
  CHECK(kernels::step_table_blocks(4097, 16, 256) == 0);
  CHECK(kernels::step_table_blocks(100, 16, 40) == 40);  // a narrow maximum is the only width
}

namespace {

struct Seq {
  int64_t n_tokens, n_cached;
  int32_t slot;
  std::vector<int32_t> blocks;
  std::vector<int32_t> row_states = {};
};

kernels::BatchPlan plan(const std::vector<Seq>& seqs, int32_t n_padding, int32_t table_blocks = 0) {
  static const std::vector<int32_t> zeros(64, 0);
  std::vector<kernels::SequenceChunk> spans;
  for (const auto& s : seqs)
    spans.push_back({std::span<const int32_t>(zeros).first(static_cast<size_t>(s.n_tokens)), s.n_cached, s.blocks, s.slot,
                     0, s.row_states});
  kernels::BatchDesc d;
  d.seqs = spans;
  d.block_size = 16;
  d.num_blocks = 10;
  d.num_slots = 10;
  d.vocab_size = 100;
  d.table_blocks = table_blocks;
  d.n_padding = n_padding;
  return kernels::BatchPlan(d);
}

std::string error(const std::vector<Seq>& seqs, int32_t n_padding, int32_t table_blocks = 0) {
  try {
    plan(seqs, n_padding, table_blocks);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("step graphs: padding sequences share the pad slot and block, never a real one's", "[kernels]") {
  // Two real decodes, two padding sequences on pad block 9 and pad slot 9.
  const std::vector<Seq> ok{{1, 20, 0, {1, 2}}, {1, 5, 1, {3}}, {1, 0, 9, {9}}, {1, 0, 9, {9}}};
  const kernels::BatchPlan p = plan(ok, 2, 4);
  CHECK(p.n_padding() == 2);
  CHECK(p.table_blocks() == 4);
  CHECK(p.num_rows() == 4);
  CHECK(p.kv_slots()[2] == p.kv_slots()[3]);
  // Verify chunks with row states: the padding's all on the pad slot.
  CHECK(error({{3, 0, 0, {1}, {2, 3}}, {3, 0, 9, {9}, {9, 9}}, {3, 0, 9, {9}, {9, 9}}}, 2).empty());

  // Without padding, sharing is refused as always.
  CHECK_THAT(error(ok, 0), Contains("share a state slot"));
  CHECK_THAT(error(ok, 1), Contains("uses state slot 9 of a real sequence"));
  // Padding may not touch a real sequence's slot, row-state slot or K/V slot.
  CHECK_THAT(error({{1, 0, 0, {1}}, {1, 0, 0, {9}}}, 1), Contains("padding sequence uses state slot 0"));
  CHECK_THAT(error({{3, 0, 0, {1}, {2, 3}}, {3, 0, 9, {9}, {3, 9}}}, 1), Contains("padding sequence uses state slot 3"));
  CHECK_THAT(error({{1, 0, 0, {1}}, {1, 0, 9, {1}}}, 1), Contains("real sequence's K/V slot"));
  // At least one real sequence; a sensible count.
  CHECK_THAT(error(ok, 4), Contains("at least one real sequence"));
  CHECK_THAT(error(ok, -1), Contains("padding of -1"));
  // A fixed table width holds every sequence.
  CHECK_THAT(error(ok, 2, 1), Contains("more than the table width 1"));
  CHECK_THAT(error(ok, 2, -1), Contains("negative table width"));
}
